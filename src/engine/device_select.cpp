// Chooses the backend a model runs on.
#include "core/error.h"
#include "io/safetensors.h"
#include "models/model.h"

#ifdef FOLDSERVE_WITH_CUDA
#include "backends/cuda/host/device.h"
#include "backends/cuda/kernels/cuda_model.h"
#include "backends/cuda/kernels/tensor_parallel_model.h"
#endif

namespace fs {

bool cuda_backend_available() {
#ifdef FOLDSERVE_WITH_CUDA
  return cuda_device_available();
#else
  return false;
#endif
}

int cuda_backend_devices() {
#ifdef FOLDSERVE_WITH_CUDA
  return cuda::visible_device_count();
#else
  return 0;
#endif
}

std::unique_ptr<Model> create_model_on(const std::string& device, const ModelConfig& config,
                                       std::shared_ptr<Checkpoint> checkpoint, int tensor_parallel) {
  if (device != "auto" && device != "cpu" && device != "cuda")
    throw Error("device must be auto, cpu or cuda (got '" + device + "')");
  if (tensor_parallel < 1) throw Error("tensor parallelism needs at least 1 GPU");
  if (tensor_parallel > 1 && device == "cpu") throw Error("tensor parallelism runs on CUDA GPUs, not on the cpu");
#ifdef FOLDSERVE_WITH_CUDA
  if (tensor_parallel > 1) return create_tensor_parallel_model(config, std::move(checkpoint), tensor_parallel);
  if (device == "cuda" || (device == "auto" && cuda_backend_available()))
    return create_cuda_model(config, std::move(checkpoint));
#else
  if (device == "cuda" || tensor_parallel > 1)
    throw Error("this build has no CUDA backend (configure with nvcc to compile it)");
#endif
  return create_model(config, std::move(checkpoint));
}

}  // namespace fs
