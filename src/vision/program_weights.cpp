#include "vision/program_weights.h"

#include <cstring>
#include <memory>

#include "core/dtype.h"
#include "core/error.h"
#include "io/safetensors.h"
#include "models/weights_loader.h"

namespace fs::vision {

namespace {

const TensorPart& part_of(const std::vector<TensorPart>& parts, size_t part, const std::string& what) {
  if (part >= parts.size()) throw Error("vision tower " + what + " has no part " + std::to_string(part));
  return parts[part];
}

}  // namespace

WeightMatrix load_part_matrix(const Checkpoint& ck, const MatrixRef& m, size_t part) {
  const TensorPart& p = part_of(m.parts, part, m.what);
  return load_matrix(ck, p.name, int(p.shape.at(0)), int(p.shape.at(1)));
}

std::vector<float> load_part_floats(const Checkpoint& ck, const VectorRef& v, size_t part) {
  const TensorPart& p = part_of(v.parts, part, v.what);
  std::vector<float> w = load_floats(ck, p.name, p.shape);
  return v.plus_one ? one_plus(std::move(w)) : w;
}

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
