#pragma once
// How a model's tensors split over N tensor-parallel ranks (Megatron layout): q|k|v, gate and up by output rows
// (column-parallel), o and down by input columns (row-parallel), embeddings and head by vocabulary, Gated DeltaNet
// by key head groups (each key head with its value heads) with out_proj by columns, norms replicated. A rank's
// attention heads are whole heads and its query heads use only its own K/V heads.
#include <cstdint>
#include <string>
#include <vector>

#include "models/model_program.h"

namespace fs {

enum class TensorSplit { replicated, rows, columns };

// One checkpoint tensor and the slice of it each rank holds.
struct TensorShards {
  TensorPart tensor;
  std::string what;  // "layer 3 o projection"
  TensorSplit split = TensorSplit::replicated;
  std::vector<TensorSlice> ranks;  // one per rank
};

struct TensorParallelPlan {
  int ranks = 1;
  std::vector<TensorShards> tensors;  // every tensor the program reads, once each, in program order

  // The shards of tensor `name`; throws fs::Error when the program does not read it.
  const TensorShards& find(const std::string& name) const;
};

// The plan of `program` over `ranks` ranks. Throws fs::Error naming the layer and the count that does not divide
// by `ranks` (attention heads, K/V heads, DeltaNet key heads, FFN width, vocabulary).
TensorParallelPlan tensor_parallel_plan(const ModelProgram& program, int ranks);

// What rank `rank` of `plan` runs: every tensor part carries the rank's slice, and the steps' head counts, FFN width,
// vocabulary and sequence memory are the rank's share.
ModelProgram shard_program(const ModelProgram& program, const TensorParallelPlan& plan, int rank);

}  // namespace fs
