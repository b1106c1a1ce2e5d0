#include "models/llama.h"

#include <algorithm>
#include <cmath>

#include "backends/cpu/ops.h"
#include "core/error.h"
#include "core/thread_pool.h"
#include "io/safetensors.h"
#include "models/kv_pool.h"
#include "models/rope_table.h"
#include "models/weights_loader.h"

namespace fs {

namespace {

struct Layer {
  std::vector<float> attn_norm, mlp_norm, q_norm, k_norm, q_bias, k_bias, v_bias;
  WeightMatrix wq, wk, wv, wo, gate, up, down;
};

// Row bookkeeping of one forward pass.
struct Rows {
  std::vector<int32_t> tokens;
  std::vector<int> positions;       // KV slot of each row
  std::vector<int> rope_positions;  // (t, h, w) per row
  std::vector<std::pair<int, const float*>> image_rows;  // row index → replacing embedding
  std::vector<int> chunk_of;
  std::vector<int> logit_rows;
};

class LlamaFamily final : public Model {
 public:
  LlamaFamily(const ModelConfig& c, std::shared_ptr<Checkpoint> ck, const LlamaFamilyOptions& o)
      : config_(c), ck_(std::move(ck)), opt_(o) {
    const int H = c.hidden_size, Q = c.num_heads * c.head_dim, KV = c.num_kv_heads * c.head_dim;
    const std::string& p = o.prefix;
    embed_ = load_matrix(*ck_, p + "embed_tokens.weight", c.vocab_size, H);
    final_norm_ = load_vector(*ck_, p + "norm.weight", H);
    if (ck_->has("lm_head.weight")) head_ = load_matrix(*ck_, "lm_head.weight", c.vocab_size, H);
    else if (c.tie_word_embeddings) head_ = embed_;
    else throw Error("missing tensor lm_head.weight in " + ck_->dir().string() + " (embeddings are not tied)");
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
      L.gate = load_matrix(*ck_, l + "mlp.gate_proj.weight", c.intermediate_size, H);
      L.up = load_matrix(*ck_, l + "mlp.up_proj.weight", c.intermediate_size, H);
      L.down = load_matrix(*ck_, l + "mlp.down_proj.weight", H, c.intermediate_size);
      layers_.push_back(std::move(L));
    }
    inv_freq_ = rope_inv_freq(c.rope, c.head_dim);
    sections_ = c.rope.mrope_section.empty() ? std::vector<int>{c.head_dim / 2} : c.rope.mrope_section;
  }

  const ModelConfig& config() const override { return config_; }

