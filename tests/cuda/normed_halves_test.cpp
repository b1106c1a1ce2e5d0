// The normed-input GEMMs' type picked at load (cuda-backend.md, "Normed inputs in f16"): norm weights whose bound
// overflows f16 keep bf16, so the logits stay finite where f16 inputs would have turned them into inf and NaN.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <utility>

#include "backends/cuda/kernels/cuda_model.h"
#include "gpu_fixture.h"
#include "models/kv_pool.h"
#include "support/fixtures.h"

namespace fs::test {
namespace {

// tiny-qwen3.5's shapes with random weights, every norm weight `norm` (plus one where the model adds it).
std::vector<float> last_logits_with_norms(const ModelConfig& config, float norm) {
  const cuda::SyntheticSpread spread = [norm](const std::string& tensor) {
    return tensor.find("norm") != std::string::npos ? std::pair{0.0f, norm} : std::pair{0.05f, 0.0f};
  };
  auto model = create_synthetic_cuda_model(config, spread);
  KvPool pool(model->memory_spec(), 16, 4, 1, false);
  model->attach_pool(pool);
  std::vector<int32_t> pages;
  for (int i = 0; i < 4; ++i) pages.push_back(*pool.allocate());
  std::vector<int32_t> ids;
  for (int i = 0; i < 12; ++i) ids.push_back(int32_t(7 + 31 * i) % config.vocab_size);
  SequenceChunk c{ids, 0, pages};
  if (model->memory_spec().has_state()) c.state_slot = *pool.allocate_state();
  return model->forward(std::span<const SequenceChunk>(&c, 1), pool);
}

TEST(CudaNormedHalves, NormWeightsBeyondF16sBoundKeepBf16AndFiniteLogits) {
  FS_REQUIRE_GPU();
  FS_REQUIRE_SHARED(shared);
  const ModelConfig config = load_model_config(shared / "models/tiny-qwen3.5");
  // sqrt(64) · 1 fits f16 (the f16 path); sqrt(64) · 20001 = 160008 does not (bf16 kept).
  for (float norm : {0.0f, 20000.0f}) {
    SCOPED_TRACE("norm weights " + std::to_string(norm));
    const auto logits = last_logits_with_norms(config, norm);
    ASSERT_EQ(logits.size(), size_t(config.vocab_size));
    for (float v : logits) ASSERT_TRUE(std::isfinite(v));
  }
}

}  // namespace
}  // namespace fs::test
