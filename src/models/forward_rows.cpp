#include "models/forward_rows.h"

#include <string>

#include "core/error.h"

namespace fs {

void check_state_chunks(std::span<const SequenceChunk> chunks) {
  for (size_t c = 0; c < chunks.size(); ++c) {
    const SequenceChunk& ch = chunks[c];
    const int end = ch.start_pos + int(ch.tokens.size());
    if (ch.state_slot < 0) throw Error("a chunk of a recurrent model carries no state slot");
    for (size_t i = 0; i < ch.state_snapshots.size(); ++i) {
      const int p = ch.state_snapshots[i].position;
      if (p <= ch.start_pos || p > end || (i > 0 && p <= ch.state_snapshots[i - 1].position))
        throw Error("state snapshots must fall inside their chunk, in ascending order");
    }
    for (size_t d = 0; d < c; ++d)
      if (chunks[d].state_slot == ch.state_slot) throw Error("two chunks of one forward pass share a state slot");
  }
}

void check_chunk_fits(const SequenceChunk& ch, int page_tokens) {
  const int end = ch.start_pos + int(ch.tokens.size());
  if (size_t(end) > ch.pages.size() * size_t(page_tokens)) throw Error("KV page table too short for the chunk");
  if (!ch.mrope_positions.empty() && ch.mrope_positions.size() != ch.tokens.size() * 3)
    throw Error("M-RoPE positions do not cover the chunk");
  if (!ch.row_parents.empty() && ch.row_parents.size() != ch.tokens.size())
    throw Error("row parents do not cover the chunk");
  for (size_t i = 0; i < ch.row_parents.size(); ++i)
    if (ch.row_parents[i] < -1 || ch.row_parents[i] >= int32_t(i))
      throw Error("row " + std::to_string(i) + "'s parent " + std::to_string(ch.row_parents[i]) +
                  " is not an earlier row of the chunk");
}

std::vector<int> row_depths(const SequenceChunk& ch) {
  std::vector<int> depth(ch.tokens.size());
  for (size_t i = 0; i < depth.size(); ++i) {
    const int32_t parent = ch.row_parents.empty() ? int32_t(i) - 1 : ch.row_parents[i];
    depth[i] = parent < 0 ? 0 : depth[size_t(parent)] + 1;
  }
  return depth;
}

std::vector<ChunkRow> chunk_rows(const SequenceChunk& ch, const ModelConfig& config) {
  std::vector<ChunkRow> rows(ch.tokens.size());
  size_t image_row = 0;
  const std::vector<int> depth = row_depths(ch);
  for (size_t i = 0; i < ch.tokens.size(); ++i) {
    ChunkRow& row = rows[i];
    row.token = ch.tokens[i];
    if (row.token < 0 || row.token >= config.vocab_size)
      throw Error("token id " + std::to_string(row.token) + " is outside the vocabulary (" +
                  std::to_string(config.vocab_size) + ")");
    row.logits = ch.all_logits || (ch.last_logits && i + 1 == ch.tokens.size());
    if (row.token == config.image_token_id && !ch.image_embeddings.empty()) {
      if ((image_row + 1) * size_t(config.hidden_size) > ch.image_embeddings.size())
        throw Error("fewer image features than image tokens in the chunk");
      row.image = ch.image_embeddings.data() + image_row++ * config.hidden_size;
    }
    row.position = ch.start_pos + int(i);
    row.depth = depth[i];
    for (size_t s = 0; s < 3; ++s)
      row.rope[s] = ch.mrope_positions.empty() ? ch.start_pos + row.depth + ch.rope_delta : ch.mrope_positions[i * 3 + s];
  }
  return rows;
}

ForwardRows plan_forward_rows(std::span<const SequenceChunk> chunks, const ModelConfig& config, int page_tokens) {
  ForwardRows r;
  for (size_t c = 0; c < chunks.size(); ++c) {
    check_chunk_fits(chunks[c], page_tokens);
    r.first_row.push_back(int(r.tokens.size()));
    for (const ChunkRow& row : chunk_rows(chunks[c], config)) {
      const int index = int(r.tokens.size());
      if (row.logits) r.logit_rows.push_back(index);
      if (row.image) r.image_rows.emplace_back(index, row.image);
      r.tokens.push_back(row.token);
      r.positions.push_back(row.position);
      r.rope_positions.insert(r.rope_positions.end(), row.rope, row.rope + 3);
      r.chunk_of.push_back(int(c));
    }
  }
  return r;
}

}  // namespace fs
