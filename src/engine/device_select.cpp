// Chooses the backend a model runs on.
#include "core/error.h"
#include "io/safetensors.h"
#include "models/model.h"

#ifdef FOLDSERVE_WITH_CUDA
#include "backends/cuda/kernels/cuda_model.h"
#endif

namespace fs {

bool cuda_backend_available() {
#ifdef FOLDSERVE_WITH_CUDA
  return cuda_device_available();
#else
  return false;
#endif
}

std::unique_ptr<Model> create_model_on(const std::string& device, const ModelConfig& config,
                                       std::shared_ptr<Checkpoint> checkpoint) {
  if (device != "auto" && device != "cpu" && device != "cuda")
    throw Error("device must be auto, cpu or cuda (got '" + device + "')");
#ifdef FOLDSERVE_WITH_CUDA
  if (device == "cuda" || (device == "auto" && cuda_backend_available()))
    return create_cuda_model(config, std::move(checkpoint));
#else
  if (device == "cuda") throw Error("this build has no CUDA backend (configure with nvcc to compile it)");
#endif
  return create_model(config, std::move(checkpoint));
}

}  // namespace fs
