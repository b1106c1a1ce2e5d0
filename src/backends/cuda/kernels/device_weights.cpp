#include "backends/cuda/kernels/device_weights.h"

#include <cstring>

#include "core/dtype.h"
#include "core/error.h"
#include "io/safetensors.h"
#include "models/weights_loader.h"

namespace fs::cuda {

namespace {

constexpr size_t kAlign = DeviceArena::kDefaultAlignment;

size_t padded(size_t bytes) { return (bytes + kAlign - 1) / kAlign * kAlign; }

class Uploader {
 public:
  Uploader(DeviceArena& arena, PinnedStage& stage, CUstream stream) : arena_(arena), stage_(stage), stream_(stream) {}

  // Stacks the matrices' rows (same column count) into one bf16 device matrix.
  CUdeviceptr matrices(const std::vector<WeightMatrix>& parts, const std::string& what) {
    size_t bytes = 0;
    for (const auto& m : parts) bytes += size_t(m.rows) * size_t(m.cols) * 2;
    DeviceSpan span = arena_.allocate(bytes, what);
    CUdeviceptr at = span.ptr;
    for (const auto& m : parts) {
      const size_t n = size_t(m.rows) * size_t(m.cols);
      if (m.dtype == DType::BF16) {
        stage_.upload(at, m.data, n * 2, stream_);
      } else {
        std::vector<uint16_t> converted(n);
        const float* src = static_cast<const float*>(m.data);
        for (size_t i = 0; i < n; ++i) converted[i] = f32_to_bf16(src[i]);
        stage_.upload(at, converted.data(), n * 2, stream_);
      }
      at += n * 2;
    }
    return span.ptr;
  }

  CUdeviceptr vectors(const std::vector<std::vector<float>>& parts, const std::string& what) {
    std::vector<float> all;
    for (const auto& v : parts) all.insert(all.end(), v.begin(), v.end());
    DeviceSpan span = arena_.allocate(all.size() * sizeof(float), what);
    stage_.upload(span.ptr, all.data(), all.size() * sizeof(float), stream_);
    return span.ptr;
  }

 private:
  DeviceArena& arena_;
  PinnedStage& stage_;
  CUstream stream_;
};

}  // namespace

DeviceWeights upload_weights(const ModelConfig& c, const Checkpoint& ck, const LlamaFamilyOptions& o, PinnedStage& stage,
                             CUstream stream) {
  const size_t H = size_t(c.hidden_size), hd = size_t(c.head_dim), Q = size_t(c.num_heads) * hd;
  const size_t KV = size_t(c.num_kv_heads) * hd, F = size_t(c.intermediate_size), V = size_t(c.vocab_size);
  const bool tied = !ck.has("lm_head.weight");
  if (tied && !c.tie_word_embeddings)
    throw Error("missing tensor lm_head.weight in " + ck.dir().string() + " (embeddings are not tied)");
  size_t per_layer = padded((Q + 2 * KV) * H * 2) + padded(H * Q * 2) + padded(2 * F * H * 2) + padded(H * F * 2) +
                     2 * padded(H * 4) + 2 * padded(hd * 4) + padded((Q + 2 * KV) * 4);
  size_t total = padded(V * H * 2) * (tied ? 1 : 2) + padded(H * 4) + per_layer * size_t(c.num_layers);

  DeviceWeights w;
  w.arena = std::make_unique<DeviceArena>(total, "model weights");
  Uploader up(*w.arena, stage, stream);
  const std::string& p = o.prefix;
  const int h = c.hidden_size, q = int(Q), kv = int(KV), f = c.intermediate_size;
  w.embed = up.matrices({load_matrix(ck, p + "embed_tokens.weight", c.vocab_size, h)}, "embeddings");
  w.head = tied ? w.embed : up.matrices({load_matrix(ck, "lm_head.weight", c.vocab_size, h)}, "lm_head");
  w.final_norm = up.vectors({load_vector(ck, p + "norm.weight", h)}, "final norm");
  w.matrix_bytes = V * H * 2 * (tied ? 1 : 2);
  for (int i = 0; i < c.num_layers; ++i) {
    const std::string l = p + "layers." + std::to_string(i) + ".";
    DeviceLayer L;
    L.attn_norm = up.vectors({load_vector(ck, l + "input_layernorm.weight", h)}, "attention norm");
    L.mlp_norm = up.vectors({load_vector(ck, l + "post_attention_layernorm.weight", h)}, "MLP norm");
    L.wqkv = up.matrices({load_matrix(ck, l + "self_attn.q_proj.weight", q, h),
                          load_matrix(ck, l + "self_attn.k_proj.weight", kv, h),
                          load_matrix(ck, l + "self_attn.v_proj.weight", kv, h)},
                         "q/k/v projections");
    L.wo = up.matrices({load_matrix(ck, l + "self_attn.o_proj.weight", h, q)}, "o projection");
    if (o.qkv_bias)
      L.qkv_bias = up.vectors({load_vector(ck, l + "self_attn.q_proj.bias", q),
                               load_vector(ck, l + "self_attn.k_proj.bias", kv),
                               load_vector(ck, l + "self_attn.v_proj.bias", kv)},
                              "q/k/v biases");
    if (o.qk_norm) {
      L.q_norm = up.vectors({load_vector(ck, l + "self_attn.q_norm.weight", c.head_dim)}, "q norm");
      L.k_norm = up.vectors({load_vector(ck, l + "self_attn.k_norm.weight", c.head_dim)}, "k norm");
    }
    L.wgate_up = up.matrices({load_matrix(ck, l + "mlp.gate_proj.weight", f, h),
                              load_matrix(ck, l + "mlp.up_proj.weight", f, h)},
                             "gate/up projections");
    L.wdown = up.matrices({load_matrix(ck, l + "mlp.down_proj.weight", h, f)}, "down projection");
    w.matrix_bytes += ((Q + 2 * KV) * H + H * Q + 2 * F * H + H * F) * 2;
    w.layers.push_back(L);
  }
  stage.wait_idle();
  return w;
}

}  // namespace fs::cuda
