#include "models/qwen3_5.h"

#include <algorithm>

#include "backends/cpu/ops.h"
#include "core/error.h"
#include "io/safetensors.h"
#include "models/gated_attention.h"
#include "models/gated_deltanet.h"
#include "models/kv_pool.h"
#include "models/qwen3_5_options.h"
#include "models/rope_table.h"
#include "models/weights_loader.h"

namespace fs {

namespace {

std::vector<float> one_plus(std::vector<float> w) {
  for (float& x : w) x = 1.0f + x;
  return w;
}

struct Layer {
  bool linear = false;
  int slot = 0;  // the layer's index among the linear layers (state) or among the attention layers (KV)
  std::vector<float> input_norm, post_norm;  // 1 + w
  DeltaNetWeights deltanet;
  GatedAttentionWeights attention;
  WeightMatrix gate, up, down;
};

// Row bookkeeping of one forward pass: chunks' rows are consecutive, in chunk order.
struct Rows {
  std::vector<int32_t> tokens;
  std::vector<int> positions, rope_positions, chunk_of, logit_rows;
  std::vector<std::pair<int, const float*>> image_rows;
  std::vector<int> first_row;  // per chunk
};

class Qwen35 final : public Model {
 public:
  Qwen35(const ModelConfig& c, std::shared_ptr<Checkpoint> ck)
      : config_(c), ck_(std::move(ck)), opt_(qwen3_5_options(c, ck_.get())) {
    const int H = c.hidden_size;
    const std::string& p = opt_.prefix;
    attn_shape_ = {c.num_heads, c.num_kv_heads, c.head_dim, opt_.rotary_dim, float(c.rms_norm_eps)};
    embed_ = load_matrix(*ck_, p + "embed_tokens.weight", c.vocab_size, H);
    final_norm_ = one_plus(load_vector(*ck_, p + "norm.weight", H));
    if (ck_->has("lm_head.weight")) head_ = load_matrix(*ck_, "lm_head.weight", c.vocab_size, H);
    else if (c.tie_word_embeddings) head_ = embed_;
    else throw Error("missing tensor lm_head.weight in " + ck_->dir().string() + " (embeddings are not tied)");
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
      L.gate = load_matrix(*ck_, l + "mlp.gate_proj.weight", c.intermediate_size, H);
      L.up = load_matrix(*ck_, l + "mlp.up_proj.weight", c.intermediate_size, H);
      L.down = load_matrix(*ck_, l + "mlp.down_proj.weight", H, c.intermediate_size);
      layers_.push_back(std::move(L));
    }
    inv_freq_ = rope_inv_freq(c.rope, opt_.rotary_dim);
    spec_ = qwen3_5_memory_spec(c);
  }

  const ModelConfig& config() const override { return config_; }
  SequenceMemorySpec memory_spec() const override { return spec_; }

  size_t weight_bytes() const override {
    size_t n = embed_.bytes() + (head_.data == embed_.data ? 0 : head_.bytes());
    for (const auto& L : layers_)
      n += (L.linear ? L.deltanet.bytes() : L.attention.bytes()) + L.gate.bytes() + L.up.bytes() + L.down.bytes();
    return n;
  }

  std::vector<float> forward(std::span<const SequenceChunk> chunks, KvPool& pool) override {
    return run(chunks, pool, nullptr);
  }

  std::vector<float> hidden_states(const SequenceChunk& chunk, KvPool& pool) override {
    std::vector<float> states;
    run(std::span<const SequenceChunk>(&chunk, 1), pool, &states);
    return states;
  }

