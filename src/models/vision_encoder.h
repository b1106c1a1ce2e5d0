#pragma once
// A vision tower ready to encode images on some device: the CPU tower, the CUDA tower with its weights on the
// device, or the CUDA tower with its weights in pinned host memory staged unit by unit (--vision-host).
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "models/encode_cancel.h"
#include "models/vision_patches.h"
#include "models/vision_tower_config.h"

namespace fs::vision {

struct VisionEncoderOptions {
  std::string device = "auto";  // "cpu", "cuda" or "auto" (cuda when compiled in and a GPU is present)
  bool weights_on_host = false;  // --vision-host: tower weights in pinned host memory, staged per unit
  int64_t max_patches = 0;       // largest admitted image, in patches (sizes the pinned image stage)
};

// What an encoder holds and has done, for budget lines, /metrics and benchmarks.
struct VisionEncoderStats {
  size_t device_weight_bytes = 0;  // tower weights resident on the device (0 on the CPU or with --vision-host)
  size_t device_slot_bytes = 0;    // --vision-host: the device slot one unit's weights are staged into
  size_t host_weight_bytes = 0;    // weights in host memory (pinned with --vision-host)
  size_t device_scratch_bytes = 0; // activations for the largest admitted image
  size_t pinned_stage_bytes = 0;   // the image upload stage
  uint64_t pinned_allocations = 0; // cuMemHostAlloc calls by this encoder so far
  uint64_t pinned_frees = 0;       // cuMemFreeHost calls by this encoder so far
  uint64_t images = 0;             // images encoded
  double last_encode_ms = 0;       // wall time of the last encode
  uint64_t cancelled = 0;          // encodes stopped because the client left or the server drained
};

class VisionEncoder {
 public:
  virtual ~VisionEncoder() = default;
  virtual const VisionTowerConfig& config() const = 0;
  // Merged features [patches / merge_unit, out_hidden_size] in raster order of merged units. Not thread-safe:
  // callers serialize encodes.
  virtual std::vector<float> encode(const PixelPatches& patches) = 0;
  // As encode(), stopping with EncodeCancelled once `cancel` is set (between units and inside long ones); an
  // encoder that cannot stop midway runs to the end.
  virtual std::vector<float> encode_cancellable(const PixelPatches& patches, const CancelFlag& cancel) {
    throw_if_cancelled(&cancel);
    return encode(patches);
  }
  virtual size_t weight_bytes() const = 0;
  virtual const char* device_name() const = 0;
  // Lines for the start-up memory budget (one fact per line, with numbers).
  virtual std::vector<std::string> budget_lines() const = 0;
  virtual VisionEncoderStats stats() const = 0;
};

}  // namespace fs::vision
