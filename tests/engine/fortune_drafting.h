#pragma once
// A fixture for drafting tests on fortune-demo: its reference prompts, fortune-draft as a drafter, a run of requests
// in one engine with a drafter, and the check that each reply equals its undrafted solo run.
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "core/files.h"
#include "engine/drafters/model_drafter.h"
#include "engine_runner.h"
#include "io/safetensors.h"
#include "support/fixtures.h"

namespace fs::test {

class FortuneDraftingTest : public FortuneDemoTest {
 protected:
  void SetUp() override {
    FortuneDemoTest::SetUp();
    if (IsSkipped() || HasFailure()) return;
    const auto shared = shared_dir();
    const json cases = read_json_file(shared / "reference/fortune-demo/cases.json");
    for (const auto& c : cases["cases"]) prompts.push_back(c["ids"].get<std::vector<int32_t>>());
    const auto draft_dir = shared / "models/fortune-draft";
    drafter = std::make_shared<ModelDrafter>(create_model(load_model_config(draft_dir), Checkpoint::open(draft_dir)),
                                             "fortune-draft", 256);
  }

  // Every request run together in one engine over `target` with `with` drafting 4 tokens, `parallel` streams at
  // once; keeps the engine's stats.
  std::vector<std::shared_ptr<Collected>> run_drafting(Model& target, const std::vector<GenerationRequest>& reqs,
                                                       std::shared_ptr<Drafter> with, int parallel, EngineOptions o) {
    o.parallel = parallel;
    o.drafter = std::move(with);
    o.draft_tokens = 4;
    Engine engine(target, o);
    EngineRunner runner(engine);
    std::vector<std::shared_ptr<Collected>> got;
    for (const auto& r : reqs) got.push_back(runner.submit(r));
    runner.wait_all();
    stats = engine.stats();
    return got;
  }

  // Each reply's tokens equal, bit for bit, those of its request run alone undrafted; `also` adds checks per reply.
  void expect_equal_to_solo(
      const std::vector<GenerationRequest>& reqs, const std::vector<std::shared_ptr<Collected>>& got,
      const std::function<void(size_t, const std::vector<SampledToken>&)>& also = nullptr) {
    ASSERT_EQ(reqs.size(), got.size());
    for (size_t i = 0; i < reqs.size(); ++i) {
      SCOPED_TRACE("request " + std::to_string(i));
      const auto want = run_solo(*model, reqs[i]);
      ASSERT_FALSE(want.empty());
      if (also) also(i, want);
      EXPECT_TRUE(same_bits(got[i]->tokens, want));
    }
  }

  std::vector<std::vector<int32_t>> prompts;
  std::shared_ptr<Drafter> drafter;
  EngineStats stats;
};

}  // namespace fs::test
