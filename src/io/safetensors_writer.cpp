#include "io/safetensors_writer.h"

#include <cstring>
#include <fstream>

#include <nlohmann/json.hpp>

#include "core/error.h"

namespace fs {

size_t TensorSource::bytes() const {
  size_t n = dtype_size(dtype);
  for (int64_t d : shape) n *= size_t(d);
  return n;
}

void write_safetensors(const std::filesystem::path& path, const std::vector<TensorSource>& tensors) {
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  header["__metadata__"] = {{"format", "pt"}};
  size_t offset = 0;
  for (const auto& t : tensors) {
    header[t.name] = {{"dtype", std::string(dtype_name(t.dtype))}, {"shape", t.shape},
                      {"data_offsets", {offset, offset + t.bytes()}}};
    offset += t.bytes();
  }
  std::string text = header.dump();
  while ((8 + text.size()) % 8) text.push_back(' ');
  std::ofstream out(path, std::ios::binary);
  if (!out) throw Error("cannot create " + path.string());
  uint64_t len = text.size();
  out.write(reinterpret_cast<const char*>(&len), 8);
  out.write(text.data(), std::streamsize(text.size()));
  std::vector<uint8_t> buf(8 << 20);
  for (const auto& t : tensors) {
    const size_t total = t.bytes();
    for (size_t done = 0; done < total;) {
      size_t n = std::min(buf.size(), total - done);
      t.fill(done, buf.data(), n);
      out.write(reinterpret_cast<const char*>(buf.data()), std::streamsize(n));
      done += n;
    }
  }
  if (!out) throw Error("cannot write " + path.string());
}

static uint64_t mix(uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdull;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ull;
  return x ^ (x >> 33);
}

// Sum of four uniforms, centred: a cheap bell-shaped value with unit-ish spread.
static float value_at(uint64_t seed, uint64_t i) {
  uint64_t h = mix(seed * 0x9e3779b97f4a7c15ull + i);
  float s = 0;
  for (int k = 0; k < 4; ++k) s += float((h >> (16 * k)) & 0xffff) / 65535.0f;
  return (s - 2.0f) * 1.7320508f;
}

TensorSource random_tensor(std::string name, DType dtype, std::vector<int64_t> shape, float scale, uint64_t seed,
                           float offset) {
  TensorSource t{std::move(name), dtype, std::move(shape), {}};
  const size_t esize = dtype_size(dtype);
  t.fill = [dtype, esize, scale, seed, offset](size_t byte_offset, uint8_t* dst, size_t n) {
    for (size_t b = 0; b < n; b += esize) {
      float v = offset + scale * value_at(seed, (byte_offset + b) / esize);
      if (dtype == DType::F32) {
        std::memcpy(dst + b, &v, 4);
      } else {
        uint16_t h = dtype == DType::BF16 ? f32_to_bf16(v) : f32_to_f16(v);
        std::memcpy(dst + b, &h, 2);
      }
    }
  };
  return t;
}

}  // namespace fs
