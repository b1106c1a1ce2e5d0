#include "models/model_program.h"

#include "core/error.h"
#include "io/safetensors.h"
#include "models/gated_attention.h"
#include "models/llama.h"
#include "models/qwen3_5.h"
#include "models/qwen3_5_options.h"
#include "models/rope_table.h"

namespace fs {

size_t TensorPart::elements() const {
  size_t n = 1;
  for (int64_t d : shape) n *= size_t(d);
  return n;
}

int64_t TensorPart::placed_rows() const {
  if (!slice) return shape.at(0);
  int64_t n = 0;
  for (const IndexRange& r : slice->rows) n += r.size();
  return n;
}

int64_t TensorPart::placed_cols() const {
  if (slice) return slice->cols.size();
  return shape.size() > 1 ? shape[1] : 1;
}

size_t TensorPart::placed_elements() const {
  size_t n = size_t(placed_rows()) * size_t(placed_cols());
  for (size_t d = 2; d < shape.size(); ++d) n *= size_t(shape[d]);
  return n;
}

int MatrixRef::rows() const {
  int n = 0;
  for (const auto& p : parts) n += int(p.placed_rows());
  return n;
}

int VectorRef::size() const {
  size_t n = 0;
  for (const auto& p : parts) n += p.placed_elements();
  return int(n);
}

TensorPart matrix_part(std::string name, int rows, int cols) { return {std::move(name), {rows, cols}, {}}; }

TensorPart vector_part(std::string name, int n) { return {std::move(name), {n}, {}}; }

MatrixRef matrix_ref(std::string what, std::vector<TensorPart> parts) {
  for (const auto& p : parts)
    if (p.shape.size() != 2 || p.shape[1] != parts.front().shape[1])
      throw Error("matrix " + what + ": parts must be matrices with one column count");
  return {std::move(parts), std::move(what)};
}

VectorRef vector_ref(std::string what, std::vector<TensorPart> parts, bool plus_one) {
  return {std::move(parts), plus_one, std::move(what)};
}

void set_decoder_ends(ModelProgram& p, const ModelConfig& c, const std::string& prefix, const Checkpoint* ck,
                      bool plus_one_norm) {
  const int H = c.hidden_size, V = c.vocab_size;
  p.embed = matrix_ref("embeddings", {matrix_part(prefix + "embed_tokens.weight", V, H)});
  p.final_norm = vector_ref("final norm", {vector_part(prefix + "norm.weight", H)}, plus_one_norm);
  const bool has_head = ck ? ck->has("lm_head.weight") : !c.tie_word_embeddings;
  if (has_head) p.head = matrix_ref("lm_head", {matrix_part("lm_head.weight", V, H)});
  else if (c.tie_word_embeddings) p.head = p.embed;
  else throw Error("missing tensor lm_head.weight in " + ck->dir().string() + " (embeddings are not tied)");
  p.eps = float(c.rms_norm_eps);
}

SwiGluStep swiglu_step(const std::string& prefix, int hidden, int intermediate) {
  return {matrix_ref("gate projection", {matrix_part(prefix + "gate_proj.weight", intermediate, hidden)}),
          matrix_ref("up projection", {matrix_part(prefix + "up_proj.weight", intermediate, hidden)}),
          matrix_ref("down projection", {matrix_part(prefix + "down_proj.weight", hidden, intermediate)})};
}

void rotary_angles(const RotarySpec& r, const int* positions3, int n, float* cos, float* sin) {
  if (r.interleaved) interleaved_mrope_angles(r.inv_freq, r.sections, positions3, n, cos, sin);
  else mrope_angles(r.inv_freq, r.sections, positions3, n, cos, sin);
}

ModelProgram model_program(const ModelConfig& config, const Checkpoint* checkpoint) {
  if (is_qwen3_5(config)) return qwen3_5_program(config, checkpoint);
  return llama_family_program(config, llama_family_options(config, checkpoint), checkpoint);
}

}  // namespace fs
