#pragma once
// CPU steps every decoder family's forward pass takes the same way: the token embedding with image features
// spliced in, the SwiGLU MLP, the residual add, and the final norm + LM head over the rows that want logits.
#include <string>
#include <vector>

#include "backends/cpu/weight.h"
#include "models/forward_rows.h"

namespace fs {

class Checkpoint;

// The two ends of a decoder stack: token embedding in, final norm and LM head out (the embedding when tied).
struct DecoderEnds {
  WeightMatrix embed, head;
  std::vector<float> final_norm;  // the RMSNorm weight as applied
  size_t bytes() const { return embed.bytes() + (head.data == embed.data ? 0 : head.bytes()); }
};

// `prefix` + embed_tokens / norm, and lm_head; throws when lm_head is missing and the embeddings are not tied.
DecoderEnds load_decoder_ends(const Checkpoint& ck, const std::string& prefix, const ModelConfig& config);

struct SwiGluMlpWeights {
  WeightMatrix gate, up, down;
  size_t bytes() const { return gate.bytes() + up.bytes() + down.bytes(); }
};

// `prefix` + gate_proj / up_proj / down_proj.
SwiGluMlpWeights load_swiglu_mlp(const Checkpoint& ck, const std::string& prefix, int hidden, int intermediate);

// x [T, hidden] → embeddings of the rows' tokens, with image rows replaced by their features.
void embed_rows(const WeightMatrix& embed, const ForwardRows& rows, int hidden, float* x);

// out [T, hidden] = down(silu(gate · x) ⊙ (up · x)); gate_buf and up_buf hold [T, intermediate].
void swiglu_mlp(const SwiGluMlpWeights& w, const float* x, int T, float* gate_buf, float* up_buf, float* out);

// x += y, element by element.
void add_residual(std::vector<float>& x, const std::vector<float>& y);

// Logits [logit rows, vocab] of x [T, hidden]: the logit rows, RMS-normed by the final norm, times the head. With
// `states`, also appends every row RMS-normed.
std::vector<float> final_logits(const std::vector<float>& x, const ForwardRows& rows, const DecoderEnds& ends,
                                const ModelConfig& config, std::vector<float>* states);

}  // namespace fs
