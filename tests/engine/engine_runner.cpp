#include "engine_runner.h"

#include <cstring>

#include "io/safetensors.h"
#include "support/fixtures.h"

namespace fs::test {

std::shared_ptr<Collected> EngineRunner::submit(GenerationRequest req) {
  auto c = std::make_shared<Collected>();
  req.on_token = [this, c](const SampledToken& t) {
    std::lock_guard lock(mu_);
    c->tokens.push_back(t);
    cv_.notify_all();
    return true;
  };
  req.on_done = [this, c](const GenerationResult& r) {
    std::lock_guard lock(mu_);
    c->result = r;
    c->done = true;
    cv_.notify_all();
  };
  {
    std::lock_guard lock(mu_);
    all_.push_back(c);
  }
  if (!engine_.submit(std::move(req))) {
    std::lock_guard lock(mu_);
    c->done = true;
    c->result.reason = FinishReason::Error;
    c->result.error = "queue full";
  }
  return c;
}

void EngineRunner::wait_all() {
  std::unique_lock lock(mu_);
  cv_.wait(lock, [&] {
    for (auto& c : all_)
      if (!c->done) return false;
    return true;
  });
}

void EngineRunner::wait_tokens(const std::shared_ptr<Collected>& c, size_t n) {
  std::unique_lock lock(mu_);
  cv_.wait(lock, [&] { return c->done || c->tokens.size() >= n; });
}

namespace {

// ../shared/models/NAME's config and CPU model; without ../shared the test fails (in CI) or is skipped.
void load_shared_model(const std::string& name, ModelConfig& config, std::unique_ptr<Model>& model) {
  auto shared = shared_dir();
  if (shared.empty()) {
    if (running_in_ci()) FAIL() << "shared fixtures missing in CI";
    GTEST_SKIP() << "shared fixtures not found";
  }
  auto dir = shared / "models" / name;
  config = load_model_config(dir);
  model = create_model(config, Checkpoint::open(dir));
}

}  // namespace

void FortuneDemoTest::SetUp() { load_shared_model("fortune-demo", config, model); }

void TinyQwen35Test::SetUp() {
  load_shared_model("tiny-qwen3.5", config, model);
  if (model) {
    ASSERT_TRUE(model->memory_spec().has_state());
  }
}

std::vector<SampledToken> run_solo(Model& model, const GenerationRequest& req, EngineOptions options) {
  options.parallel = 1;
  Engine engine(model, options);
  EngineRunner runner(engine);
  auto c = runner.submit(req);
  runner.wait_all();
  return c->tokens;
}

static bool same_float(float a, float b) { return std::memcmp(&a, &b, sizeof a) == 0; }

bool same_bits(const std::vector<SampledToken>& a, const std::vector<SampledToken>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i].id != b[i].id || !same_float(a[i].logprob, b[i].logprob)) return false;
    if (a[i].top_logprobs.size() != b[i].top_logprobs.size()) return false;
    for (size_t k = 0; k < a[i].top_logprobs.size(); ++k)
      if (a[i].top_logprobs[k].first != b[i].top_logprobs[k].first ||
          !same_float(a[i].top_logprobs[k].second, b[i].top_logprobs[k].second))
        return false;
  }
  return true;
}

}  // namespace fs::test
