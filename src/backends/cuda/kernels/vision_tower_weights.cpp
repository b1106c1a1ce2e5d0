#include "backends/cuda/kernels/vision_tower_weights.h"

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "core/dtype.h"
#include "core/error.h"
#include "io/safetensors.h"

namespace fs::cuda {

namespace {

constexpr size_t kAlign = 256;

size_t padded(size_t bytes) { return (bytes + kAlign - 1) / kAlign * kAlign; }

// Hands out aligned offsets inside one unit.
struct Packer {
  size_t at = 0;
  size_t take(size_t bytes) {
    size_t here = at;
    at += padded(bytes);
    return here;
  }
};

std::string shape_text(const std::vector<int64_t>& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + "]";
}

float element(const TensorView& t, size_t i) {
  const auto* bytes = static_cast<const uint8_t*>(t.data);
  if (t.dtype() == DType::F32) {
    float f;
    std::memcpy(&f, bytes + i * 4, 4);
    return f;
  }
  uint16_t h;
  std::memcpy(&h, bytes + i * 2, 2);
  return t.dtype() == DType::BF16 ? bf16_to_f32(h) : f16_to_f32(h);
}

TensorView checked(const Checkpoint& ck, const std::string& name, const std::vector<int64_t>& shape) {
  TensorView t = ck.get(name);
  if (t.shape() != shape)
    throw Error(ck.dir().string() + ": tensor " + name + " has shape " + shape_text(t.shape()) + ", expected " +
                shape_text(shape));
  return t;
}

// A [rows, cols] tensor (any shape of that many elements) as bf16 rows of `stride` elements, zero padded.
void put_rows(const TensorView& t, size_t rows, size_t cols, size_t stride, unsigned char* dst) {
  auto* out = reinterpret_cast<uint16_t*>(dst);
  for (size_t r = 0; r < rows; ++r) {
    uint16_t* row = out + r * stride;
    if (t.dtype() == DType::BF16) {
      std::memcpy(row, static_cast<const uint8_t*>(t.data) + r * cols * 2, cols * 2);
    } else {
      for (size_t c = 0; c < cols; ++c) row[c] = f32_to_bf16(element(t, r * cols + c));
    }
    std::fill(row + cols, row + stride, uint16_t{0});
  }
}

void put_vector(const Checkpoint& ck, const VectorRef& v, unsigned char* dst) {
  auto* out = reinterpret_cast<float*>(dst);
  for (const TensorPart& part : v.parts) {
    const TensorView t = checked(ck, part.name, part.shape);
    for (size_t i = 0; i < part.elements(); ++i) *out++ = element(t, i);
  }
}

// A matrix's parts stacked by rows, as bf16 rows of `stride` elements.
void put_matrix(const Checkpoint& ck, const MatrixRef& m, size_t stride, unsigned char* dst) {
  for (const TensorPart& part : m.parts) {
    const size_t rows = size_t(part.shape.at(0)), cols = part.elements() / rows;
    put_rows(checked(ck, part.name, part.shape), rows, cols, stride, dst);
    dst += rows * stride * 2;
  }
}

VisionNormOffsets take_norm(Packer& p, const VisionNormRef& n) {
  VisionNormOffsets o;
  o.weight = p.take(size_t(n.weight.size()) * 4);
  if (!n.bias.empty()) o.bias = p.take(size_t(n.bias.size()) * 4);
  return o;
}

void put_norm(const Checkpoint& ck, const VisionNormRef& n, const VisionNormOffsets& o, unsigned char* dst) {
  put_vector(ck, n.weight, dst + o.weight);
  if (!n.bias.empty()) put_vector(ck, n.bias, dst + o.bias);
}

}  // namespace

size_t VisionTowerLayout::unit_bytes(int unit) const {
  if (unit < 0 || unit > depth + 1) throw Error("vision tower unit " + std::to_string(unit) + " does not exist");
  if (unit == 0) return patch_bytes;
  return unit <= depth ? block_bytes : merger_bytes;
}

size_t VisionTowerLayout::total_bytes() const {
  return padded(patch_bytes) + size_t(depth) * padded(block_bytes) + padded(merger_bytes);
}

size_t VisionTowerLayout::largest_unit() const { return std::max({patch_bytes, block_bytes, merger_bytes}); }

VisionTowerLayout vision_tower_layout(const VisionProgram& v) {
  const vision::VisionTowerConfig& c = v.config;
  const size_t H = size_t(c.hidden_size), F = size_t(c.intermediate_size), D = size_t(c.patch_dim());
  const size_t M = H * size_t(c.merge_unit()), O = size_t(c.out_hidden_size);
  if (H % 8 || D % 8)
    throw Error("the CUDA vision tower needs hidden_size and the patch size (" + std::to_string(H) + ", " +
                std::to_string(D) + ") in multiples of 8");
  if (v.blocks.empty()) throw Error("the " + v.family + " vision tower has no blocks");
  VisionTowerLayout L;
  L.depth = int(v.blocks.size());
  L.mlp_in_rows = v.blocks.front().mlp_in.rows();
  L.ffn_padded = int((F + 7) / 8 * 8);
  const size_t Fp = size_t(L.ffn_padded), In = size_t(L.mlp_in_rows);
  Packer u;
  L.patch.weight = u.take(H * D * 2);
  if (!v.patch_bias.empty()) L.patch.bias = u.take(H * 4);
  if (!v.position_grid.empty()) L.patch.grid = u.take(size_t(v.position_grid.size()) * 4);
  L.patch_bytes = u.at;
  const VisionBlockProgram& blk = v.blocks.front();
  Packer b;
  L.block.norm1 = take_norm(b, blk.norm1);
  L.block.norm2 = take_norm(b, blk.norm2);
  L.block.qkv_bias = b.take(3 * H * 4);
  L.block.proj_bias = b.take(H * 4);
  L.block.mlp_in_bias = b.take(In * 4);
  L.block.mlp_out_bias = b.take(H * 4);
  L.block.wqkv = b.take(3 * H * H * 2);
  L.block.wproj = b.take(H * H * 2);
  L.block.wmlp_in = b.take(In * H * 2);
  L.block.wmlp_out = b.take(H * Fp * 2);
  L.block_bytes = b.at;
  Packer m;
  L.merger.norm = take_norm(m, v.merger.norm);
  L.merger.fc1_bias = m.take(M * 4);
  L.merger.fc2_bias = m.take(O * 4);
  L.merger.fc1 = m.take(M * M * 2);
  L.merger.fc2 = m.take(O * M * 2);
  L.merger_bytes = m.at;
  return L;
}

void require_float_tower(const Checkpoint& ck, const VisionProgram& v) {
  static const char* const kQuantized[] = {"qweight", "qzeros", "scales", "g_idx", "weight_scale", "input_scale",
                                           "weight_packed", "absmax", "quant_map", "quant_state"};
  for (const std::string& name : ck.names()) {
    if (name.rfind(v.prefix, 0) != 0) continue;
    for (const char* q : kQuantized)
      if (name.find(q) != std::string::npos)
        throw Error("--vision-host stages bf16 tower weights; the tower of " + ck.dir().string() +
                    " is quantized (tensor " + name + ")");
    DType d = ck.get(name).dtype();
    if (d != DType::BF16 && d != DType::F16 && d != DType::F32)
      throw Error("--vision-host: tensor " + name + " is not a float tensor");
  }
}

void fill_vision_unit(const VisionProgram& v, const VisionTowerLayout& L, const Checkpoint& ck, int unit,
                      void* dst_void) {
  auto* dst = static_cast<unsigned char*>(dst_void);
  const size_t H = size_t(v.config.hidden_size), D = size_t(v.config.patch_dim()), M = H * size_t(v.config.merge_unit());
  std::memset(dst, 0, L.unit_bytes(unit));
  if (unit == 0) {
    put_rows(checked(ck, v.patch_embed.name, v.patch_embed.shape), H, D, D, dst + L.patch.weight);
    if (!v.patch_bias.empty()) put_vector(ck, v.patch_bias, dst + L.patch.bias);
    if (!v.position_grid.empty()) put_vector(ck, v.position_grid, dst + L.patch.grid);
    return;
  }
  if (unit == L.depth + 1) {
    const VisionMergerProgram& g = v.merger;
    const VisionMergerOffsets& o = L.merger;
    put_norm(ck, g.norm, o.norm, dst);
    put_vector(ck, g.fc1_bias, dst + o.fc1_bias);
    put_vector(ck, g.fc2_bias, dst + o.fc2_bias);
    put_matrix(ck, g.fc1, M, dst + o.fc1);
    put_matrix(ck, g.fc2, M, dst + o.fc2);
    return;
  }
  const VisionBlockProgram& b = v.blocks.at(size_t(unit - 1));
  const VisionBlockOffsets& o = L.block;
  put_norm(ck, b.norm1, o.norm1, dst);
  put_norm(ck, b.norm2, o.norm2, dst);
  put_vector(ck, b.qkv_bias, dst + o.qkv_bias);
  put_vector(ck, b.proj_bias, dst + o.proj_bias);
  put_vector(ck, b.mlp_in_bias, dst + o.mlp_in_bias);
  put_vector(ck, b.mlp_out_bias, dst + o.mlp_out_bias);
  put_matrix(ck, b.qkv, H, dst + o.wqkv);
  put_matrix(ck, b.proj, H, dst + o.wproj);
  put_matrix(ck, b.mlp_in, H, dst + o.wmlp_in);
  put_matrix(ck, b.mlp_out, size_t(L.ffn_padded), dst + o.wmlp_out);
}

}  // namespace fs::cuda
