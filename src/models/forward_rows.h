#pragma once
// The rows of one forward pass: each chunk's tokens in chunk order, checked against the model and the page table.
#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "models/model.h"

namespace fs {

// One token of a chunk as a backend lays it out.
struct ChunkRow {
  int32_t token = 0;
  int position = 0;              // the token's K/V slot: its position, or start_pos + row for a tree row
  int depth = 0;                 // its index in a chain, its count of ancestors in a tree
  bool logits = false;           // the chunk wants this row's logits
  const float* image = nullptr;  // the image feature replacing the token's embedding, or none
  int rope[3] = {0, 0, 0};       // (t, h, w) rotary positions
};

// Throws unless the chunk's page table covers its positions, its M-RoPE positions cover its tokens and each row
// parent is an earlier row.
void check_chunk_fits(const SequenceChunk& chunk, int page_tokens);

// For a model with recurrent state: throws unless every chunk carries its own state slot and its snapshots fall
// inside it in ascending order.
void check_state_chunks(std::span<const SequenceChunk> chunks);

// Each row's depth: its index in a chain, its count of ancestors in a tree (SequenceChunk::row_parents).
std::vector<int> row_depths(const SequenceChunk& chunk);

// The chunk's rows in order; throws on a token outside the vocabulary or an image token without a feature.
std::vector<ChunkRow> chunk_rows(const SequenceChunk& chunk, const ModelConfig& config);

// The rows of every chunk, consecutive and in chunk order, for a CPU forward pass.
struct ForwardRows {
  std::vector<int32_t> tokens;
  std::vector<int> positions;       // K/V slot of each row (ChunkRow::position)
  std::vector<int> rope_positions;  // (t, h, w) per row
  std::vector<int> chunk_of;        // each row's chunk
  std::vector<int> first_row;       // each chunk's first row
  std::vector<int> logit_rows;
  std::vector<std::pair<int, const float*>> image_rows;  // row → the feature replacing its embedding
};

// Checks each chunk (check_chunk_fits, chunk_rows) and lays out their rows.
ForwardRows plan_forward_rows(std::span<const SequenceChunk> chunks, const ModelConfig& config, int page_tokens);

}  // namespace fs
