#pragma once
// The collectives one tensor-parallel round issues on a rank, in order, and the issuer the runner sends them through:
// every rank must make the same calls in the same order with the same counts, or NCCL deadlocks or mixes buffers.
#include <cstddef>
#include <string>
#include <vector>

#include "backends/cuda/host/driver_types.h"

namespace fs::cuda {

class TensorParallelGroup;

// What a rank's round looks like to the collectives.
struct RoundShape {
  int layers = 0;      // each a mixer (attention or DeltaNet), then an FFN
  int hidden = 0;      // floats per row of the residual stream
  int rows = 0;        // the round's rows
  int logit_rows = 0;  // rows whose logits the head computes
  int head_rows = 0;   // the rank's slice of the vocabulary
};

struct RoundCollective {
  enum class Site { embedding, mixer, ffn, head };
  Site site = Site::embedding;
  int layer = -1;        // for mixer and ffn
  bool gather = false;   // an all-gather of the rank's slice, else an all-reduce
  std::size_t count = 0; // floats each rank sends
  bool operator==(const RoundCollective&) const = default;
};

// "the all-reduce after layer 3's mixer (8192 floats)".
std::string describe(const RoundCollective& c);

// The embedding's all-reduce, the all-reduces after each layer's mixer and FFN, and the head's all-gather when the
// round has logit rows; none for a round without rows.
std::vector<RoundCollective> round_collectives(const RoundShape& shape);

// Issues one rank's round through the group in round_collectives' order: each call must be the next one planned
// (kind and count), else fs::Error naming both before anything reaches NCCL. Construction waits until every rank has
// reached its round (TensorParallelGroup::ready).
class RoundCollectives {
 public:
  RoundCollectives(const TensorParallelGroup& group, int rank, const RoundShape& shape);

  void all_reduce(float* buffer, float* gathered, std::size_t count, CUstream stream);
  void all_gather(const float* send, float* gathered, std::size_t count, CUstream stream);
  // Throws fs::Error when the round ended before all its collectives were issued.
  void finish() const;

 private:
  const RoundCollective& next(bool gather, std::size_t count);

  const TensorParallelGroup& group_;
  int rank_;
  std::vector<RoundCollective> plan_;
  std::size_t issued_ = 0;
};

}  // namespace fs::cuda
