#include <sys/mman.h>

#include <algorithm>
#include <cstdlib>
#include <new>
#include <vector>

#include "backends/cpu/matmul_kernels.h"
#include "backends/cpu/ops.h"

namespace fs::cpu {

namespace {

constexpr size_t kHugePage = size_t(2) << 20;
constexpr size_t kAlign = 64;

size_t round_up(size_t n, size_t to) { return (n + to - 1) / to * to; }

bool same_weights(const WeightMatrix& a, const WeightMatrix& b) {
  return a.data == b.data && a.rows == b.rows && a.cols == b.cols && a.dtype == b.dtype;
}

}  // namespace

size_t pack_for_matmul(std::span<WeightMatrix* const> matrices) {
  if (!avx512_available()) return 0;
  std::vector<WeightMatrix*> distinct;  // the first matrix of each weights not packed yet
  std::vector<size_t> offsets;
  size_t total = 0;
  for (WeightMatrix* w : matrices) {
    if (w->packed || w->bytes() == 0) continue;
    if (std::any_of(distinct.begin(), distinct.end(), [&](const WeightMatrix* d) { return same_weights(*d, *w); }))
      continue;
    distinct.push_back(w);
    offsets.push_back(total);
    total += round_up(w->bytes(), kAlign);
  }
  if (distinct.empty()) return 0;
  const size_t size = round_up(total, kHugePage);
  void* mem = std::aligned_alloc(kHugePage, size);
  if (!mem) throw std::bad_alloc();
  madvise(mem, size, MADV_HUGEPAGE);  // advice only: fewer TLB misses while a matmul streams the weights
  const std::shared_ptr<uint8_t> block(static_cast<uint8_t*>(mem), std::free);
  for (size_t i = 0; i < distinct.size(); ++i) {
    pack_rows(*distinct[i], block.get() + offsets[i]);
    distinct[i]->packed = std::shared_ptr<const uint8_t>(block, block.get() + offsets[i]);
  }
  for (WeightMatrix* w : matrices)
    for (const WeightMatrix* d : distinct)
      if (!w->packed && same_weights(*d, *w)) w->packed = d->packed;
  return size;
}

}  // namespace fs::cpu
