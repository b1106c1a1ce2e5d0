#pragma once
// How prompts are cut into chunks (next_chunk_length, aligned_chunk_length).

namespace fs {

// At most `length` positions a chunk, aligned to `align` (Model::prompt_alignment; 1: anywhere).
struct ChunkRule {
  int length;
  int align = 1;
};

}  // namespace fs
