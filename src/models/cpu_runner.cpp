#include "models/cpu_runner.h"

#include <algorithm>

#include "backends/cpu/int8_rows.h"
#include "backends/cpu/ops.h"
#include "core/error.h"
#include "io/safetensors.h"
#include "models/decoder_steps.h"
#include "models/forward_rows.h"
#include "models/gated_attention.h"
#include "models/gated_deltanet.h"
#include "models/host_snapshot_staging.h"
#include "models/kv_pool.h"
#include "models/paged_attention.h"
#include "models/ref_loader.h"

namespace fs {

namespace {

std::vector<WeightMatrix> load_parts(const Checkpoint& ck, const MatrixRef& m) {
  std::vector<WeightMatrix> parts;
  for (size_t i = 0; i < m.parts.size(); ++i) parts.push_back(load_part_matrix(ck, m, i));
  return parts;
}

WeightMatrix load_one(const Checkpoint& ck, const MatrixRef& m) {
  if (m.parts.size() != 1) throw Error("matrix " + m.what + ": the CPU runner expects one tensor");
  return load_part_matrix(ck, m);
}

// Plain attention (Llama family) on the CPU: q, k, v projected separately, optional q/k norms, full rotary.
struct PlainAttention {
  WeightMatrix wq, wk, wv, wo;
  std::vector<float> bias, q_norm, k_norm;  // bias: q | k | v, empty → none
  size_t bytes() const { return wq.bytes() + wk.bytes() + wv.bytes() + wo.bytes(); }
};

struct CpuLayer {
  const LayerProgram* program = nullptr;
  std::vector<float> norm, mlp_norm;
  PlainAttention plain;
  GatedAttentionWeights gated;
  DeltaNetWeights deltanet;
  SwiGluMlpWeights mlp;

  size_t bytes() const {
    const size_t mixer = program->deltanet ? deltanet.bytes()
                         : program->attention->output_gate ? gated.bytes() : plain.bytes();
    return mixer + mlp.bytes();
  }
};

class CpuRunner final : public Model {
 public:
  CpuRunner(const ModelConfig& c, ModelProgram program, std::shared_ptr<Checkpoint> ck)
      : config_(c), program_(std::move(program)), ck_(std::move(ck)) {
    const Checkpoint& k = *ck_;
    ends_.embed = load_one(k, program_.embed);
    ends_.head = program_.tied() ? ends_.embed : load_one(k, program_.head);
    ends_.final_norm = load_ref_floats(k, program_.final_norm);
    for (const LayerProgram& lp : program_.layers) {
      CpuLayer L;
      L.program = &lp;
      L.norm = load_ref_floats(k, lp.norm);
      L.mlp_norm = load_ref_floats(k, lp.mlp_norm);
      if (lp.attention) load_attention(*lp.attention, L);
      if (lp.deltanet) load_deltanet(*lp.deltanet, L.deltanet);
      L.mlp = {load_one(k, lp.mlp.gate), load_one(k, lp.mlp.up), load_one(k, lp.mlp.down)};
      layers_.push_back(std::move(L));
    }
    packed_bytes_ = cpu::pack_for_matmul(matmul_weights());
  }

  const ModelConfig& config() const override { return config_; }
  SequenceMemorySpec memory_spec() const override { return program_.memory; }
  // Tree rows attend along their parents; recurrent layers run rows in order and have no parents.
  bool supports_row_parents() const override { return !program_.memory.has_state(); }
  // Rows whose matmul tiles share weight loads at a price drafting still repays (docs/speculative.md).
  int cheap_round_rows() const override { return 4; }

  size_t weight_bytes() const override {
    size_t n = ends_.bytes();
    for (const auto& L : layers_) n += L.bytes();
    return n;
  }
  size_t resident_weight_bytes() const override { return weight_bytes() + packed_bytes_; }

  std::vector<float> forward(std::span<const SequenceChunk> chunks, KvPool& pool) override {
    return run(chunks, pool, nullptr);
  }

  std::vector<float> hidden_states(const SequenceChunk& chunk, KvPool& pool) override {
    std::vector<float> states;
    run(std::span<const SequenceChunk>(&chunk, 1), pool, &states);
    return states;
  }

  // Every matrix whose shape fits gets an int8 copy (one per distinct weights) in place of its packed one.
  void quantize_for_drafting() {
    std::vector<std::pair<const void*, std::shared_ptr<const cpu::Int8Rows>>> done;
    size_t extra = 0;
    for (WeightMatrix* w : matmul_weights()) {
      if (!cpu::int8_fits(*w)) continue;
      auto it = std::find_if(done.begin(), done.end(), [&](const auto& d) { return d.first == w->data; });
      if (it == done.end()) {
        done.emplace_back(w->data, cpu::quantize_rows(*w));
        it = done.end() - 1;
        extra += it->second->bytes();
      }
      w->int8 = it->second;
      w->packed.reset();
    }
    // The packed block is freed once no matrix points into it; a matrix that did not fit may still read it.
    bool packed_left = false;
    for (WeightMatrix* w : matmul_weights()) packed_left = packed_left || w->packed;
    packed_bytes_ = (packed_left ? packed_bytes_ : 0) + extra;
  }

