#pragma once
// Drives a real Engine from tests: submits requests and collects every sampled token with its logprobs.
#include <condition_variable>
#include <memory>
#include <mutex>
#include <vector>

#include <gtest/gtest.h>

#include "engine/engine.h"
#include "io/hf_config.h"
#include "models/model.h"

namespace fs::test {

struct Collected {
  std::vector<SampledToken> tokens;
  GenerationResult result;
  bool done = false;
};

class EngineRunner {
 public:
  explicit EngineRunner(Engine& engine) : engine_(engine) {}
  // Submits and returns the slot the results arrive in.
  std::shared_ptr<Collected> submit(GenerationRequest req);
  // Blocks until every submitted request has finished.
  void wait_all();
  // Blocks until `c` has at least n tokens or is done.
  void wait_tokens(const std::shared_ptr<Collected>& c, size_t n);

 private:
  Engine& engine_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::shared_ptr<Collected>> all_;
};

// A test fixture holding fortune-demo's CPU model (skips without ../shared, fails in CI).
class FortuneDemoTest : public ::testing::Test {
 protected:
  void SetUp() override;
  ModelConfig config;
  std::unique_ptr<Model> model;
};

// The same for tiny-qwen3.5, a hybrid with recurrent state (Gated DeltaNet layers beside gated attention).
class TinyQwen35Test : public ::testing::Test {
 protected:
  void SetUp() override;
  ModelConfig config;
  std::unique_ptr<Model> model;
};

// The tokens of `req` run alone in a fresh engine with `options` (default: a pool for one whole context).
std::vector<SampledToken> run_solo(Model& model, const GenerationRequest& req, EngineOptions options = {});

// Bitwise equality of ids, logprobs and top logprobs.
bool same_bits(const std::vector<SampledToken>& a, const std::vector<SampledToken>& b);

}  // namespace fs::test
