// The Megatron sharding of a model program over tensor-parallel ranks.
#include "models/tensor_parallel_plan.h"

#include <algorithm>
#include <set>

#include "core/error.h"

namespace fs {

namespace {

// One block of rows in a stack (q, k or v of a q|k|v projection): `units` heads (or channels) of `unit_rows` rows
// each, split evenly over the ranks.
struct Segment {
  int64_t units = 0, unit_rows = 0;
  int64_t rows() const { return units * unit_rows; }
  IndexRange of(int rank, int ranks) const {
    const int64_t per = units / ranks;
    return {rank * per * unit_rows, (rank + 1) * per * unit_rows};
  }
};

class Planner {
 public:
  Planner(const ModelProgram& program, int ranks) : program_(program), plan_{ranks, {}} {}

  TensorParallelPlan run() {
    require(program_.embed.rows(), "vocabulary entries", "the model");
    by_rows(program_.embed, {{program_.embed.rows(), 1}}, "embeddings");
    if (!program_.tied()) by_rows(program_.head, {{program_.head.rows(), 1}}, "lm_head");
    replicated(program_.final_norm, "final norm");
    for (size_t i = 0; i < program_.layers.size(); ++i) layer(program_.layers[i], "layer " + std::to_string(i));
    return std::move(plan_);
  }

 private:
  void layer(const LayerProgram& L, const std::string& where) {
    replicated(L.norm, where + " norm");
    replicated(L.mlp_norm, where + " MLP norm");
    if (L.attention) attention(*L.attention, where);
    if (L.deltanet) deltanet(*L.deltanet, where);
    const int64_t ffn = L.mlp.gate.rows();
    require(ffn, "FFN rows", where);
    by_rows(L.mlp.gate, {{ffn, 1}}, where + " gate projection");
    by_rows(L.mlp.up, {{L.mlp.up.rows(), 1}}, where + " up projection");
    by_columns(L.mlp.down, Segment{ffn, 1}, where + " down projection");
  }

  void attention(const AttentionStep& a, const std::string& where) {
    require(a.heads, "attention heads", where);
    require(a.kv_heads, "K/V heads", where);
    const std::vector<Segment> qkv = {
        {a.heads, int64_t(a.output_gate ? 2 : 1) * a.head_dim}, {a.kv_heads, a.head_dim}, {a.kv_heads, a.head_dim}};
    by_rows(a.qkv, qkv, where + " " + a.qkv.what);
    if (!a.qkv_bias.empty()) by_rows(a.qkv_bias.parts, qkv, where + " " + a.qkv_bias.what);
    replicated(a.q_norm, where + " q norm");
    replicated(a.k_norm, where + " k norm");
    by_columns(a.o, Segment{a.heads, a.head_dim}, where + " o projection");
  }

  // Each rank takes whole key heads and the value heads that read them (value head v reads key head v / group).
  void deltanet(const DeltaNetStep& d, const std::string& where) {
    const DeltaNetShape& s = d.shape;
    require(s.key_heads, "DeltaNet key heads", where);
    const std::vector<Segment> qkv = {{s.key_heads, s.key_dim}, {s.key_heads, s.key_dim}, {s.value_heads, s.value_dim}};
    by_rows(d.in_qkv, qkv, where + " DeltaNet q/k/v projection");
    by_rows(d.conv.parts, qkv, where + " DeltaNet conv");
    by_rows(d.in_z, {{s.value_heads, s.value_dim}}, where + " DeltaNet z projection");
    by_rows(d.in_a, {{s.value_heads, 1}}, where + " DeltaNet a projection");
    by_rows(d.in_b, {{s.value_heads, 1}}, where + " DeltaNet b projection");
    by_rows(d.a_log.parts, {{s.value_heads, 1}}, where + " DeltaNet A_log");
    by_rows(d.dt_bias.parts, {{s.value_heads, 1}}, where + " DeltaNet dt_bias");
    replicated(d.norm, where + " DeltaNet norm");
    by_columns(d.out, Segment{s.value_heads, s.value_dim}, where + " DeltaNet out projection");
  }

  void require(int64_t count, const std::string& what, const std::string& where) const {
    if (count % plan_.ranks != 0)
      throw Error("tensor parallelism over " + std::to_string(plan_.ranks) + " ranks: " + where + " has " +
                  std::to_string(count) + " " + what + ", not a multiple of " + std::to_string(plan_.ranks));
  }

  static int64_t cols_of(const TensorPart& part) { return part.shape.size() > 1 ? part.shape[1] : 1; }