 private:
  void load_attention(const AttentionStep& s, CpuLayer& L) {
    const Checkpoint& k = *ck_;
    std::vector<WeightMatrix> qkv = load_parts(k, s.qkv);
    if (qkv.size() != 3) throw Error("matrix " + s.qkv.what + ": the CPU runner expects q, k and v tensors");
    if (s.output_gate) {
      L.gated = {qkv[0], qkv[1], qkv[2], load_one(k, s.o), load_ref_floats(k, s.q_norm), load_ref_floats(k, s.k_norm)};
      return;
    }
    L.plain = {qkv[0], qkv[1], qkv[2], load_one(k, s.o), load_ref_floats(k, s.qkv_bias), load_ref_floats(k, s.q_norm),
               load_ref_floats(k, s.k_norm)};
  }

  // Every matrix a matmul reads (the embeddings only as a tied head).
  std::vector<WeightMatrix*> matmul_weights() {
    std::vector<WeightMatrix*> all{&ends_.head};
    for (CpuLayer& L : layers_) {
      if (L.program->deltanet) {
        DeltaNetWeights& d = L.deltanet;
        all.insert(all.end(), {&d.in_qkv, &d.in_z, &d.in_a, &d.in_b, &d.out});
      } else if (L.program->attention->output_gate) {
        all.insert(all.end(), {&L.gated.q, &L.gated.k, &L.gated.v, &L.gated.o});
      } else {
        all.insert(all.end(), {&L.plain.wq, &L.plain.wk, &L.plain.wv, &L.plain.wo});
      }
      all.insert(all.end(), {&L.mlp.gate, &L.mlp.up, &L.mlp.down});
    }
    return all;
  }

  void load_deltanet(const DeltaNetStep& s, DeltaNetWeights& w) {
    const Checkpoint& k = *ck_;
    w.in_qkv = load_one(k, s.in_qkv);
    w.in_z = load_one(k, s.in_z);
    w.in_a = load_one(k, s.in_a);
    w.in_b = load_one(k, s.in_b);
    w.out = load_one(k, s.out);
    w.conv = load_ref_floats(k, s.conv);
    w.a_log = load_ref_floats(k, s.a_log);
    w.dt_bias = load_ref_floats(k, s.dt_bias);
    w.norm = load_ref_floats(k, s.norm);
  }

  // Checks what the shared row plan does not: the pool's layout, state slots and snapshots.
  void check_memory(std::span<const SequenceChunk> chunks, const KvPool& pool) const {
    const SequenceMemorySpec& spec = program_.memory;
    if (pool.layers() != spec.kv_layers || pool.row_floats() != spec.kv_heads * spec.head_dim)
      throw Error("the KV pool is not laid out for this model's attention layers");
    if (!spec.has_state()) return;
    if (pool.state_floats() != spec.state_floats)
      throw Error("the pool's state slots do not fit this model's recurrent state");
    check_state_chunks(chunks);
  }

  void plain_attention(const AttentionStep& s, const PlainAttention& w, const float* xn, int T,
                       const AttentionRows& rows, KvPool& pool, float* out) {
    const int hd = s.head_dim, Q = s.heads * hd, KV = s.kv_heads * hd;
    const float eps = program_.eps;
    std::vector<float> q(size_t(T) * Q), k(size_t(T) * KV), v(size_t(T) * KV), attn(size_t(T) * Q);
    const float* bias = w.bias.empty() ? nullptr : w.bias.data();
    const cpu::MatmulOut qkv[] = {{&w.wq, bias, q.data()},
                                  {&w.wk, bias ? bias + Q : nullptr, k.data()},
                                  {&w.wv, bias ? bias + Q + KV : nullptr, v.data()}};
    cpu::matmuls(xn, T, qkv);
    if (!w.q_norm.empty()) cpu::rmsnorm(q.data(), w.q_norm.data(), T * s.heads, hd, eps, q.data());
    if (!w.k_norm.empty()) cpu::rmsnorm(k.data(), w.k_norm.data(), T * s.kv_heads, hd, eps, k.data());
    cpu::rope(q.data(), T, s.heads, hd, rows.cos, rows.sin);
    cpu::rope(k.data(), T, s.kv_heads, hd, rows.cos, rows.sin);
    store_paged_kv(rows, s.kv_layer, k.data(), v.data(), pool);
    paged_attention(rows, {s.heads, s.kv_heads, hd}, pool, s.kv_layer, q.data(), attn.data());
    cpu::matmul(attn.data(), T, w.wo, nullptr, out);
  }

