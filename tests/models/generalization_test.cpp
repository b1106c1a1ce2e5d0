// The loader and forward generalize: shapes, dtypes, sharding and untied heads the fixtures do not have, checked
// against an independent double-precision forward.
#include <gtest/gtest.h>

#include "core/error.h"
#include "core/files.h"
#include "models/model.h"
#include "models/checkpoint_maker.h"
#include "models/kv_pool.h"
#include "naive_forward.h"
#include "support/fixtures.h"

namespace fs::test {
namespace {

struct Case {
  const char* name;
  json config;
  DType dtype;
  int shards;
};

json base(const char* arch, int layers, int hidden, int heads, int kv, int head_dim, bool tied) {
  return {{"architectures", {arch}}, {"num_hidden_layers", layers}, {"hidden_size", hidden},
          {"num_attention_heads", heads}, {"num_key_value_heads", kv}, {"head_dim", head_dim},
          {"intermediate_size", 3 * hidden}, {"vocab_size", 300}, {"rms_norm_eps", 1e-5},
          {"rope_theta", 10000.0}, {"tie_word_embeddings", tied}, {"eos_token_id", 1}};
}

std::vector<Case> cases() {
  json llama = base("LlamaForCausalLM", 2, 96, 3, 1, 48, false);
  llama["rope_scaling"] = {{"rope_type", "llama3"}, {"factor", 8.0}, {"low_freq_factor", 1.0},
                           {"high_freq_factor", 4.0}, {"original_max_position_embeddings", 16}};
  return {{"llama-headdim48-untied-llama3rope", llama, DType::BF16, 1},
          {"qwen3-mha-f16-sharded", base("Qwen3ForCausalLM", 3, 64, 4, 4, 48, true), DType::F16, 3},
          {"qwen2-bias-f32", base("Qwen2ForCausalLM", 2, 40, 5, 5, 8, false), DType::F32, 2}};
}

TEST(Generalization, ForwardMatchesAnIndependentDoublePrecisionForward) {
  for (const auto& c : cases()) {
    SCOPED_TRACE(c.name);
    auto dir = std::filesystem::temp_directory_path() / (std::string("fs-gen-") + c.name);
    MakeCheckpointOptions o;
    o.dtype = c.dtype;
    o.shards = c.shards;
    o.seed = 3;
    make_checkpoint(c.config, dir, o);
    ModelConfig cfg = load_model_config(dir);
    auto ck = Checkpoint::open(dir);
    auto model = create_model(cfg, ck);
    std::vector<int32_t> ids;
    for (int i = 0; i < 40; ++i) ids.push_back((i * 37 + 11) % cfg.vocab_size);
    KvPool pool(cfg.num_layers, cfg.num_kv_heads, cfg.head_dim, 16, 3);
    std::vector<int32_t> pages{*pool.allocate(), *pool.allocate(), *pool.allocate()};
    SequenceChunk chunk{ids, 0, pages, true};
    auto got = model->forward(std::span<const SequenceChunk>(&chunk, 1), pool);
    bool bias = cfg.architecture == "Qwen2ForCausalLM", qk = cfg.architecture == "Qwen3ForCausalLM";
    auto want = naive_forward(cfg, *ck, ids, bias, qk);
    ASSERT_EQ(got.size(), want.size());
    std::vector<float> wantf(want.begin(), want.end());
    EXPECT_LE(rel_l2(got, wantf), 1e-5);
    std::filesystem::remove_all(dir);
  }
}

TEST(Generalization, UnknownArchitectureIsRefusedByName) {
  json c = base("GPT2LMHeadModel", 1, 8, 2, 2, 4, true);
  try {
    create_model(parse_model_config(c, "config.json"), nullptr);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("GPT2LMHeadModel"), std::string::npos);
  }
}

TEST(Generalization, MissingAndMisshapenTensorsAreNamed) {
  auto dir = std::filesystem::temp_directory_path() / "fs-gen-missing";
  json c = base("LlamaForCausalLM", 1, 16, 2, 2, 8, false);
  make_checkpoint(c, dir, {});
  ModelConfig cfg = load_model_config(dir);
  cfg.intermediate_size = 40;
  try {
    create_model(cfg, Checkpoint::open(dir));
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("mlp.gate_proj.weight has shape [48, 16], expected [40, 16]"),
              std::string::npos)
        << e.what();
  }
  cfg = load_model_config(dir);
  cfg.num_layers = 2;
  try {
    create_model(cfg, Checkpoint::open(dir));
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("missing tensor model.layers.1."), std::string::npos) << e.what();
  }
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace fs::test