  size_t weight_bytes() const override {
    size_t n = embed_.bytes() + (head_.data == embed_.data ? 0 : head_.bytes());
    for (const auto& L : layers_)
      n += L.wq.bytes() + L.wk.bytes() + L.wv.bytes() + L.wo.bytes() + L.gate.bytes() + L.up.bytes() + L.down.bytes();
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
    Rows r;
    for (size_t c = 0; c < chunks.size(); ++c) {
      const auto& ch = chunks[c];
      int end = ch.start_pos + int(ch.tokens.size());
      if (size_t(end) > ch.pages.size() * size_t(pool.page_tokens()))
        throw Error("KV page table too short for the chunk");
      if (!ch.mrope_positions.empty() && ch.mrope_positions.size() != ch.tokens.size() * 3)
        throw Error("M-RoPE positions do not cover the chunk");
      size_t image_row = 0;
      for (size_t i = 0; i < ch.tokens.size(); ++i) {
        int32_t id = ch.tokens[i];
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

  void store_kv(std::span<const SequenceChunk> chunks, const Rows& r, int layer, const float* k, const float* v,
                KvPool& pool) const {
    const int row = pool.row_floats(), P = pool.page_tokens();
    for (size_t t = 0; t < r.tokens.size(); ++t) {
      int pos = r.positions[t];
      int32_t page = chunks[size_t(r.chunk_of[t])].pages[size_t(pos / P)];
      std::copy_n(k + t * size_t(row), row, pool.keys(page, layer) + size_t(pos % P) * row);
      std::copy_n(v + t * size_t(row), row, pool.values(page, layer) + size_t(pos % P) * row);
    }
  }

  // Causal attention of each row over its own stream's keys 0..pos, in position order.
  void attend(std::span<const SequenceChunk> chunks, const Rows& r, int layer, const float* q, KvPool& pool,
              float* out) const {
    const int hd = config_.head_dim, nh = config_.num_heads, group = nh / config_.num_kv_heads;
    const int row = pool.row_floats(), P = pool.page_tokens();
    const float scale = 1.0f / std::sqrt(float(hd));
    ThreadPool::global().parallel_for(r.tokens.size() * size_t(nh), [&](size_t begin, size_t end) {
      std::vector<float> scores;
      for (size_t item = begin; item < end; ++item) {
        size_t t = item / size_t(nh);
        int h = int(item % size_t(nh)), g = h / group;
        const auto& pages = chunks[size_t(r.chunk_of[t])].pages;
        const float* qh = q + (t * size_t(nh) + size_t(h)) * size_t(hd);
        int n = r.positions[t] + 1;
        scores.resize(size_t(n));
        float mx = -INFINITY;
        for (int j = 0; j < n; ++j) {
          const float* kj = pool.keys(pages[size_t(j / P)], layer) + size_t(j % P) * row + size_t(g) * hd;
          scores[size_t(j)] = cpu::dot(qh, kj, hd) * scale;
          mx = std::max(mx, scores[size_t(j)]);
        }
        float sum = 0;
        for (int j = 0; j < n; ++j) sum += (scores[size_t(j)] = std::exp(scores[size_t(j)] - mx));
        float* o = out + (t * size_t(nh) + size_t(h)) * size_t(hd);
        std::fill_n(o, hd, 0.0f);
        for (int j = 0; j < n; ++j) {
          const float* vj = pool.values(pages[size_t(j / P)], layer) + size_t(j % P) * row + size_t(g) * hd;
          cpu::axpy(scores[size_t(j)] / sum, vj, o, hd);
        }
      }
    });
  }

  std::vector<float> run(std::span<const SequenceChunk> chunks, KvPool& pool, std::vector<float>* states) {
    const ModelConfig& c = config_;
    Rows r = plan(chunks, pool);
    const int T = int(r.tokens.size());
    const int H = c.hidden_size, hd = c.head_dim, Q = c.num_heads * hd, KV = c.num_kv_heads * hd;
    const int F = c.intermediate_size;
    std::vector<float> x(size_t(T) * H), xn(size_t(T) * H), q(size_t(T) * Q), k(size_t(T) * KV), v(size_t(T) * KV);
    std::vector<float> attn(size_t(T) * Q), proj(size_t(T) * H), gate(size_t(T) * F), up(size_t(T) * F);
    std::vector<float> cos(size_t(T) * hd / 2), sin(size_t(T) * hd / 2);
    cpu::embedding(embed_, r.tokens.data(), T, x.data());
    for (const auto& [row, src] : r.image_rows) std::copy_n(src, H, x.data() + size_t(row) * H);
    mrope_angles(inv_freq_, sections_, r.rope_positions.data(), T, cos.data(), sin.data());
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
      store_kv(chunks, r, li, k.data(), v.data(), pool);
      attend(chunks, r, li, q.data(), pool, attn.data());
      cpu::matmul(attn.data(), T, L.wo, nullptr, proj.data());
      for (size_t i = 0; i < x.size(); ++i) x[i] += proj[i];
      cpu::rmsnorm(x.data(), L.mlp_norm.data(), T, H, float(c.rms_norm_eps), xn.data());
      cpu::matmul(xn.data(), T, L.gate, nullptr, gate.data());
      cpu::matmul(xn.data(), T, L.up, nullptr, up.data());
      cpu::swiglu(gate.data(), up.data(), gate.size(), gate.data());
      cpu::matmul(gate.data(), T, L.down, nullptr, proj.data());
      for (size_t i = 0; i < x.size(); ++i) x[i] += proj[i];
      if (states && li + 1 < c.num_layers) states->insert(states->end(), x.begin(), x.end());
    }
    const int R = int(r.logit_rows.size());
    std::vector<float> last(size_t(R) * H);
    for (int i = 0; i < R; ++i)
      std::copy_n(x.data() + size_t(r.logit_rows[size_t(i)]) * H, H, last.data() + size_t(i) * H);
    cpu::rmsnorm(last.data(), final_norm_.data(), R, H, float(c.rms_norm_eps), last.data());
    if (states) {
      cpu::rmsnorm(x.data(), final_norm_.data(), T, H, float(c.rms_norm_eps), xn.data());
      states->insert(states->end(), xn.begin(), xn.end());
    }
    std::vector<float> logits(size_t(R) * size_t(c.vocab_size));
    cpu::matmul(last.data(), R, head_, nullptr, logits.data());
    return logits;
  }

  ModelConfig config_;
  std::shared_ptr<Checkpoint> ck_;
  LlamaFamilyOptions opt_;
  WeightMatrix embed_, head_;
  std::vector<float> final_norm_;
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
