#include "models/weights_loader.h"

#include <cstring>

#include "core/error.h"

namespace fs {

static std::string shape_text(const std::vector<int64_t>& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + "]";
}

// Element i of a tensor as float, read byte-wise so unaligned mappings are safe.
static float element_to_f32(DType dtype, const uint8_t* data, size_t i) {
  if (dtype == DType::F32) {
    float f;
    std::memcpy(&f, data + i * 4, 4);
    return f;
  }
  uint16_t h;
  std::memcpy(&h, data + i * 2, 2);
  return dtype == DType::BF16 ? bf16_to_f32(h) : f16_to_f32(h);
}

static void check_shape(const Checkpoint& ck, const TensorView& t, const std::string& name,
                        const std::vector<int64_t>& want) {
  if (t.shape() != want)
    throw Error(ck.dir().string() + ": tensor " + name + " has shape " + shape_text(t.shape()) + ", expected " +
                shape_text(want));
}

WeightMatrix load_matrix(const Checkpoint& ck, const std::string& name, int rows, int cols) {
  TensorView t = ck.get(name);
  check_shape(ck, t, name, {rows, cols});
  WeightMatrix w;
  w.rows = rows;
  w.cols = cols;
  bool misaligned = reinterpret_cast<uintptr_t>(t.data) % dtype_size(t.dtype()) != 0;
  if (t.dtype() == DType::F16 || misaligned) {
    auto buf = std::make_shared<std::vector<float>>(size_t(rows) * size_t(cols));
    const auto* bytes = static_cast<const uint8_t*>(t.data);
    for (size_t i = 0; i < buf->size(); ++i) (*buf)[i] = element_to_f32(t.dtype(), bytes, i);
    w.dtype = DType::F32;
    w.data = buf->data();
    w.owned = std::move(buf);
  } else {
    w.dtype = t.dtype();
    w.data = t.data;
  }
  return w;
}

std::vector<float> load_floats(const Checkpoint& ck, const std::string& name, const std::vector<int64_t>& shape) {
  TensorView t = ck.get(name);
  check_shape(ck, t, name, shape);
  size_t n = 1;
  for (int64_t d : shape) n *= size_t(d);
  std::vector<float> out(n);
  const auto* bytes = static_cast<const uint8_t*>(t.data);
  for (size_t i = 0; i < n; ++i) out[i] = element_to_f32(t.dtype(), bytes, i);
  return out;
}

std::vector<float> load_vector(const Checkpoint& ck, const std::string& name, int n) {
  TensorView t = ck.get(name);
  check_shape(ck, t, name, {n});
  std::vector<float> out(static_cast<size_t>(n));
  const auto* bytes = static_cast<const uint8_t*>(t.data);
  for (int i = 0; i < n; ++i) out[size_t(i)] = element_to_f32(t.dtype(), bytes, size_t(i));
  return out;
}

std::vector<float> one_plus(std::vector<float> w) {
  for (float& x : w) x = 1.0f + x;
  return w;
}

}  // namespace fs
