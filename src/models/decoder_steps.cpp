#include "models/decoder_steps.h"

#include <algorithm>

#include "backends/cpu/ops.h"
#include "core/error.h"
#include "core/recycled_floats.h"
#include "io/safetensors.h"
#include "models/weights_loader.h"

namespace fs {

DecoderEnds load_decoder_ends(const Checkpoint& ck, const std::string& prefix, const ModelConfig& c) {
  DecoderEnds e;
  e.embed = load_matrix(ck, prefix + "embed_tokens.weight", c.vocab_size, c.hidden_size);
  e.final_norm = load_vector(ck, prefix + "norm.weight", c.hidden_size);
  if (ck.has("lm_head.weight")) e.head = load_matrix(ck, "lm_head.weight", c.vocab_size, c.hidden_size);
  else if (c.tie_word_embeddings) e.head = e.embed;
  else throw Error("missing tensor lm_head.weight in " + ck.dir().string() + " (embeddings are not tied)");
  return e;
}

SwiGluMlpWeights load_swiglu_mlp(const Checkpoint& ck, const std::string& prefix, int hidden, int intermediate) {
  SwiGluMlpWeights w;
  w.gate = load_matrix(ck, prefix + "gate_proj.weight", intermediate, hidden);
  w.up = load_matrix(ck, prefix + "up_proj.weight", intermediate, hidden);
  w.down = load_matrix(ck, prefix + "down_proj.weight", hidden, intermediate);
  return w;
}

void embed_rows(const WeightMatrix& embed, const ForwardRows& rows, int hidden, float* x) {
  cpu::embedding(embed, rows.tokens.data(), int(rows.tokens.size()), x);
  for (const auto& [row, src] : rows.image_rows) std::copy_n(src, hidden, x + size_t(row) * hidden);
}

void swiglu_mlp(const SwiGluMlpWeights& w, const float* x, int T, float* gate_buf, float* up_buf, float* out) {
  const cpu::MatmulOut gate_up[] = {{&w.gate, nullptr, gate_buf}, {&w.up, nullptr, up_buf}};
  cpu::matmuls(x, T, gate_up);  // gate and up in one split over the pool
  cpu::swiglu(gate_buf, up_buf, size_t(T) * size_t(w.gate.rows), gate_buf);
  cpu::matmul(gate_buf, T, w.down, nullptr, out);
}

void add_residual(std::vector<float>& x, const std::vector<float>& y) {
  for (size_t i = 0; i < x.size(); ++i) x[i] += y[i];
}

std::vector<float> final_logits(const std::vector<float>& x, const ForwardRows& rows, const DecoderEnds& ends,
                                const ModelConfig& c, std::vector<float>* states) {
  const int H = c.hidden_size, T = int(rows.tokens.size()), R = int(rows.logit_rows.size());
  const float eps = float(c.rms_norm_eps);
  std::vector<float> last(size_t(R) * H);
  for (int i = 0; i < R; ++i)
    std::copy_n(x.data() + size_t(rows.logit_rows[size_t(i)]) * H, H, last.data() + size_t(i) * H);
  cpu::rmsnorm(last.data(), ends.final_norm.data(), R, H, eps, last.data());
  if (states) {
    std::vector<float> normed(x.size());
    cpu::rmsnorm(x.data(), ends.final_norm.data(), T, H, eps, normed.data());
    states->insert(states->end(), normed.begin(), normed.end());
  }
  std::vector<float> logits = take_floats(size_t(R) * size_t(c.vocab_size));
  cpu::matmul(last.data(), R, ends.head, nullptr, logits.data());
  return logits;
}

}  // namespace fs
