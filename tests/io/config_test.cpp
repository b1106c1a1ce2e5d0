// config.json in the classic and the newer layouts gives the same model configuration.
#include <gtest/gtest.h>

#include "core/error.h"
#include "core/files.h"
#include "io/hf_config.h"
#include "support/fixtures.h"

namespace fs {
namespace {

void expect_same(const ModelConfig& a, const ModelConfig& b) {
  EXPECT_EQ(a.architecture, b.architecture);
  EXPECT_EQ(a.vocab_size, b.vocab_size);
  EXPECT_EQ(a.hidden_size, b.hidden_size);
  EXPECT_EQ(a.intermediate_size, b.intermediate_size);
  EXPECT_EQ(a.num_layers, b.num_layers);
  EXPECT_EQ(a.num_heads, b.num_heads);
  EXPECT_EQ(a.num_kv_heads, b.num_kv_heads);
  EXPECT_EQ(a.head_dim, b.head_dim);
  EXPECT_DOUBLE_EQ(a.rope.theta, b.rope.theta);
  EXPECT_EQ(a.rope.type, b.rope.type);
  EXPECT_DOUBLE_EQ(a.rope.factor, b.rope.factor);
  EXPECT_EQ(a.rope.mrope_section, b.rope.mrope_section);
  EXPECT_EQ(a.tie_word_embeddings, b.tie_word_embeddings);
  EXPECT_EQ(a.eos_ids, b.eos_ids);
  EXPECT_EQ(a.image_token_id, b.image_token_id);
}

TEST(HfConfig, ClassicAndNewerLayoutsAgree) {
  FS_REQUIRE_SHARED(shared);
  for (const char* name : {"tiny-qwen3", "tiny-qwen2", "tiny-llama3", "tiny-qwen2.5-vl"}) {
    SCOPED_TRACE(name);
    ModelConfig classic = load_model_config(shared / "models" / name);
    json saved = read_json_file(shared / "reference" / name / "cases.json")["config_as_saved_by_transformers"];
    ModelConfig newer = parse_model_config(saved, "saved");
    expect_same(classic, newer);
  }
}

TEST(HfConfig, FixtureValuesComeThrough) {
  FS_REQUIRE_SHARED(shared);
  ModelConfig q3 = load_model_config(shared / "models/tiny-qwen3");
  EXPECT_EQ(q3.head_dim, 32);  // differs from hidden / heads
  ModelConfig l3 = load_model_config(shared / "models/tiny-llama3");
  EXPECT_EQ(l3.rope.type, "llama3");
  EXPECT_EQ(l3.eos_ids.size(), 3u);
  GenerationConfig g = load_generation_config(shared / "models/fortune-demo", load_model_config(shared / "models/fortune-demo"));
  EXPECT_TRUE(g.do_sample);
  EXPECT_EQ(g.eos_ids.size(), 2u);
}

TEST(HfConfig, MalformedConfigsNameTheField) {
  auto error_of = [](const json& j) {
    try {
      parse_model_config(j, "config.json");
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  json good = {{"architectures", {"LlamaForCausalLM"}}, {"vocab_size", 10}, {"hidden_size", 8},
               {"intermediate_size", 16}, {"num_hidden_layers", 1}, {"num_attention_heads", 2}};
  EXPECT_EQ(error_of(good), "");
  json j = good;
  j.erase("vocab_size");
  EXPECT_NE(error_of(j).find("'vocab_size' is missing"), std::string::npos);
  j = good;
  j["hidden_size"] = "big";
  EXPECT_NE(error_of(j).find("'hidden_size'"), std::string::npos);
  j = good;
  j["num_key_value_heads"] = 3;
  EXPECT_NE(error_of(j).find("multiple"), std::string::npos);
  j = good;
  j["rope_scaling"] = {{"rope_type", "yarn-ish"}};
  EXPECT_NE(error_of(j).find("not supported"), std::string::npos);
  EXPECT_NE(error_of(json::array()).find("not a JSON object"), std::string::npos);
  EXPECT_NE(error_of(json::object()).find("architectures"), std::string::npos);
}

}  // namespace
}  // namespace fs
