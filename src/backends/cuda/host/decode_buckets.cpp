#include "backends/cuda/host/decode_buckets.h"

#include <string>

#include "core/error.h"

namespace fs::cuda {

int decode_bucket(int rows) {
  for (int b : kDecodeBuckets)
    if (rows >= 1 && rows <= b) return b;
  return 0;
}

int decode_bucket_index(int bucket) {
  for (size_t i = 0; i < std::size(kDecodeBuckets); ++i)
    if (kDecodeBuckets[i] == bucket) return int(i);
  return -1;
}

void pad_decode_rows(PassRows& p, int bucket, int32_t dummy_page, int page_tokens) {
  if (p.rows > bucket) throw Error("a decode round of " + std::to_string(p.rows) + " rows does not fit bucket " +
                                   std::to_string(bucket));
  if (int(p.logits.size()) != p.rows) throw Error("a padded decode round needs one logit row per row");
  if (dummy_page < 0 || page_tokens < 1) throw Error("padding needs a reserved KV page");
  const int32_t table = int32_t(p.pages.size());
  p.pages.push_back(dummy_page);
  for (int r = p.rows; r < bucket; ++r) {
    p.tokens.push_back(0);
    p.slot.push_back(dummy_page * page_tokens);
    p.keys.push_back(1);
    p.table.push_back(table);
    p.logits.push_back(r);
    for (int s = 0; s < 3; ++s) p.rope_positions.push_back(0);
  }
  p.tree.resize(size_t(bucket), 0);  // decode rounds hold no tree rows
  p.parent.resize(size_t(bucket), -1);
  p.rows = bucket;
}

MetaLayout meta_layout(int rows, int logit_rows, int half_dim, int sample_words) {
  const size_t T = size_t(rows), R = size_t(logit_rows);
  MetaLayout m;
  m.tokens = 0;
  m.slot = m.tokens + T;
  m.keys = m.slot + T;
  m.table = m.keys + T;
  m.tree = m.table + T;
  m.parent = m.tree + T;
  m.logits = m.parent + T;
  m.sample = m.logits + R;
  m.cos = m.sample + R * size_t(sample_words);
  m.sin = m.cos + T * size_t(half_dim);
  m.pages = m.sin + T * size_t(half_dim);
  return m;
}

}  // namespace fs::cuda
