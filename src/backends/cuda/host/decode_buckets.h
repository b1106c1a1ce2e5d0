#pragma once
// Bookkeeping of captured decode graphs: rounds of one-token rows padded up to a power-of-two bucket, and the word
// layout of the per-pass metadata block, fixed per row count so a graph replays with new data after one upload.
#include <cstddef>
#include <cstdint>
#include <vector>

namespace fs::cuda {

inline constexpr int kDecodeBuckets[] = {1, 2, 4, 8, 16, 32, 64};
inline constexpr int kMaxDecodeBucket = 64;

// The smallest bucket holding `rows`, or 0 when rows is outside 1..64.
int decode_bucket(int rows);
// Position of `bucket` in kDecodeBuckets, or -1.
int decode_bucket_index(int bucket);

// Per-row data of one pass, in upload order.
struct PassRows {
  int rows = 0;
  std::vector<int32_t> tokens, slot, keys, table, logits, pages;
  // Tree rows (SequenceChunk::row_parents): tree = the chunk's start_pos + 1 (0 for other rows), parent = the parent
  // row in the pass, or -1 when the row follows the committed positions directly.
  std::vector<int32_t> tree, parent;
  std::vector<int> rope_positions;  // 3 per row (t, h, w)
};

// Pads a decode round to `bucket` rows: each padded row reads token 0 at position 0 through the one-entry page table
// [dummy_page] appended to `pages`, so its K/V land in a page no stream owns, and gets a logit row of its own.
// Throws fs::Error if the round has more rows than the bucket or is not one logit row per row.
void pad_decode_rows(PassRows& p, int bucket, int32_t dummy_page, int page_tokens);

// Word offsets in the metadata block for `rows` rows, `logit_rows` logit rows, `half_dim` cos and sin floats per
// row and `sample_words` words of sampling request per logit row. Page tables come last, so an upload stops after
// the entries in use and their capacity never moves anything else.
struct MetaLayout {
  size_t tokens = 0, slot = 0, keys = 0, table = 0, tree = 0, parent = 0, logits = 0, sample = 0, cos = 0, sin = 0,
         pages = 0;
  size_t words(size_t page_entries) const { return pages + page_entries; }
};
MetaLayout meta_layout(int rows, int logit_rows, int half_dim, int sample_words);

}  // namespace fs::cuda
