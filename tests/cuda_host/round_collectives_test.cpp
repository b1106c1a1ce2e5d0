// The collectives of one tensor-parallel round: for Llama, Qwen3 and Qwen3.5 shards at TP = 2 and 4, every rank's
// round is the embedding's all-reduce, one all-reduce after each layer's mixer and FFN in the program's layer order,
// and the head's all-gather, with the same counts on every rank; the issuer holds a runner to that order before
// anything reaches NCCL.
#include "backends/cuda/host/round_collectives.h"

#include <gtest/gtest.h>

#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "backends/cuda/host/rank_sum_order.h"
#include "backends/cuda/host/rank_workers.h"
#include "backends/cuda/host/tensor_parallel_group.h"
#include "backends/cuda/host/tensor_parallel_pass.h"
#include "error_message.h"
#include "fake_nccl.h"
#include "models/tensor_parallel_plan.h"
#include "support/fixtures.h"

namespace fs::cuda {
namespace {

using Site = RoundCollective::Site;
using test::message_of;

struct Fixture {
  ModelProgram program;
  int hidden = 0, vocab = 0;
};

// model_program() of shared/models/<model>/config.json with `edits` applied to its fields.
Fixture fixture(const std::filesystem::path& shared, const std::string& model,
                const nlohmann::json& edits = nlohmann::json::object()) {
  nlohmann::json config = nlohmann::json::parse(std::ifstream(shared / "models" / model / "config.json"));
  config.update(edits);
  return {model_program(parse_model_config(config, model), nullptr), config.at("hidden_size").get<int>(),
          config.at("vocab_size").get<int>()};
}

RoundShape shape_of(const ModelProgram& shard, int hidden, int rows, int logit_rows) {
  return {int(shard.layers.size()), hidden, rows, logit_rows, shard.head.rows()};
}

// Every rank's round over `rows` rows (`logit_rows` with logits) walks the whole model's layers in order.
void expect_round_follows_layers(const Fixture& f, int ranks, int rows, int logit_rows) {
  SCOPED_TRACE(f.program.family + " over " + std::to_string(ranks) + " ranks, " + std::to_string(rows) + " rows, " +
               std::to_string(logit_rows) + " logit rows");
  const TensorParallelPlan plan = tensor_parallel_plan(f.program, ranks);
  std::vector<std::vector<RoundCollective>> rounds;
  for (int r = 0; r < ranks; ++r)
    rounds.push_back(round_collectives(shape_of(shard_program(f.program, plan, r), f.hidden, rows, logit_rows)));
  for (int r = 1; r < ranks; ++r) EXPECT_EQ(rounds[size_t(r)], rounds[0]) << "rank " << r;
  const std::vector<RoundCollective>& round = rounds[0];
  if (rows == 0) {
    EXPECT_TRUE(round.empty());
    return;
  }
  const size_t stream = size_t(rows) * size_t(f.hidden);
  size_t i = 0;
  ASSERT_EQ(round.size(), 1 + 2 * f.program.layers.size() + (logit_rows > 0 ? 1 : 0));
  EXPECT_EQ(round[i++], (RoundCollective{Site::embedding, -1, false, stream}));
  for (int layer = 0; layer < int(f.program.layers.size()); ++layer) {
    EXPECT_EQ(round[i++], (RoundCollective{Site::mixer, layer, false, stream}));
    EXPECT_EQ(round[i++], (RoundCollective{Site::ffn, layer, false, stream}));
  }
  if (logit_rows == 0) return;
  const RoundCollective& head = round[i];
  EXPECT_EQ(head.site, Site::head);
  EXPECT_TRUE(head.gather);
  EXPECT_EQ(head.count * size_t(ranks), size_t(logit_rows) * size_t(f.vocab));  // the slices make whole rows
}

void expect_rounds(const Fixture& f, int ranks) {
  for (auto [rows, logit_rows] : {std::pair{1, 1}, {7, 2}, {5, 0}, {0, 0}})
    expect_round_follows_layers(f, ranks, rows, logit_rows);
}

TEST(RoundCollectives, LlamaRoundsFollowTheLayersOnEveryRank) {
  FS_REQUIRE_SHARED(shared);
  const Fixture f = fixture(shared, "tiny-llama3", {{"num_attention_heads", 4}, {"num_key_value_heads", 4}});
  for (int ranks : {2, 4}) expect_rounds(f, ranks);
  const Fixture untied = fixture(
      shared, "tiny-llama3", {{"num_attention_heads", 4}, {"num_key_value_heads", 4}, {"tie_word_embeddings", false}});
  ASSERT_FALSE(untied.program.tied());
  expect_rounds(untied, 2);
}

TEST(RoundCollectives, Qwen3RoundsFollowTheLayersOnEveryRank) {
  FS_REQUIRE_SHARED(shared);
  expect_rounds(fixture(shared, "tiny-qwen3"), 2);
  expect_rounds(fixture(shared, "tiny-qwen3", {{"num_key_value_heads", 4}}), 4);
}

TEST(RoundCollectives, Qwen3_5RoundsFollowTheLayersOnEveryRank) {
  FS_REQUIRE_SHARED(shared);
  const Fixture f = fixture(shared, "tiny-qwen3.5");
  ASSERT_TRUE(f.program.layers.front().deltanet && f.program.layers.back().attention);
  expect_rounds(f, 2);
  expect_rounds(fixture(shared, "tiny-qwen3.5",
                        {{"num_key_value_heads", 4}, {"linear_num_key_heads", 4}, {"linear_num_value_heads", 8}}),
                4);
}

TEST(RoundCollectives, DescribesACollectiveByItsSite) {
  EXPECT_EQ(describe({Site::ffn, 3, false, 64}), "the all-reduce after layer 3's FFN (64 floats)");
  EXPECT_EQ(describe({Site::head, -1, true, 10}), "the all-gather after the head (10 floats)");
}

RankSumLaunch host_rank_sum() {
  return [](const float* gathered, int ranks, std::size_t n, float* out, CUstream) {
    rank_sum_host(gathered, ranks, n, out);
  };
}

// The fake NCCL's record of a round: an all-reduce is an all-gather of the partials (then the rank-ordered sum).
std::vector<std::string> nccl_calls(const std::vector<RoundCollective>& round) {
  std::vector<std::string> calls;
  for (const auto& c : round) calls.push_back("ncclAllGather " + std::to_string(c.count));
  return calls;
}

// Issues `round` in order through `issuer` with host buffers.
void issue(RoundCollectives& issuer, const std::vector<RoundCollective>& round, int ranks) {
  for (const auto& c : round) {
    std::vector<float> buffer(c.count, 1.0f), gathered(c.count * size_t(ranks));
    if (c.gather) issuer.all_gather(buffer.data(), gathered.data(), c.count, nullptr);
    else issuer.all_reduce(buffer.data(), gathered.data(), c.count, nullptr);
  }
  issuer.finish();
}

TEST(RoundCollectives, EveryRankIssuesTheRoundThroughTheGroupInOrder) {
  FS_REQUIRE_SHARED(shared);
  const Fixture f = fixture(shared, "tiny-qwen3.5");
  const TensorParallelPlan plan = tensor_parallel_plan(f.program, 2);
  test::FakeNccl fake;
  TensorParallelGroup group({0, 1}, host_rank_sum());
  RankWorkers workers(2);
  std::vector<RoundShape> shapes;
  for (int r = 0; r < 2; ++r) shapes.push_back(shape_of(shard_program(f.program, plan, r), f.hidden, 3, 2));
  run_tensor_parallel(workers, group, [&](int r) {
    RoundCollectives issuer(group, r, shapes[size_t(r)]);
    issue(issuer, round_collectives(shapes[size_t(r)]), 2);
  });
  for (int r = 0; r < 2; ++r) {
    std::vector<std::string> expected = {"ncclCommInitAll"};
    for (auto& call : nccl_calls(round_collectives(shapes[size_t(r)]))) expected.push_back(call);
    EXPECT_EQ(fake.calls(r), expected) << "rank " << r;
  }
  EXPECT_TRUE(group.in_step());
}

TEST(RoundCollectives, ACallOutOfTheRoundsOrderIsRefusedBeforeNccl) {
  test::FakeNccl fake;
  TensorParallelGroup group({0}, host_rank_sum());
  const RoundShape shape{2, 4, 3, 1, 10};  // 2 layers, hidden 4, 3 rows, 1 logit row, 10 vocabulary rows
  std::vector<float> buffer(12), gathered(12);
  RoundCollectives issuer(group, 0, shape);
  issuer.all_reduce(buffer.data(), gathered.data(), 12, nullptr);  // the embedding's
  EXPECT_EQ(message_of([&] { issuer.all_gather(buffer.data(), gathered.data(), 10, nullptr); }),
            "tensor-parallel round: all-gather of 10 floats where the all-reduce after layer 0's mixer (12 floats) is "
            "due");
  EXPECT_EQ(message_of([&] { issuer.all_reduce(buffer.data(), gathered.data(), 4, nullptr); }),
            "tensor-parallel round: all-reduce of 4 floats where the all-reduce after layer 0's mixer (12 floats) is "
            "due");
  issuer.all_reduce(buffer.data(), gathered.data(), 12, nullptr);
  EXPECT_EQ(message_of([&] { issuer.finish(); }),
            "tensor-parallel round ended before the all-reduce after layer 0's FFN (12 floats) was issued");
  EXPECT_EQ(fake.calls(0), (std::vector<std::string>{"ncclCommInitAll", "ncclAllGather 12", "ncclAllGather 12"}));

  RoundCollectives whole(group, 0, shape);
  issue(whole, round_collectives(shape), 1);
  EXPECT_EQ(message_of([&] { whole.all_reduce(buffer.data(), gathered.data(), 12, nullptr); }),
            "tensor-parallel round: all-reduce of 12 floats after the round's 6 collectives");
}

}  // namespace
}  // namespace fs::cuda