  // Parts stacked along their first dimension hold the segments in order; each rank takes its share of every
  // segment.
  void by_rows(const std::vector<TensorPart>& parts, const std::vector<Segment>& segments, const std::string& what) {
    int64_t total = 0, part_rows = 0;
    for (const auto& s : segments) total += s.rows();
    for (const auto& p : parts) part_rows += p.shape.at(0);
    if (total != part_rows)
      throw Error("tensor parallelism: " + what + " has " + std::to_string(part_rows) + " rows where its heads make " +
                  std::to_string(total));
    int64_t part_start = 0;
    for (const auto& part : parts) {
      TensorShards shards{part, what, TensorSplit::rows, {}};
      const int64_t part_end = part_start + part.shape.at(0);
      for (int r = 0; r < plan_.ranks; ++r) {
        TensorSlice slice{{}, {0, cols_of(part)}};
        int64_t segment_start = 0;
        for (const auto& s : segments) {
          const IndexRange mine = s.of(r, plan_.ranks);
          const int64_t begin = std::max(segment_start + mine.begin, part_start);
          const int64_t end = std::min(segment_start + mine.end, part_end);
          if (begin < end) slice.rows.push_back({begin - part_start, end - part_start});
          segment_start += s.rows();
        }
        shards.ranks.push_back(std::move(slice));
      }
      add(std::move(shards));
      part_start = part_end;
    }
  }
  void by_rows(const MatrixRef& m, const std::vector<Segment>& segments, const std::string& what) {
    by_rows(m.parts, segments, what);
  }

  void by_columns(const MatrixRef& m, const Segment& segment, const std::string& what) {
    if (m.cols() != segment.rows())
      throw Error("tensor parallelism: " + what + " has " + std::to_string(m.cols()) +
                  " columns where its heads make " + std::to_string(segment.rows()));
    for (const auto& part : m.parts) {
      TensorShards shards{part, what, TensorSplit::columns, {}};
      for (int r = 0; r < plan_.ranks; ++r)
        shards.ranks.push_back({{{0, part.shape.at(0)}}, segment.of(r, plan_.ranks)});
      add(std::move(shards));
    }
  }

  void replicated(const VectorRef& v, const std::string& what) {
    for (const auto& part : v.parts) {
      TensorShards shards{part, what, TensorSplit::replicated, {}};
      for (int r = 0; r < plan_.ranks; ++r) shards.ranks.push_back({{{0, part.shape.at(0)}}, {0, cols_of(part)}});
      add(std::move(shards));
    }
  }

  void add(TensorShards shards) {
    if (!names_.insert(shards.tensor.name).second)
      throw Error("tensor parallelism: " + shards.tensor.name + " is read twice by the " + program_.family +
                  " program");
    plan_.tensors.push_back(std::move(shards));
  }

  const ModelProgram& program_;
  TensorParallelPlan plan_;
  std::set<std::string> names_;
};

}  // namespace

const TensorShards& TensorParallelPlan::find(const std::string& name) const {
  for (const auto& t : tensors)
    if (t.tensor.name == name) return t;
  throw Error("tensor parallel plan has no tensor " + name);
}

TensorParallelPlan tensor_parallel_plan(const ModelProgram& program, int ranks) {
  if (ranks < 1) throw Error("tensor parallelism needs at least 1 rank, not " + std::to_string(ranks));
  return Planner(program, ranks).run();
}

}  // namespace fs

namespace fs {

namespace {

// Gives every part of the program the rank's slice.
class Sharder {
 public:
  Sharder(const TensorParallelPlan& plan, int rank) : plan_(plan), rank_(rank) {}

  void operator()(MatrixRef& m) const {
    for (auto& p : m.parts) slice(p);
  }
  void operator()(VectorRef& v) const {
    for (auto& p : v.parts) slice(p);
  }

 private:
  void slice(TensorPart& p) const {
    const TensorShards& s = plan_.find(p.name);
    if (s.split != TensorSplit::replicated) p.slice = s.ranks.at(size_t(rank_));
  }

  const TensorParallelPlan& plan_;
  int rank_;
};

}  // namespace

ModelProgram shard_program(const ModelProgram& program, const TensorParallelPlan& plan, int rank) {
  if (rank < 0 || rank >= plan.ranks) throw Error("tensor parallel rank " + std::to_string(rank) + " out of range");
  const int n = plan.ranks;
  ModelProgram p = program;
  const Sharder shard(plan, rank);
  shard(p.embed);
  shard(p.head);
  shard(p.final_norm);
  size_t state_offset = 0;
  for (LayerProgram& L : p.layers) {
    shard(L.norm);
    shard(L.mlp_norm);
    if (auto& a = L.attention) {
      for (MatrixRef* m : {&a->qkv, &a->o}) shard(*m);
      for (VectorRef* v : {&a->qkv_bias, &a->q_norm, &a->k_norm}) shard(*v);
      a->heads /= n;
      a->kv_heads /= n;
    }
    if (auto& d = L.deltanet) {
      for (MatrixRef* m : {&d->in_qkv, &d->in_z, &d->in_a, &d->in_b, &d->out}) shard(*m);
      for (VectorRef* v : {&d->conv, &d->a_log, &d->dt_bias, &d->norm}) shard(*v);
      d->shape.key_heads /= n;
      d->shape.value_heads /= n;
      d->state_offset = state_offset;
      state_offset += d->shape.state_floats();
    }
    for (MatrixRef* m : {&L.mlp.gate, &L.mlp.up, &L.mlp.down}) shard(*m);
  }
  p.memory.kv_heads /= n;
  p.memory.state_floats = state_offset;
  return p;
}

}  // namespace fs
