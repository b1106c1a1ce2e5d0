#include "models/llama.h"

#include "backends/cpu/ops.h"
#include "core/error.h"
#include "io/safetensors.h"
#include "models/cpu_decoder_model.h"
#include "models/decoder_steps.h"
#include "models/forward_rows.h"
#include "models/kv_pool.h"
#include "models/paged_attention.h"
#include "models/rope_table.h"
#include "models/weights_loader.h"

namespace fs {

namespace {

struct Layer {
  std::vector<float> attn_norm, mlp_norm, q_norm, k_norm, q_bias, k_bias, v_bias;
  WeightMatrix wq, wk, wv, wo;
  SwiGluMlpWeights mlp;
};

class LlamaFamily final : public CpuDecoderModel {
 public:
  LlamaFamily(const ModelConfig& c, std::shared_ptr<Checkpoint> ck, const LlamaFamilyOptions& o)
      : config_(c), ck_(std::move(ck)), opt_(o) {
    const int H = c.hidden_size, Q = c.num_heads * c.head_dim, KV = c.num_kv_heads * c.head_dim;
    const std::string& p = o.prefix;
    ends_ = load_decoder_ends(*ck_, p, c);
    for (int i = 0; i < c.num_layers; ++i) {
      std::string l = p + "layers." + std::to_string(i) + ".";
      Layer L;
      L.attn_norm = load_vector(*ck_, l + "input_layernorm.weight", H);
      L.mlp_norm = load_vector(*ck_, l + "post_attention_layernorm.weight", H);
      L.wq = load_matrix(*ck_, l + "self_attn.q_proj.weight", Q, H);
      L.wk = load_matrix(*ck_, l + "self_attn.k_proj.weight", KV, H);
      L.wv = load_matrix(*ck_, l + "self_attn.v_proj.weight", KV, H);
      L.wo = load_matrix(*ck_, l + "self_attn.o_proj.weight", H, Q);
      if (o.qkv_bias) {
        L.q_bias = load_vector(*ck_, l + "self_attn.q_proj.bias", Q);
        L.k_bias = load_vector(*ck_, l + "self_attn.k_proj.bias", KV);
        L.v_bias = load_vector(*ck_, l + "self_attn.v_proj.bias", KV);
      }
      if (o.qk_norm) {
        L.q_norm = load_vector(*ck_, l + "self_attn.q_norm.weight", c.head_dim);
        L.k_norm = load_vector(*ck_, l + "self_attn.k_norm.weight", c.head_dim);
      }
      L.mlp = load_swiglu_mlp(*ck_, l + "mlp.", H, c.intermediate_size);
      layers_.push_back(std::move(L));
    }
    inv_freq_ = rope_inv_freq(c.rope, c.head_dim);
    sections_ = c.rope.mrope_section.empty() ? std::vector<int>{c.head_dim / 2} : c.rope.mrope_section;
  }

  const ModelConfig& config() const override { return config_; }

  size_t weight_bytes() const override {
    size_t n = ends_.bytes();
    for (const auto& L : layers_) n += L.wq.bytes() + L.wk.bytes() + L.wv.bytes() + L.wo.bytes() + L.mlp.bytes();
    return n;
  }

 private:
  std::vector<float> run(std::span<const SequenceChunk> chunks, KvPool& pool,
                         std::vector<float>* states) override {
    const ModelConfig& c = config_;
    const ForwardRows r = plan_forward_rows(chunks, c, pool.page_tokens());
    const int T = int(r.tokens.size());
    const int H = c.hidden_size, hd = c.head_dim, Q = c.num_heads * hd, KV = c.num_kv_heads * hd;
    const int F = c.intermediate_size;
    std::vector<float> x(size_t(T) * H), xn(size_t(T) * H), q(size_t(T) * Q), k(size_t(T) * KV), v(size_t(T) * KV);
    std::vector<float> attn(size_t(T) * Q), proj(size_t(T) * H), gate(size_t(T) * F), up(size_t(T) * F);
    std::vector<float> cos(size_t(T) * hd / 2), sin(size_t(T) * hd / 2);
    embed_rows(ends_.embed, r, H, x.data());
    mrope_angles(inv_freq_, sections_, r.rope_positions.data(), T, cos.data(), sin.data());
    const AttentionRows rows{chunks, r.positions, r.chunk_of, cos.data(), sin.data()};
    const AttentionHeads heads{c.num_heads, c.num_kv_heads, hd};
    if (states) states->assign(x.begin(), x.end());
    for (int li = 0; li < c.num_layers; ++li) {
      const Layer& L = layers_[size_t(li)];
      cpu::rmsnorm(x.data(), L.attn_norm.data(), T, H, float(c.rms_norm_eps), xn.data());
      cpu::matmul(xn.data(), T, L.wq, opt_.qkv_bias ? L.q_bias.data() : nullptr, q.data());
      cpu::matmul(xn.data(), T, L.wk, opt_.qkv_bias ? L.k_bias.data() : nullptr, k.data());
      cpu::matmul(xn.data(), T, L.wv, opt_.qkv_bias ? L.v_bias.data() : nullptr, v.data());
      if (opt_.qk_norm) {
        cpu::rmsnorm(q.data(), L.q_norm.data(), T * c.num_heads, hd, float(c.rms_norm_eps), q.data());
        cpu::rmsnorm(k.data(), L.k_norm.data(), T * c.num_kv_heads, hd, float(c.rms_norm_eps), k.data());
      }
      cpu::rope(q.data(), T, c.num_heads, hd, cos.data(), sin.data());
      cpu::rope(k.data(), T, c.num_kv_heads, hd, cos.data(), sin.data());
      store_paged_kv(rows, li, k.data(), v.data(), pool);
      paged_attention(rows, heads, pool, li, q.data(), attn.data());
      cpu::matmul(attn.data(), T, L.wo, nullptr, proj.data());
      add_residual(x, proj);
      cpu::rmsnorm(x.data(), L.mlp_norm.data(), T, H, float(c.rms_norm_eps), xn.data());
      swiglu_mlp(L.mlp, xn.data(), T, gate.data(), up.data(), proj.data());
      add_residual(x, proj);
      if (states && li + 1 < c.num_layers) states->insert(states->end(), x.begin(), x.end());
    }
    return final_logits(x, r, ends_, c, states);
  }

  ModelConfig config_;
  std::shared_ptr<Checkpoint> ck_;
  LlamaFamilyOptions opt_;
  DecoderEnds ends_;
  std::vector<Layer> layers_;
  std::vector<float> inv_freq_;
  std::vector<int> sections_;
};

}  // namespace

std::unique_ptr<Model> create_llama_family(const ModelConfig& config, std::shared_ptr<Checkpoint> checkpoint,
                                           const LlamaFamilyOptions& options) {
  return std::make_unique<LlamaFamily>(config, std::move(checkpoint), options);
}

}  // namespace fs
