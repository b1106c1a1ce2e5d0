// (1) Each backend against transformers' float32 answers in ../shared/reference: last logits and every hidden state
// within the backend's tolerance, greedy ids equal up to the first near-tie. Vision-language fixtures run their
// text side on the reference tower's features and M-RoPE positions.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <string>
#include <map>

#include "conformance.h"
#include "core/files.h"
#include "sequence_pool.h"
#include "support/fixtures.h"

namespace fs::test {
namespace {

class Reference : public Conformance {
 protected:
  // Expects every slice of `per_layer` floats of `got` within tolerance of `want`'s.
  void expect_layers_close(const std::vector<float>& got, const std::vector<float>& want, size_t per_layer) {
    ASSERT_EQ(got.size(), want.size());
    std::string errors;
    for (size_t layer = 0; layer * per_layer < got.size(); ++layer) {
      std::vector<float> a(got.begin() + long(layer * per_layer), got.begin() + long((layer + 1) * per_layer));
      std::vector<float> b(want.begin() + long(layer * per_layer), want.begin() + long((layer + 1) * per_layer));
      const double e = rel_l2(a, b);
      char text[32];
      std::snprintf(text, sizeof text, " %.3g", e);
      errors += text;
      EXPECT_LE(e, reference_tolerance(GetParam().backend)) << "hidden states after layer " << layer;
    }
    std::printf("hidden-state rel L2 by layer:%s\n", errors.c_str());
  }

  // Reference ids up to (not including) the first step whose margin is a near-tie on this backend.
  std::vector<int32_t> before_near_tie(const std::vector<int32_t>& ids, const std::vector<double>& margins) {
    std::vector<int32_t> want;
    for (size_t i = 0; i < ids.size() && margins.at(i) >= near_tie_margin(GetParam().backend); ++i)
      want.push_back(ids[i]);
    return want;
  }

  void text_cases(const json& cases);
  void vision_prompts(const json& ref);
};

void Reference::text_cases(const json& cases) {
  ASSERT_FALSE(cases.empty());
  const double tolerance = reference_tolerance(GetParam().backend);
  size_t longest = 0;
  for (const auto& c : cases) longest = std::max(longest, c["ids"].size() + c["greedy"].size());
  SequencePool seqs(*model, 1, int(longest));
  size_t compared = 0;
  for (const auto& c : cases) {
    SCOPED_TRACE(c.value("name", c.value("ask", std::string())));
    auto ids = c["ids"].get<std::vector<int32_t>>();
    auto logits = seqs.prefill(0, ids, int(ids.size()));
    if (c.contains("last_logits")) {
      const double e = rel_l2(logits, read_f32(reference_dir / c["last_logits"]["file"].get<std::string>()));
      std::printf("last-logits rel L2: %g\n", e);
      EXPECT_LE(e, tolerance);
    }
    if (c.contains("hidden_states")) {
      auto states = model->hidden_states(seqs.chunk(0, ids, 0), seqs.pool());
      expect_layers_close(states, read_f32(reference_dir / c["hidden_states"]["file"].get<std::string>()),
                          ids.size() * size_t(config.hidden_size));
    }
    std::vector<int32_t> greedy;
    std::vector<double> margins;
    for (const auto& g : c["greedy"]) {
      greedy.push_back(g["id"].get<int32_t>());
      margins.push_back(g["margin"].get<double>());
    }
    auto want = before_near_tie(greedy, margins);
    compared += want.size();
    EXPECT_EQ(seqs.greedy(0, logits, int(ids.size()), int(want.size())), want);
  }
  EXPECT_GT(compared, 0u) << "every case starts at a near-tie: no greedy id was compared";
}

void Reference::vision_prompts(const json& ref) {
  ASSERT_FALSE(ref["prompts"].empty());
  std::map<std::string, std::vector<float>> towers;
  for (const auto& img : ref["images"])
    towers[img["file"].get<std::string>()] = read_f32(reference_dir / img["tower_output"]["file"].get<std::string>());
  size_t longest = 0;
  for (const auto& p : ref["prompts"]) longest = std::max(longest, p["ids"].size() + p["greedy"].size());
  SequencePool seqs(*model, 1, int(longest));
  size_t compared = 0;
  for (const auto& p : ref["prompts"]) {
    SCOPED_TRACE(p["name"].get<std::string>());
    std::vector<float> features;
    for (const auto& m : p["messages"])
      if (m["content"].is_array())
        for (const auto& part : m["content"])
          if (part["type"] == "image") {
            const auto& t = towers.at(part["image"].get<std::string>());
            features.insert(features.end(), t.begin(), t.end());
          }
    auto ids = p["ids"].get<std::vector<int32_t>>();
    auto thw = p["position_ids_thw"].get<std::vector<std::vector<int32_t>>>();
    std::vector<int32_t> positions;
    for (size_t i = 0; i < ids.size(); ++i)
      for (size_t axis = 0; axis < 3; ++axis) positions.push_back(thw[axis][i]);
    const int rope_delta = p["rope_delta"].get<int>();
    SequenceChunk c = seqs.chunk(0, ids, 0);
    c.mrope_positions = positions;
    c.rope_delta = rope_delta;
    c.image_embeddings = features;
    auto logits = seqs.forward(std::span<const SequenceChunk>(&c, 1));
    EXPECT_LE(rel_l2(logits, read_f32(reference_dir / p["last_logits"]["file"].get<std::string>())),
              reference_tolerance(GetParam().backend));
    auto want = before_near_tie(p["greedy"].get<std::vector<int32_t>>(), p["greedy_margins"].get<std::vector<double>>());
    compared += want.size();
    EXPECT_EQ(seqs.greedy(0, logits, int(ids.size()), int(want.size()), rope_delta), want);
  }
  EXPECT_GT(compared, 0u) << "every prompt starts at a near-tie: no greedy id was compared";
}

TEST_P(Reference, LogitsHiddenStatesAndGreedyMatchTransformers) {
  json ref = read_json_file(reference_dir / "cases.json");
  if (ref.contains("prompts")) vision_prompts(ref);
  else text_cases(ref["cases"]);
}

FS_CONFORMANCE_INSTANCES(Reference);

}  // namespace
}  // namespace fs::test
