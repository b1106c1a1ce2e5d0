#include "models/ref_loader.h"

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
  if (p.slice) throw Error(m.what + ": " + p.name + " is sliced; a slice is copied, not read in place");
  return load_matrix(ck, p.name, int(p.shape.at(0)), int(p.shape.at(1)));
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
