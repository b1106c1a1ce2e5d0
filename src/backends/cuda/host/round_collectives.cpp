// The order of a round's collectives and the issuer that holds a rank to it.
#include "backends/cuda/host/round_collectives.h"

#include "backends/cuda/host/tensor_parallel_group.h"
#include "core/error.h"

namespace fs::cuda {

namespace {

std::string kind(bool gather) { return gather ? "all-gather" : "all-reduce"; }

}  // namespace

std::string describe(const RoundCollective& c) {
  std::string where;
  switch (c.site) {
    case RoundCollective::Site::embedding: where = "the embedding"; break;
    case RoundCollective::Site::mixer: where = "layer " + std::to_string(c.layer) + "'s mixer"; break;
    case RoundCollective::Site::ffn: where = "layer " + std::to_string(c.layer) + "'s FFN"; break;
    case RoundCollective::Site::head: where = "the head"; break;
  }
  return "the " + kind(c.gather) + " after " + where + " (" + std::to_string(c.count) + " floats)";
}

std::vector<RoundCollective> round_collectives(const RoundShape& s) {
  using Site = RoundCollective::Site;
  std::vector<RoundCollective> plan;
  if (s.rows == 0) return plan;
  const std::size_t stream = std::size_t(s.rows) * std::size_t(s.hidden);
  plan.push_back({Site::embedding, -1, false, stream});
  for (int layer = 0; layer < s.layers; ++layer) {
    plan.push_back({Site::mixer, layer, false, stream});
    plan.push_back({Site::ffn, layer, false, stream});
  }
  if (s.logit_rows > 0) plan.push_back({Site::head, -1, true, std::size_t(s.logit_rows) * std::size_t(s.head_rows)});
  return plan;
}

RoundCollectives::RoundCollectives(const TensorParallelGroup& group, int rank, const RoundShape& shape)
    : group_(group), rank_(rank), plan_(round_collectives(shape)) {
  group_.ready(rank_);
}

const RoundCollective& RoundCollectives::next(bool gather, std::size_t count) {
  const std::string asked = kind(gather) + " of " + std::to_string(count) + " floats";
  if (issued_ == plan_.size())
    throw Error("tensor-parallel round: " + asked + " after the round's " + std::to_string(plan_.size()) +
                " collectives");
  const RoundCollective& planned = plan_[issued_];
  if (planned.gather != gather || planned.count != count)
    throw Error("tensor-parallel round: " + asked + " where " + describe(planned) + " is due");
  ++issued_;
  return planned;
}

void RoundCollectives::all_reduce(float* buffer, float* gathered, std::size_t count, CUstream stream) {
  group_.all_reduce(rank_, buffer, gathered, next(false, count).count, stream);
}

void RoundCollectives::all_gather(const float* send, float* gathered, std::size_t count, CUstream stream) {
  group_.all_gather(rank_, send, gathered, next(true, count).count, stream);
}

void RoundCollectives::finish() const {
  if (issued_ != plan_.size())
    throw Error("tensor-parallel round ended before " + describe(plan_[issued_]) + " was issued");
}

}  // namespace fs::cuda
