#pragma once
// Recurrent state on the device for models with Gated DeltaNet layers: one slot per pool state slot plus one for
// padded decode rows, the per-pass sequence descriptors the DeltaNet kernels read, and prompt-cache snapshots.
#include <memory>
#include <span>
#include <vector>

#include "backends/cuda/host/device_arena.h"
#include "backends/cuda/host/downloader.h"
#include "backends/cuda/host/pinned_stage.h"
#include "backends/cuda/kernels/deltanet_ops.h"
#include "models/model.h"

namespace fs::cuda {

// The sequences of one pass as the DeltaNet kernels see them, and where their snapshots go on the host.
struct StateRows {
  std::vector<kernels::DeltaNetSeq> seqs;
  std::vector<kernels::DeltaNetSnapshot> taps;
  std::vector<float*> tap_targets;  // host destination of each tap (state_floats floats), null for one into pages
  std::vector<std::span<const int32_t>> tap_pages;  // the snapshot pages of each tap that goes into pages
  int chunked = 0;  // sequences marked for the chunked form (prompt rows of a model that aligns them)

  // Adds a chunk whose rows start at `first_row`; `slot_floats` is its state slot's offset in floats; its snapshots
  // land `target_offset` floats into their host targets (a tensor-parallel rank's share). `chunked`: its rows take
  // the chunked form of the delta rule.
  void add_chunk(const SequenceChunk& chunk, int first_row, int64_t slot_floats, size_t state_floats,
                 size_t target_offset, bool chunked = false);
  // Adds `count` one-row sequences from `first_row` on, fresh, all in the padding slot.
  void add_padding(int first_row, int count, int64_t padding_floats);
  // Bytes of the descriptor block for `rows` rows (at most one sequence and one tap per row).
  static size_t descriptor_bytes(int rows);
  // The block: sequences at 0, taps at taps_offset(rows).
  std::vector<unsigned char> descriptors(int rows) const;
  static size_t taps_offset(int rows);
};

class DeviceStateSlots {
 public:
  explicit DeviceStateSlots(size_t state_floats) : state_floats_(state_floats) {}

  // Room for `slots` slots and the padding slot; contents are undefined until a fresh pass writes them.
  void attach(int slots);
  size_t state_floats() const { return state_floats_; }
  int64_t slot_floats(int32_t slot) const;
  int64_t padding_floats() const { return int64_t(slots_) * int64_t(state_floats_); }
  int slots() const { return slots_; }  // state slots of the attached pool (0 before)
  float* base() const;
  // Device floats for `taps` snapshots, grown as needed.
  float* snapshot_buffer(size_t taps, CUstream stream);
  // Copies the pass's snapshots that have host targets to them (after the pass is queued on `stream`).
  void deliver_snapshots(const StateRows& rows, Downloader& down, CUstream stream);

  // `pages` uploaded to a device list (grown as needed) for the snapshot-page copies, queued on `stream`.
  const int32_t* page_list(std::span<const int32_t> pages, PinnedStage& stage, CUstream stream);

  void save(int32_t slot, float* dst, Downloader& down, CUstream stream);
  void load(int32_t slot, const float* src, PinnedStage& stage, CUstream stream);

 private:
  size_t state_floats_;
  int slots_ = 0;
  std::unique_ptr<DeviceArena> states_, snapshots_, page_list_;
  CUdeviceptr states_base_ = 0, snapshots_base_ = 0, page_list_base_ = 0;
};

}  // namespace fs::cuda
