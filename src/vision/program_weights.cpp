#include "vision/program_weights.h"

#include <cstring>
#include <memory>

#include "core/dtype.h"
#include "core/error.h"
#include "io/safetensors.h"

namespace fs::vision {

WeightMatrix load_patch_embed(const Checkpoint& ck, const TensorPart& part) {
  TensorView t = ck.get(part.name);
  if (t.shape() != part.shape)
    throw Error(ck.dir().string() + ": tensor " + part.name + " does not have the conv3d shape of vision_config");
  if (t.dtype() != DType::BF16 && t.dtype() != DType::F32 && t.dtype() != DType::F16)
    throw Error(ck.dir().string() + ": tensor " + part.name + " has an unsupported dtype");
  const int hidden = int(part.shape.at(0));
  const int patch_dim = int(part.elements() / size_t(hidden));
  auto buf = std::make_shared<std::vector<float>>(size_t(hidden) * size_t(patch_dim));
  const auto* bytes = static_cast<const uint8_t*>(t.data);
  for (size_t i = 0; i < buf->size(); ++i) {
    if (t.dtype() == DType::F32) {
      std::memcpy(&(*buf)[i], bytes + i * 4, 4);
    } else {
      uint16_t h;
      std::memcpy(&h, bytes + i * 2, 2);
      (*buf)[i] = t.dtype() == DType::BF16 ? bf16_to_f32(h) : f16_to_f32(h);
    }
  }
  WeightMatrix w;
  w.dtype = DType::F32;
  w.rows = hidden;
  w.cols = patch_dim;
  w.data = buf->data();
  w.owned = std::move(buf);
  return w;
}

}  // namespace fs::vision