  // The rows of each chunk through one DeltaNet layer, each sequence in its own state slot.
  void deltanet(const DeltaNetStep& s, const DeltaNetWeights& w, const float* xn, int T, const ForwardRows& r,
                std::span<const SequenceChunk> chunks, KvPool& pool, float* out) {
    std::vector<DeltaNetSequence> seqs(chunks.size());
    std::vector<std::vector<DeltaNetTap>> taps(chunks.size());
    for (size_t ci = 0; ci < chunks.size(); ++ci) {
      const SequenceChunk& ch = chunks[ci];
      for (const StateSnapshotTarget& t : ch.state_snapshots)
        taps[ci].push_back({t.position - ch.start_pos, t.state + s.state_offset});
      seqs[ci] = {r.first_row[ci], int(ch.tokens.size()), pool.state(ch.state_slot) + s.state_offset,
                  ch.start_pos == 0, taps[ci]};
    }
    deltanet_forward(w, s.shape, xn, T, seqs, out);
  }

  std::vector<float> run(std::span<const SequenceChunk> chunks, KvPool& pool, std::vector<float>* states) {
    check_memory(chunks, pool);
    const HostSnapshotStaging staged(chunks, pool.state_floats());
    std::vector<float> out =
        run_rows(staged.chunks(), plan_forward_rows(staged.chunks(), config_, pool.page_tokens()), pool, states);
    staged.write(*this, pool);
    return out;
  }

  std::vector<float> run_rows(std::span<const SequenceChunk> chunks, const ForwardRows& r, KvPool& pool,
                              std::vector<float>* states) {
    const ModelConfig& c = config_;
    const int T = int(r.tokens.size()), H = c.hidden_size, F = c.intermediate_size;
    const float eps = program_.eps;
    std::vector<float> x(size_t(T) * H), xn(size_t(T) * H), mixed(size_t(T) * H), gate(size_t(T) * F),
        up(size_t(T) * F);
    const size_t half = size_t(program_.rotary.rotary_dim / 2);
    std::vector<float> cos(size_t(T) * half), sin(size_t(T) * half);
    embed_rows(ends_.embed, r, H, x.data());
    rotary_angles(program_.rotary, r.rope_positions.data(), T, cos.data(), sin.data());
    const AttentionRows rows{chunks, r.positions, r.chunk_of, cos.data(), sin.data()};
    if (states) states->assign(x.begin(), x.end());
    for (size_t li = 0; li < layers_.size(); ++li) {
      const CpuLayer& L = layers_[li];
      const LayerProgram& lp = *L.program;
      cpu::rmsnorm(x.data(), L.norm.data(), T, H, eps, xn.data());
      if (lp.deltanet) {
        deltanet(*lp.deltanet, L.deltanet, xn.data(), T, r, chunks, pool, mixed.data());
      } else if (lp.attention->output_gate) {
        const AttentionStep& s = *lp.attention;
        gated_attention_forward(L.gated, {s.heads, s.kv_heads, s.head_dim, s.rotary_dim, eps}, xn.data(), rows, pool,
                                s.kv_layer, mixed.data());
      } else {
        plain_attention(*lp.attention, L.plain, xn.data(), T, rows, pool, mixed.data());
      }
      add_residual(x, mixed);
      cpu::rmsnorm(x.data(), L.mlp_norm.data(), T, H, eps, xn.data());
      swiglu_mlp(L.mlp, xn.data(), T, gate.data(), up.data(), mixed.data());
      add_residual(x, mixed);
      if (states && li + 1 < layers_.size()) states->insert(states->end(), x.begin(), x.end());
    }
    return final_logits(x, r, ends_, c, states);
  }

  ModelConfig config_;
  ModelProgram program_;
  std::shared_ptr<Checkpoint> ck_;
  DecoderEnds ends_;
  std::vector<CpuLayer> layers_;
  size_t packed_bytes_ = 0;  // the matmul's packed copy of the weights (cpu::pack_for_matmul)
};

}  // namespace

bool quantize_for_drafting(Model& model) {
  auto* cpu = dynamic_cast<CpuRunner*>(&model);
  if (!cpu) return false;
  cpu->quantize_for_drafting();
  return true;
}

std::unique_ptr<Model> create_cpu_model(const ModelConfig& config, ModelProgram program,
                                        std::shared_ptr<Checkpoint> checkpoint) {
  return std::make_unique<CpuRunner>(config, std::move(program), std::move(checkpoint));
}

}  // namespace fs
