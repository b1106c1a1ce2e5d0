// EngineOptions::on_round: one record per round that ran a pass, its rows split into decode and prompt rows as run.
#include <gtest/gtest.h>

#include <mutex>
#include <vector>

#include "engine_runner.h"

namespace fs::test {
namespace {

TEST_F(FortuneDemoTest, EveryRoundIsRecordedWithItsDecodeAndPromptRows) {
  std::mutex mu;
  std::vector<RoundRecord> records;
  EngineOptions o;
  o.parallel = 3;
  o.context = 256;
  o.prefill_chunk = 16;
  o.round_tokens = 24;
  o.on_round = [&](const RoundRecord& r) {
    std::lock_guard lock(mu);
    records.push_back(r);
  };
  Engine engine(*model, o);
  EngineRunner run(engine);
  const std::vector<int> prompts = {40, 7, 25}, replies = {9, 12, 5};
  std::vector<std::shared_ptr<Collected>> out;
  for (size_t i = 0; i < prompts.size(); ++i) {
    GenerationRequest r;
    for (int t = 0; t < prompts[i]; ++t) r.prompt.push_back(int32_t(100 + 7 * t + int(i)));
    r.max_tokens = replies[i];
    r.sampling.temperature = 0.0f;
    out.push_back(run.submit(std::move(r)));
  }
  run.wait_all();
  int prompt_rows = 0, decode_rows = 0, replied = 0;
  for (size_t i = 0; i < out.size(); ++i) {
    ASSERT_EQ(out[i]->result.reason, FinishReason::Length) << "stream " << i;
    replied += int(out[i]->tokens.size()) - 1;  // every token after the first comes from a decode row
  }
  // A round's record comes before its tokens, so every record is in once the last stream is done.
  std::lock_guard lock(mu);
  ASSERT_GE(records.size(), 6u);
  for (const RoundRecord& r : records) {
    EXPECT_EQ(r.rows, r.decode_rows + r.prompt_rows);
    EXPECT_LE(r.rows, o.round_tokens);
    EXPECT_GE(r.chunks, 1);
    EXPECT_GT(r.forward_seconds, 0.0);
    prompt_rows += r.prompt_rows;
    decode_rows += r.decode_rows;
  }
  EXPECT_EQ(prompt_rows, 40 + 7 + 25);
  EXPECT_EQ(decode_rows, replied);
}

}  // namespace
}  // namespace fs::test
