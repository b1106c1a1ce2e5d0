#include "models/qwen3_5.h"

#include "backends/cpu/ops.h"
#include "core/error.h"
#include "io/safetensors.h"
#include "models/cpu_decoder_model.h"
#include "models/decoder_steps.h"
#include "models/forward_rows.h"
#include "models/gated_attention.h"
#include "models/gated_deltanet.h"
#include "models/kv_pool.h"
#include "models/paged_attention.h"
#include "models/qwen3_5_options.h"
#include "models/rope_table.h"
#include "models/weights_loader.h"

namespace fs {

namespace {

struct Layer {
  bool linear = false;
  int slot = 0;  // the layer's index among the linear layers (state) or among the attention layers (KV)
  std::vector<float> input_norm, post_norm;  // 1 + w
  DeltaNetWeights deltanet;
  GatedAttentionWeights attention;
  SwiGluMlpWeights mlp;
};

class Qwen35 final : public CpuDecoderModel {
 public:
  Qwen35(const ModelConfig& c, std::shared_ptr<Checkpoint> ck)
      : config_(c), ck_(std::move(ck)), opt_(qwen3_5_options(c, ck_.get())) {
    const int H = c.hidden_size;
    const std::string& p = opt_.prefix;
    attn_shape_ = {c.num_heads, c.num_kv_heads, c.head_dim, opt_.rotary_dim, float(c.rms_norm_eps)};
    ends_ = load_decoder_ends(*ck_, p, c);
    ends_.final_norm = one_plus(std::move(ends_.final_norm));
    int linear = 0, attention = 0;
    for (int i = 0; i < c.num_layers; ++i) {
      const std::string l = p + "layers." + std::to_string(i) + ".";
      Layer L;
      L.linear = opt_.linear[size_t(i)];
      L.slot = L.linear ? linear++ : attention++;
      L.input_norm = one_plus(load_vector(*ck_, l + "input_layernorm.weight", H));
      L.post_norm = one_plus(load_vector(*ck_, l + "post_attention_layernorm.weight", H));
      if (L.linear) L.deltanet = load_deltanet(*ck_, l + "linear_attn.", opt_.deltanet, H);
      else L.attention = load_gated_attention(*ck_, l + "self_attn.", attn_shape_, H);
      L.mlp = load_swiglu_mlp(*ck_, l + "mlp.", H, c.intermediate_size);
      layers_.push_back(std::move(L));
    }
    inv_freq_ = rope_inv_freq(c.rope, opt_.rotary_dim);
    spec_ = qwen3_5_memory_spec(c);
  }

  const ModelConfig& config() const override { return config_; }
  SequenceMemorySpec memory_spec() const override { return spec_; }

  size_t weight_bytes() const override {
    size_t n = ends_.bytes();
    for (const auto& L : layers_) n += (L.linear ? L.deltanet.bytes() : L.attention.bytes()) + L.mlp.bytes();
    return n;
  }

 private:
  // Checks what the shared row plan does not: the pool's layout, state slots and snapshots.
  void check_memory(std::span<const SequenceChunk> chunks, const KvPool& pool) const {
    if (pool.layers() != spec_.kv_layers || pool.row_floats() != spec_.kv_heads * spec_.head_dim)
      throw Error("the KV pool is not laid out for this model's attention layers");
    if (spec_.has_state() && pool.state_floats() != spec_.state_floats)
      throw Error("the pool's state slots do not fit this model's recurrent state");
    for (size_t c = 0; c < chunks.size(); ++c) {
      const auto& ch = chunks[c];
      const int end = ch.start_pos + int(ch.tokens.size());
      if (spec_.has_state() && ch.state_slot < 0) throw Error("a chunk of a recurrent model carries no state slot");
      for (size_t i = 0; i < ch.state_snapshots.size(); ++i) {
        const int p = ch.state_snapshots[i].position;
        if (p <= ch.start_pos || p > end || (i > 0 && p <= ch.state_snapshots[i - 1].position))
          throw Error("state snapshots must fall inside their chunk, in ascending order");
      }
      for (size_t d = 0; d < c; ++d)
        if (spec_.has_state() && chunks[d].state_slot == ch.state_slot)
          throw Error("two chunks of one forward pass share a state slot");
    }
  }

  std::vector<float> run(std::span<const SequenceChunk> chunks, KvPool& pool,
                         std::vector<float>* states) override {
    const ModelConfig& c = config_;
    check_memory(chunks, pool);
    const ForwardRows r = plan_forward_rows(chunks, c, pool.page_tokens());
    const int T = int(r.tokens.size()), H = c.hidden_size, F = c.intermediate_size;
    const float eps = float(c.rms_norm_eps);
    std::vector<float> x(size_t(T) * H), xn(size_t(T) * H), mixed(size_t(T) * H), gate(size_t(T) * F),
        up(size_t(T) * F);
    const size_t half = size_t(opt_.rotary_dim / 2);
    std::vector<float> cos(size_t(T) * half), sin(size_t(T) * half);
    embed_rows(ends_.embed, r, H, x.data());
    interleaved_mrope_angles(inv_freq_, opt_.mrope_section, r.rope_positions.data(), T, cos.data(), sin.data());
    AttentionRows rows{chunks, r.positions, r.chunk_of, cos.data(), sin.data()};
    std::vector<DeltaNetSequence> seqs(chunks.size());
    std::vector<std::vector<DeltaNetTap>> taps(chunks.size());
    if (states) states->assign(x.begin(), x.end());
    for (int li = 0; li < c.num_layers; ++li) {
      const Layer& L = layers_[size_t(li)];
      cpu::rmsnorm(x.data(), L.input_norm.data(), T, H, eps, xn.data());
      if (L.linear) {
        const size_t offset = size_t(L.slot) * opt_.deltanet.state_floats();
        for (size_t ci = 0; ci < chunks.size(); ++ci) {
          const SequenceChunk& ch = chunks[ci];
          taps[ci].clear();
          for (const StateSnapshotTarget& t : ch.state_snapshots)
            taps[ci].push_back({t.position - ch.start_pos, t.state + offset});
          seqs[ci] = {r.first_row[ci], int(ch.tokens.size()), pool.state(ch.state_slot) + offset, ch.start_pos == 0,
                      taps[ci]};
        }
        deltanet_forward(L.deltanet, opt_.deltanet, xn.data(), T, seqs, mixed.data());
      } else {
        gated_attention_forward(L.attention, attn_shape_, xn.data(), rows, pool, L.slot, mixed.data());
      }
      add_residual(x, mixed);
      cpu::rmsnorm(x.data(), L.post_norm.data(), T, H, eps, xn.data());
      swiglu_mlp(L.mlp, xn.data(), T, gate.data(), up.data(), mixed.data());
      add_residual(x, mixed);
      if (states && li + 1 < c.num_layers) states->insert(states->end(), x.begin(), x.end());
    }
    return final_logits(x, r, ends_, c, states);
  }

  ModelConfig config_;
  std::shared_ptr<Checkpoint> ck_;
  Qwen35Options opt_;
  GatedAttentionShape attn_shape_;
  SequenceMemorySpec spec_;
  DecoderEnds ends_;
  std::vector<Layer> layers_;
  std::vector<float> inv_freq_;
};

}  // namespace

std::unique_ptr<Model> create_qwen3_5(const ModelConfig& config, std::shared_ptr<Checkpoint> checkpoint) {
  return std::make_unique<Qwen35>(config, std::move(checkpoint));
}

}  // namespace fs
