// The tensor-parallel plan of Llama, Qwen3 and Qwen3.5 programs built from the fixture configs: the ranks' pieces
// tile every tensor exactly once, a rank's query heads read only its own K/V heads (and its DeltaNet value heads
// only its own key heads), and what does not divide is refused by name.
#include <gtest/gtest.h>

#include <fstream>
#include <set>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "models/tensor_parallel_plan.h"
#include "support/fixtures.h"

namespace fs {
namespace {

// model_program() of shared/models/<model>/config.json with `edits` applied to its fields.
ModelProgram program_of(const std::filesystem::path& shared, const std::string& model,
                        const nlohmann::json& edits = nlohmann::json::object()) {
  nlohmann::json config = nlohmann::json::parse(std::ifstream(shared / "models" / model / "config.json"));
  config.update(edits);
  return model_program(parse_model_config(config, model), nullptr);
}

std::string refusal(const ModelProgram& program, int ranks) {
  try {
    tensor_parallel_plan(program, ranks);
  } catch (const Error& e) {
    return e.what();
  }
  return {};
}

int64_t cols_of(const TensorPart& part) { return part.shape.size() > 1 ? part.shape[1] : 1; }

// Every tensor the program reads.
std::set<std::string> program_tensors(const ModelProgram& p) {
  std::set<std::string> names;
  auto add = [&](const std::vector<TensorPart>& parts) {
    for (const auto& part : parts) names.insert(part.name);
  };
  add(p.embed.parts);
  add(p.head.parts);
  add(p.final_norm.parts);
  for (const auto& L : p.layers) {
    for (const auto* v : {&L.norm, &L.mlp_norm}) add(v->parts);
    for (const auto* m : {&L.mlp.gate, &L.mlp.up, &L.mlp.down}) add(m->parts);
    if (const auto& a = L.attention) {
      for (const auto* m : {&a->qkv, &a->o}) add(m->parts);
      for (const auto* v : {&a->qkv_bias, &a->q_norm, &a->k_norm}) add(v->parts);
    }
    if (const auto& d = L.deltanet) {
      for (const auto* m : {&d->in_qkv, &d->in_z, &d->in_a, &d->in_b, &d->out}) add(m->parts);
      for (const auto* v : {&d->conv, &d->a_log, &d->dt_bias, &d->norm}) add(v->parts);
    }
  }
  return names;
}

// Split tensors are covered exactly once by the ranks' slices, replicated ones whole by every rank.
void expect_tiles(const TensorParallelPlan& plan) {
  for (const auto& t : plan.tensors) {
    SCOPED_TRACE(t.tensor.name);
    ASSERT_EQ(int(t.ranks.size()), plan.ranks);
    const int64_t rows = t.tensor.shape.at(0), cols = cols_of(t.tensor);
    std::vector<uint8_t> covered(size_t(rows * cols), 0);
    for (const auto& slice : t.ranks) {
      ASSERT_TRUE(slice.cols.begin >= 0 && slice.cols.begin < slice.cols.end && slice.cols.end <= cols);
      for (const auto& r : slice.rows) {
        ASSERT_TRUE(r.begin >= 0 && r.begin < r.end && r.end <= rows);
        for (int64_t i = r.begin; i < r.end; ++i)
          for (int64_t j = slice.cols.begin; j < slice.cols.end; ++j) ++covered[size_t(i * cols + j)];
      }
    }
    const int expected = t.split == TensorSplit::replicated ? plan.ranks : 1;
    for (size_t e = 0; e < covered.size(); ++e) ASSERT_EQ(covered[e], expected) << "element " << e;
  }
}

// The heads (or channels) of `unit` rows that a rank's slice holds within [begin, end) of the rows.
std::set<int64_t> units_in(const TensorSlice& slice, int64_t begin, int64_t end, int64_t unit) {
  std::set<int64_t> units;
  for (const auto& r : slice.rows)
    for (int64_t i = std::max(r.begin, begin); i < std::min(r.end, end); ++i) units.insert((i - begin) / unit);
  return units;
}

std::set<int64_t> column_units(const TensorSlice& slice, int64_t unit) {
  std::set<int64_t> units;
  for (int64_t j = slice.cols.begin; j < slice.cols.end; ++j) units.insert(j / unit);
  return units;
}

void expect_heads_line_up(const ModelProgram& program, const TensorParallelPlan& plan) {
  for (size_t l = 0; l < program.layers.size(); ++l) {
    SCOPED_TRACE("layer " + std::to_string(l));
    if (const auto& a = program.layers[l].attention) {
      ASSERT_EQ(a->qkv.parts.size(), 3u);
      const int64_t q_unit = (a->output_gate ? 2 : 1) * a->head_dim, group = a->heads / a->kv_heads;
      std::set<int64_t> all_q;
      for (int r = 0; r < plan.ranks; ++r) {
        const auto q = units_in(plan.find(a->qkv.parts[0].name).ranks[size_t(r)], 0, a->heads * q_unit, q_unit);
        const auto k = units_in(plan.find(a->qkv.parts[1].name).ranks[size_t(r)], 0, a->kv_heads * a->head_dim,
                                a->head_dim);
        const auto v = units_in(plan.find(a->qkv.parts[2].name).ranks[size_t(r)], 0, a->kv_heads * a->head_dim,
                                a->head_dim);
        EXPECT_EQ(int64_t(q.size()), a->heads / plan.ranks);
        EXPECT_EQ(k, v);
        for (int64_t h : q) EXPECT_TRUE(k.count(h / group)) << "rank " << r << " q head " << h;
        EXPECT_EQ(column_units(plan.find(a->o.parts[0].name).ranks[size_t(r)], a->head_dim), q);
        all_q.insert(q.begin(), q.end());
      }
      EXPECT_EQ(int64_t(all_q.size()), a->heads);
    }
    if (const auto& d = program.layers[l].deltanet) {
      const DeltaNetShape& s = d->shape;
      const int64_t group = s.value_heads / s.key_heads;
      for (int r = 0; r < plan.ranks; ++r) {
        const auto& qkv = plan.find(d->in_qkv.parts[0].name).ranks[size_t(r)];
        const auto q = units_in(qkv, 0, s.key_channels(), s.key_dim);
        const auto k = units_in(qkv, s.key_channels(), 2 * s.key_channels(), s.key_dim);
        const auto v = units_in(qkv, 2 * s.key_channels(), s.conv_channels(), s.value_dim);
        EXPECT_EQ(q, k);
        EXPECT_EQ(int64_t(v.size()), s.value_heads / plan.ranks);
        for (int64_t h : v) EXPECT_TRUE(k.count(h / group)) << "rank " << r << " value head " << h;
        const auto& conv = plan.find(d->conv.parts[0].name).ranks[size_t(r)];
        EXPECT_EQ(conv.rows, qkv.rows);
        EXPECT_EQ(units_in(plan.find(d->in_z.parts[0].name).ranks[size_t(r)], 0, s.value_channels(), s.value_dim), v);
        for (const auto* per_head : {&d->in_a.parts[0], &d->in_b.parts[0], &d->a_log.parts[0], &d->dt_bias.parts[0]})
          EXPECT_EQ(units_in(plan.find(per_head->name).ranks[size_t(r)], 0, s.value_heads, 1), v) << per_head->name;
        EXPECT_EQ(column_units(plan.find(d->out.parts[0].name).ranks[size_t(r)], s.value_dim), v);
      }
    }
  }
}

void expect_sound_plan(const ModelProgram& program, int ranks) {
  SCOPED_TRACE(program.family + " over " + std::to_string(ranks) + " ranks");
  const TensorParallelPlan plan = tensor_parallel_plan(program, ranks);
  std::set<std::string> planned;
  for (const auto& t : plan.tensors) planned.insert(t.tensor.name);
  EXPECT_EQ(planned, program_tensors(program));
  EXPECT_EQ(planned.size(), plan.tensors.size());
  expect_tiles(plan);
  expect_heads_line_up(program, plan);
}

TEST(TensorParallelPlan, LlamaTilesEveryTensorAndLinesUpHeads) {
  FS_REQUIRE_SHARED(shared);
  const auto gqa = program_of(shared, "tiny-llama3", {{"num_attention_heads", 8}, {"num_key_value_heads", 2}});
  for (int ranks : {1, 2}) expect_sound_plan(gqa, ranks);
  const auto untied = program_of(
      shared, "tiny-llama3", {{"num_attention_heads", 4}, {"num_key_value_heads", 4}, {"tie_word_embeddings", false}});
  ASSERT_FALSE(untied.tied());
  for (int ranks : {2, 4}) expect_sound_plan(untied, ranks);
  expect_sound_plan(program_of(shared, "tiny-llama3"), 1);
}

TEST(TensorParallelPlan, Qwen3TilesEveryTensorAndLinesUpHeads) {
  FS_REQUIRE_SHARED(shared);
  for (int ranks : {1, 2}) expect_sound_plan(program_of(shared, "tiny-qwen3"), ranks);
  // Qwen2's q/k/v biases split with their rows.
  const auto biased = program_of(shared, "tiny-qwen2", {{"num_key_value_heads", 2}});
  ASSERT_FALSE(biased.layers[0].attention->qkv_bias.empty());
  for (int ranks : {1, 2}) expect_sound_plan(biased, ranks);
}

TEST(TensorParallelPlan, Qwen3_5TilesEveryTensorAndLinesUpHeads) {
  FS_REQUIRE_SHARED(shared);
  for (int ranks : {1, 2}) expect_sound_plan(program_of(shared, "tiny-qwen3.5"), ranks);
}

TEST(TensorParallelPlan, MegatronLayoutOfOneLayer) {
  FS_REQUIRE_SHARED(shared);
  const auto program = program_of(shared, "tiny-qwen3");  // 4 heads / 2 K/V heads of 32, hidden 64, FFN 128
  const auto plan = tensor_parallel_plan(program, 2);
  const auto& layer = program.layers[0];
  const auto& q = plan.find(layer.attention->qkv.parts[0].name);
  EXPECT_EQ(q.split, TensorSplit::rows);
  EXPECT_EQ(q.ranks[1].rows, (std::vector<IndexRange>{{64, 128}}));
  const auto& o = plan.find(layer.attention->o.parts[0].name);
  EXPECT_EQ(o.split, TensorSplit::columns);
  EXPECT_EQ(o.ranks[1].cols, (IndexRange{64, 128}));
  EXPECT_EQ(plan.find(layer.mlp.down.parts[0].name).ranks[0].cols, (IndexRange{0, 64}));
  EXPECT_EQ(plan.find(layer.mlp.gate.parts[0].name).ranks[1].rows, (std::vector<IndexRange>{{64, 128}}));
  EXPECT_EQ(plan.find(layer.norm.parts[0].name).split, TensorSplit::replicated);
  EXPECT_EQ(plan.find(program.embed.parts[0].name).ranks[1].rows, (std::vector<IndexRange>{{75968, 151936}}));
}

TEST(TensorParallelPlan, RefusesWhatDoesNotDivideByName) {
  FS_REQUIRE_SHARED(shared);
  EXPECT_EQ(refusal(program_of(shared, "tiny-llama3"), 2),
            "tensor parallelism over 2 ranks: layer 0 has 3 attention heads, not a multiple of 2");
  EXPECT_EQ(refusal(program_of(shared, "tiny-qwen3"), 4),
            "tensor parallelism over 4 ranks: layer 0 has 2 K/V heads, not a multiple of 4");
  EXPECT_EQ(refusal(program_of(shared, "tiny-qwen3.5"), 4),
            "tensor parallelism over 4 ranks: layer 0 has 2 DeltaNet key heads, not a multiple of 4");
  EXPECT_EQ(refusal(program_of(shared, "tiny-qwen3", {{"intermediate_size", 129}}), 2),
            "tensor parallelism over 2 ranks: layer 0 has 129 FFN rows, not a multiple of 2");
  EXPECT_EQ(refusal(program_of(shared, "tiny-qwen3", {{"vocab_size", 151937}}), 2),
            "tensor parallelism over 2 ranks: the model has 151937 vocabulary entries, not a multiple of 2");
  EXPECT_EQ(refusal(program_of(shared, "tiny-qwen3"), 0), "tensor parallelism needs at least 1 rank, not 0");
}

// Every tensor part a program places, with its slice.
std::vector<TensorPart> placed_parts(const ModelProgram& p) {
  std::vector<TensorPart> parts;
  auto add = [&](const std::vector<TensorPart>& more) { parts.insert(parts.end(), more.begin(), more.end()); };
  add(p.embed.parts);
  if (!p.tied()) add(p.head.parts);
  add(p.final_norm.parts);
  for (const auto& L : p.layers) {
    for (const VectorRef* v : {&L.norm, &L.mlp_norm}) add(v->parts);
    if (const auto& a = L.attention) {
      for (const MatrixRef* m : {&a->qkv, &a->o}) add(m->parts);
      for (const VectorRef* v : {&a->qkv_bias, &a->q_norm, &a->k_norm}) add(v->parts);
    }
    if (const auto& d = L.deltanet) {
      for (const MatrixRef* m : {&d->in_qkv, &d->in_z, &d->in_a, &d->in_b, &d->out}) add(m->parts);
      for (const VectorRef* v : {&d->conv, &d->a_log, &d->dt_bias, &d->norm}) add(v->parts);
    }
    for (const MatrixRef* m : {&L.mlp.gate, &L.mlp.up, &L.mlp.down}) add(m->parts);
  }
  return parts;
}

TEST(TensorParallelPlan, ShardProgramsHoldTheirShareAndSplitTheSequenceMemory) {
  FS_REQUIRE_SHARED(shared);
  const ModelProgram qwen35 = program_of(shared, "tiny-qwen3.5");
  const ModelProgram qwen3 = program_of(shared, "tiny-qwen3", {{"num_key_value_heads", 2}});
  for (const ModelProgram* full : {&qwen3, &qwen35}) {
    SCOPED_TRACE(full->family);
    const TensorParallelPlan plan = tensor_parallel_plan(*full, 2);
    for (int r = 0; r < 2; ++r) {
      const ModelProgram shard = shard_program(*full, plan, r);
      for (const TensorPart& part : placed_parts(shard)) {
        const bool split = plan.find(part.name).split != TensorSplit::replicated;
        EXPECT_EQ(part.placed_elements() * (split ? 2 : 1), part.elements()) << part.name;
      }
      EXPECT_EQ(shard.memory.kv_layers, full->memory.kv_layers);
      EXPECT_EQ(shard.memory.kv_heads * 2, full->memory.kv_heads);
      EXPECT_EQ(shard.memory.state_floats * 2, full->memory.state_floats);
      EXPECT_EQ(shard.embed.rows() * 2, full->embed.rows());
      for (size_t i = 0; i < full->layers.size(); ++i) {
        const LayerProgram &a = full->layers[i], &b = shard.layers[i];
        EXPECT_EQ(b.mlp.gate.rows() * 2, a.mlp.gate.rows());
        EXPECT_EQ(b.mlp.down.cols() * 2, a.mlp.down.cols());
        if (a.attention) {
          EXPECT_EQ(b.attention->heads * 2, a.attention->heads);
          EXPECT_EQ(b.attention->qkv.rows() * 2, a.attention->qkv.rows());
          EXPECT_EQ(b.attention->o.cols() * 2, a.attention->o.cols());
        }
        if (a.deltanet) {
          EXPECT_EQ(b.deltanet->shape.value_heads * 2, a.deltanet->shape.value_heads);
          EXPECT_EQ(b.deltanet->conv.size() * 2, a.deltanet->conv.size());
        }
      }
    }
  }
}

}  // namespace
}  // namespace fs
