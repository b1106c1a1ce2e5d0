// Picks the vision encoder's device: the CPU tower, or the CUDA tower when the build has it.
#include "core/error.h"
#include "models/model.h"
#include "vision/vision_encoder.h"

#ifdef FOLDSERVE_WITH_CUDA
#include "backends/cuda/kernels/vision_tower_cuda.h"
#endif

namespace fs::vision {

std::unique_ptr<VisionEncoder> create_vision_encoder(const VisionTowerConfig& config,
                                                     std::shared_ptr<Checkpoint> checkpoint,
                                                     const VisionEncoderOptions& options) {
  const std::string& device = options.device;
  if (device != "auto" && device != "cpu" && device != "cuda")
    throw Error("vision device must be auto, cpu or cuda (got '" + device + "')");
#ifdef FOLDSERVE_WITH_CUDA
  if (device == "cuda" || (device == "auto" && cuda_backend_available()))
    return cuda::create_cuda_vision_encoder(config, std::move(checkpoint), options);
#else
  if (device == "cuda") throw Error("this build has no CUDA backend for the vision tower");
#endif
  return create_cpu_vision_encoder(config, std::move(checkpoint), options);
}

}  // namespace fs::vision