 private:
  Rows plan(std::span<const SequenceChunk> chunks, const KvPool& pool) const {
    if (pool.layers() != spec_.kv_layers || pool.row_floats() != spec_.kv_heads * spec_.head_dim)
      throw Error("the KV pool is not laid out for this model's attention layers");
    if (spec_.has_state() && pool.state_floats() != spec_.state_floats)
      throw Error("the pool's state slots do not fit this model's recurrent state");
    Rows r;
    for (size_t c = 0; c < chunks.size(); ++c) {
      const auto& ch = chunks[c];
      const int end = ch.start_pos + int(ch.tokens.size());
      if (size_t(end) > ch.pages.size() * size_t(pool.page_tokens()))
        throw Error("KV page table too short for the chunk");
      if (spec_.has_state() && ch.state_slot < 0) throw Error("a chunk of a recurrent model carries no state slot");
      for (size_t i = 0; i < ch.state_snapshots.size(); ++i) {
        const int p = ch.state_snapshots[i].position;
        if (p <= ch.start_pos || p > end || (i > 0 && p <= ch.state_snapshots[i - 1].position))
          throw Error("state snapshots must fall inside their chunk, in ascending order");
      }
      if (!ch.mrope_positions.empty() && ch.mrope_positions.size() != ch.tokens.size() * 3)
        throw Error("M-RoPE positions do not cover the chunk");
      for (size_t d = 0; d < c; ++d)
        if (spec_.has_state() && chunks[d].state_slot == ch.state_slot)
          throw Error("two chunks of one forward pass share a state slot");
      r.first_row.push_back(int(r.tokens.size()));
      size_t image_row = 0;
      for (size_t i = 0; i < ch.tokens.size(); ++i) {
        const int32_t id = ch.tokens[i];
        if (id < 0 || id >= config_.vocab_size)
          throw Error("token id " + std::to_string(id) + " is outside the vocabulary (" +
                      std::to_string(config_.vocab_size) + ")");
        if (ch.all_logits || (ch.last_logits && i + 1 == ch.tokens.size())) r.logit_rows.push_back(int(r.tokens.size()));
        if (id == config_.image_token_id && !ch.image_embeddings.empty()) {
          if ((image_row + 1) * size_t(config_.hidden_size) > ch.image_embeddings.size())
            throw Error("fewer image features than image tokens in the chunk");
          r.image_rows.emplace_back(int(r.tokens.size()), ch.image_embeddings.data() + image_row++ * config_.hidden_size);
        }
        r.tokens.push_back(id);
        r.positions.push_back(ch.start_pos + int(i));
        for (int s = 0; s < 3; ++s)
          r.rope_positions.push_back(ch.mrope_positions.empty() ? ch.start_pos + int(i) + ch.rope_delta
                                                                : ch.mrope_positions[i * 3 + size_t(s)]);
        r.chunk_of.push_back(int(c));
      }
    }
    return r;
  }

  std::vector<float> run(std::span<const SequenceChunk> chunks, KvPool& pool, std::vector<float>* states) {
    const ModelConfig& c = config_;
    Rows r = plan(chunks, pool);
    const int T = int(r.tokens.size()), H = c.hidden_size, F = c.intermediate_size;
    const float eps = float(c.rms_norm_eps);
    std::vector<float> x(size_t(T) * H), xn(size_t(T) * H), mixed(size_t(T) * H), gate(size_t(T) * F),
        up(size_t(T) * F);
    const size_t half = size_t(opt_.rotary_dim / 2);
    std::vector<float> cos(size_t(T) * half), sin(size_t(T) * half);
    cpu::embedding(embed_, r.tokens.data(), T, x.data());
    for (const auto& [row, src] : r.image_rows) std::copy_n(src, H, x.data() + size_t(row) * H);
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
      for (size_t i = 0; i < x.size(); ++i) x[i] += mixed[i];
      cpu::rmsnorm(x.data(), L.post_norm.data(), T, H, eps, xn.data());
      cpu::matmul(xn.data(), T, L.gate, nullptr, gate.data());
      cpu::matmul(xn.data(), T, L.up, nullptr, up.data());
      cpu::swiglu(gate.data(), up.data(), gate.size(), gate.data());
      cpu::matmul(gate.data(), T, L.down, nullptr, mixed.data());
      for (size_t i = 0; i < x.size(); ++i) x[i] += mixed[i];
      if (states && li + 1 < c.num_layers) states->insert(states->end(), x.begin(), x.end());
    }
    const int R = int(r.logit_rows.size());
    std::vector<float> last(size_t(R) * H);
    for (int i = 0; i < R; ++i)
      std::copy_n(x.data() + size_t(r.logit_rows[size_t(i)]) * H, H, last.data() + size_t(i) * H);
    cpu::rmsnorm(last.data(), final_norm_.data(), R, H, eps, last.data());
    if (states) {
      cpu::rmsnorm(x.data(), final_norm_.data(), T, H, eps, xn.data());
      states->insert(states->end(), xn.begin(), xn.end());
    }
    std::vector<float> logits(size_t(R) * size_t(c.vocab_size));
    cpu::matmul(last.data(), R, head_, nullptr, logits.data());
    return logits;
  }

  ModelConfig config_;
  std::shared_ptr<Checkpoint> ck_;
  Qwen35Options opt_;
  GatedAttentionShape attn_shape_;
  SequenceMemorySpec spec_;
  WeightMatrix embed_, head_;
  std::vector<float> final_norm_;
  std::vector<Layer> layers_;
  std::vector<float> inv_freq_;
};

}  // namespace

std::unique_ptr<Model> create_qwen3_5(const ModelConfig& config, std::shared_ptr<Checkpoint> checkpoint) {
  return std::make_unique<Qwen35>(config, std::move(checkpoint));
}

}  // namespace fs
