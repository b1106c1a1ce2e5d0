#include "models/ref_loader.h"

#include <cstring>
#include <string>

#include "core/error.h"
#include "io/safetensors.h"
#include "models/weights_loader.h"

namespace fs {

namespace {

template <typename Ref>
const TensorPart& part_of(const Ref& ref, size_t part) {
  if (part >= ref.parts.size()) throw Error(ref.what + " has no part " + std::to_string(part));
  return ref.parts[part];
}

}  // namespace

WeightMatrix load_part_matrix(const Checkpoint& ck, const MatrixRef& m, size_t part) {
  const TensorPart& p = part_of(m, part);
  WeightMatrix w = load_matrix(ck, p.name, int(p.shape.at(0)), int(p.shape.at(1)));
  if (!p.slice) return w;
  const std::shared_ptr<std::vector<float>> whole = w.owned;  // keeps a widened tensor alive while it is copied
  w.rows = int(p.placed_rows());
  w.cols = int(p.placed_cols());
  if (w.dtype == DType::F32) {
    w.owned = std::make_shared<std::vector<float>>(placed_elements(p, static_cast<const float*>(w.data)));
  } else {  // bf16 bits kept as they are, in a float buffer's bytes
    const std::vector<uint16_t> bits = placed_elements(p, static_cast<const uint16_t*>(w.data));
    w.owned = std::make_shared<std::vector<float>>((bits.size() + 1) / 2);
    std::memcpy(w.owned->data(), bits.data(), bits.size() * sizeof(uint16_t));
  }
  w.data = w.owned->data();
  return w;
}

std::vector<float> load_part_floats(const Checkpoint& ck, const VectorRef& v, size_t part) {
  const TensorPart& p = part_of(v, part);
  const std::vector<float> whole = load_floats(ck, p.name, p.shape);
  std::vector<float> w = placed_elements(p, whole.data());
  return v.plus_one ? one_plus(std::move(w)) : w;
}

std::vector<float> load_ref_floats(const Checkpoint& ck, const VectorRef& v) {
  std::vector<float> all;
  for (size_t i = 0; i < v.parts.size(); ++i) {
    const std::vector<float> part = load_part_floats(ck, v, i);
    all.insert(all.end(), part.begin(), part.end());
  }
  return all;
}

}  // namespace fs
