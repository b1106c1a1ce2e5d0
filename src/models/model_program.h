#pragma once
// A family as data every backend runs: the checkpoint tensors it reads (names, shapes, how they are stacked), the
// steps of each layer, its rotary and norm conventions and its sequence memory. A family file builds one from a
// config; a backend's runner places the tensors and runs the steps with its own ops.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "io/hf_config.h"
#include "models/gated_deltanet.h"
#include "models/memory_spec.h"

namespace fs {

class Checkpoint;

// Indices [begin, end).
struct IndexRange {
  int64_t begin = 0, end = 0;
  int64_t size() const { return end - begin; }
  bool operator==(const IndexRange&) const = default;
};

// The piece of a tensor one tensor-parallel rank holds: the listed ranges of its first dimension (in this order) ×
// the range `cols` of its second (a 1-D tensor counts as one column); later dimensions are whole.
struct TensorSlice {
  std::vector<IndexRange> rows;
  IndexRange cols;
};

// One checkpoint tensor and the shape it must have: [rows, cols] for a matrix part, any shape for a vector part
// (read as its floats in storage order). With a slice, only that piece is placed.
struct TensorPart {
  std::string name;
  std::vector<int64_t> shape;
  std::optional<TensorSlice> slice;

  size_t elements() const;         // of the whole tensor
  int64_t placed_rows() const;     // first-dimension entries placed (the slice's, or all)
  int64_t placed_cols() const;     // second-dimension entries placed (1 for a 1-D tensor)
  size_t placed_elements() const;  // with later dimensions whole
};

// A matrix a runner keeps: its parts stacked by rows (q|k|v, gate|up), one output feature per row.
struct MatrixRef {
  std::vector<TensorPart> parts;
  std::string what;  // for errors and memory accounting

  int rows() const;  // placed rows, stacked
  int cols() const { return parts.empty() ? 0 : int(parts.front().placed_cols()); }
  bool empty() const { return parts.empty(); }
};

// A vector of floats: its parts concatenated; `plus_one` applies it as 1 + w (Qwen3.5's norms).
struct VectorRef {
  std::vector<TensorPart> parts;
  bool plus_one = false;
  std::string what;

  int size() const;  // placed floats
  bool empty() const { return parts.empty(); }
};

// Pre-norm causal attention over the paged K/V: q|k|v projection (optional biases), optional per-head q/k RMSNorm,
// rotary on the leading `rotary_dim` dims of each head, GQA attention, then o. With `output_gate` the q rows hold a
// query and a gate per head (head h: rows [2h·head_dim, (2h+1)·head_dim) query, the next head_dim its gate) and
// the attention output is multiplied by sigmoid(gate) before o.
struct AttentionStep {
  MatrixRef qkv;
  VectorRef qkv_bias, q_norm, k_norm;  // empty → none
  MatrixRef o;
  int heads = 0, kv_heads = 0, head_dim = 0, rotary_dim = 0;
  bool output_gate = false;
  int kv_layer = 0;  // the layer's index in the KV pool
};

// Gated DeltaNet (models/gated_deltanet.h): the projections, conv, gated delta rule and gated output norm.
struct DeltaNetStep {
  MatrixRef in_qkv, in_z, in_a, in_b, out;
  VectorRef conv;  // [conv_channels, conv_kernel]
  VectorRef a_log, dt_bias, norm;
  DeltaNetShape shape;
  size_t state_offset = 0;  // floats into the sequence's state slot where this layer's state starts
};

// down(silu(gate·x) ⊙ (up·x)).
struct SwiGluStep {
  MatrixRef gate, up, down;
};

// x += mixer(norm(x)); x += mlp(mlp_norm(x)); exactly one mixer.
struct LayerProgram {
  VectorRef norm, mlp_norm;
  std::optional<AttentionStep> attention;
  std::optional<DeltaNetStep> deltanet;
  SwiGluStep mlp;
};

// How rotary angles are made from (t, h, w) positions: M-RoPE sections of the rotary half, contiguous or
// interleaved (t, h, w cycling over the rotary dims).
struct RotarySpec {
  std::vector<float> inv_freq;  // rotary_dim / 2
  std::vector<int> sections;
  bool interleaved = false;
  int rotary_dim = 0;
};

struct ModelProgram {
  std::string family;  // for messages: "llama", "qwen3.5"
  MatrixRef embed, head;  // head == embed's tensor when tied
  VectorRef final_norm;
  std::vector<LayerProgram> layers;
  RotarySpec rotary;
  float eps = 1e-6f;
  SequenceMemorySpec memory;

  bool tied() const { return head.parts.front().name == embed.parts.front().name; }
};

// Pieces every family's program builds the same way.
TensorPart matrix_part(std::string name, int rows, int cols);
TensorPart vector_part(std::string name, int n);
MatrixRef matrix_ref(std::string what, std::vector<TensorPart> parts);
VectorRef vector_ref(std::string what, std::vector<TensorPart> parts, bool plus_one = false);
// `prefix` + embed_tokens / norm and lm_head (the embedding when lm_head is absent and the config ties them);
// throws when lm_head is missing and the embeddings are not tied.
void set_decoder_ends(ModelProgram& program, const ModelConfig& config, const std::string& prefix,
                      const Checkpoint* checkpoint, bool plus_one_norm);
// `prefix` + gate_proj / up_proj / down_proj.
SwiGluStep swiglu_step(const std::string& prefix, int hidden, int intermediate);

// cos/sin [n, rotary_dim / 2] of the rows' (t, h, w) positions.
void rotary_angles(const RotarySpec& rotary, const int* positions3, int n, float* cos, float* sin);

// The program of config.architecture; unknown architectures and bad configs are refused by name. `checkpoint`
// (may be null) tells where a vision-language export keeps its language model and whether the head is tied.
ModelProgram model_program(const ModelConfig& config, const Checkpoint* checkpoint);

}  // namespace fs
