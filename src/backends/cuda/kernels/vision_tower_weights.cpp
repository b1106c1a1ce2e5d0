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
void put_matrix(const TensorView& t, size_t rows, size_t cols, size_t stride, unsigned char* dst) {
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

void put_vector(const TensorView& t, size_t n, unsigned char* dst) {
  auto* out = reinterpret_cast<float*>(dst);
  for (size_t i = 0; i < n; ++i) out[i] = element(t, i);
}

}  // namespace

size_t VisionTowerLayout::unit_bytes(const vision::VisionTowerConfig& c, int unit) const {
  if (unit < 0 || unit > c.depth + 1) throw Error("vision tower unit " + std::to_string(unit) + " does not exist");
  if (unit == 0) return patch_bytes;
  return unit <= c.depth ? block_bytes : merger_bytes;
}

size_t VisionTowerLayout::total_bytes(const vision::VisionTowerConfig& c) const {
  return padded(patch_bytes) + size_t(c.depth) * padded(block_bytes) + padded(merger_bytes);
}

size_t VisionTowerLayout::largest_unit() const { return std::max({patch_bytes, block_bytes, merger_bytes}); }

VisionTowerLayout vision_tower_layout(const vision::VisionTowerConfig& c) {
  const size_t H = size_t(c.hidden_size), F = size_t(c.intermediate_size), D = size_t(c.patch_dim());
  const size_t M = H * size_t(c.merge_unit()), O = size_t(c.out_hidden_size);
  if (H % 8 || D % 8)
    throw Error("the CUDA vision tower needs hidden_size and the patch size (" + std::to_string(H) + ", " +
                std::to_string(D) + ") in multiples of 8");
  VisionTowerLayout L;
  L.ffn_padded = int((F + 7) / 8 * 8);
  const size_t Fp = size_t(L.ffn_padded);
  L.patch_bytes = H * D * 2;
  Packer b;
  L.block.norm1 = b.take(H * 4);
  L.block.norm2 = b.take(H * 4);
  L.block.qkv_bias = b.take(3 * H * 4);
  L.block.proj_bias = b.take(H * 4);
  L.block.gate_up_bias = b.take(2 * F * 4);
  L.block.down_bias = b.take(H * 4);
  L.block.wqkv = b.take(3 * H * H * 2);
  L.block.wproj = b.take(H * H * 2);
  L.block.wgate_up = b.take(2 * F * H * 2);
  L.block.wdown = b.take(H * Fp * 2);
  L.block_bytes = b.at;
  Packer m;
  L.merger.ln_q = m.take(H * 4);
  L.merger.fc1_bias = m.take(M * 4);
  L.merger.fc2_bias = m.take(O * 4);
  L.merger.fc1 = m.take(M * M * 2);
  L.merger.fc2 = m.take(O * M * 2);
  L.merger_bytes = m.at;
  return L;
}

std::string vision_prefix(const Checkpoint& ck) {
  return ck.has("visual.patch_embed.proj.weight") ? "visual." : "model.visual.";
}

void require_float_tower(const Checkpoint& ck, const std::string& prefix) {
  static const char* const kQuantized[] = {"qweight", "qzeros", "scales", "g_idx", "weight_scale", "input_scale",
                                           "weight_packed", "absmax", "quant_map", "quant_state"};
  for (const std::string& name : ck.names()) {
    if (name.rfind(prefix, 0) != 0) continue;
    for (const char* q : kQuantized)
      if (name.find(q) != std::string::npos)
        throw Error("--vision-host stages bf16 tower weights; the tower of " + ck.dir().string() +
                    " is quantized (tensor " + name + ")");
    DType d = ck.get(name).dtype();
    if (d != DType::BF16 && d != DType::F16 && d != DType::F32)
      throw Error("--vision-host: tensor " + name + " is not a float tensor");
  }
}

void fill_vision_unit(const vision::VisionTowerConfig& c, const VisionTowerLayout& L, const Checkpoint& ck,
                      const std::string& p, int unit, void* dst_void) {
  auto* dst = static_cast<unsigned char*>(dst_void);
  const int64_t H = c.hidden_size, F = c.intermediate_size, M = H * c.merge_unit(), O = c.out_hidden_size;
  std::memset(dst, 0, L.unit_bytes(c, unit));
  if (unit == 0) {
    TensorView t = checked(ck, p + "patch_embed.proj.weight",
                           {H, c.in_channels, c.temporal_patch_size, c.patch_size, c.patch_size});
    put_matrix(t, size_t(H), size_t(c.patch_dim()), size_t(c.patch_dim()), dst);
    return;
  }
  if (unit == c.depth + 1) {
    const std::string m = p + "merger.";
    put_vector(checked(ck, m + "ln_q.weight", {H}), size_t(H), dst + L.merger.ln_q);
    put_vector(checked(ck, m + "mlp.0.bias", {M}), size_t(M), dst + L.merger.fc1_bias);
    put_vector(checked(ck, m + "mlp.2.bias", {O}), size_t(O), dst + L.merger.fc2_bias);
    put_matrix(checked(ck, m + "mlp.0.weight", {M, M}), size_t(M), size_t(M), size_t(M), dst + L.merger.fc1);
    put_matrix(checked(ck, m + "mlp.2.weight", {O, M}), size_t(O), size_t(M), size_t(M), dst + L.merger.fc2);
    return;
  }
  const std::string b = p + "blocks." + std::to_string(unit - 1) + ".";
  const VisionBlockOffsets& o = L.block;
  put_vector(checked(ck, b + "norm1.weight", {H}), size_t(H), dst + o.norm1);
  put_vector(checked(ck, b + "norm2.weight", {H}), size_t(H), dst + o.norm2);
  put_vector(checked(ck, b + "attn.qkv.bias", {3 * H}), size_t(3 * H), dst + o.qkv_bias);
  put_vector(checked(ck, b + "attn.proj.bias", {H}), size_t(H), dst + o.proj_bias);
  put_vector(checked(ck, b + "mlp.gate_proj.bias", {F}), size_t(F), dst + o.gate_up_bias);
  put_vector(checked(ck, b + "mlp.up_proj.bias", {F}), size_t(F), dst + o.gate_up_bias + size_t(F) * 4);
  put_vector(checked(ck, b + "mlp.down_proj.bias", {H}), size_t(H), dst + o.down_bias);
  put_matrix(checked(ck, b + "attn.qkv.weight", {3 * H, H}), size_t(3 * H), size_t(H), size_t(H), dst + o.wqkv);
  put_matrix(checked(ck, b + "attn.proj.weight", {H, H}), size_t(H), size_t(H), size_t(H), dst + o.wproj);
  put_matrix(checked(ck, b + "mlp.gate_proj.weight", {F, H}), size_t(F), size_t(H), size_t(H), dst + o.wgate_up);
  put_matrix(checked(ck, b + "mlp.up_proj.weight", {F, H}), size_t(F), size_t(H), size_t(H),
             dst + o.wgate_up + size_t(F * H) * 2);
  put_matrix(checked(ck, b + "mlp.down_proj.weight", {H, F}), size_t(H), size_t(F), size_t(L.ffn_padded),
             dst + o.wdown);
}

}  // namespace fs::cuda
