#pragma once
// Where a row's key j lives in the paged K/V: its page table's slot, or for a tree row past its committed keys the
// slot its ancestor at that depth wrote (PagedKv::row_tree).
#include "backends/cuda/kernels/ops.h"

namespace fs::cuda::kernels {

__device__ __forceinline__ bool is_tree_row(const PagedKv& kv, int r) { return kv.row_tree && kv.row_tree[r] > 0; }

__device__ __forceinline__ size_t key_slot(const PagedKv& kv, int r, const int32_t* table, int j) {
  if (is_tree_row(kv, r) && j >= kv.row_tree[r] - 1) {
    int a = r;  // the row itself holds key row_keys[r] − 1; each step up is one key earlier
    for (int up = kv.row_keys[r] - 1 - j; up > 0; --up) a = kv.row_parent[a];
    return size_t(kv.row_slot[a]);
  }
  return size_t(table[j / kv.page_tokens]) * kv.page_tokens + size_t(j % kv.page_tokens);
}

}  // namespace fs::cuda::kernels
