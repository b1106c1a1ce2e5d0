// Device sampling. Every logit gets a 52-bit rank key (order-preserving float bits, then the inverted id), so the
// keys order tokens exactly as the host sampler does (logit descending, ties by lowest id). Top-k, top-p and the
// draw each find a threshold key by descending its 4-bit digits from the top: per digit, each thread sums weights
// into its own column of 16 bins in index order, the bins are reduced in a fixed tree, and the largest digit whose
// suffix sum satisfies the bound is kept. All sums run in a fixed order inside one block per row; the row's best key
// (all greedy needs) is found by a cluster of blocks, each taking every kCluster-th run of the row, and the max of
// their maxima is the same key whichever finds it. Logprobs: the log-sum-exp summed as the draw's sums are, and the
// top keys ranked among the few logits near the largest (descend's threshold when the row is flat at the top).
#include "backends/cuda/kernels/common.cuh"
#include "backends/cuda/kernels/hopper_ptx.cuh"
#include "backends/cuda/kernels/launch.cuh"
#include "backends/cuda/kernels/sample_ops.h"

namespace fs::cuda::kernels {

namespace {

constexpr int kThreads = 512;
constexpr int kCluster = 8;  // blocks of a row: they share the pass over its logits that finds the best key
constexpr int kWarps = kThreads / 32;
constexpr int kIdBits = 20;
constexpr uint64_t kIdMask = (uint64_t{1} << kIdBits) - 1;
constexpr int kKeyBits = 32 + kIdBits;
constexpr int kAbove = 16;  // bin of weights whose key is above the prefix under test

__device__ __forceinline__ uint64_t rank_key(float x, int id) {
  if (x == 0.0f) x = 0.0f;  // -0 and +0 tie, as on the host
  const uint32_t u = __float_as_uint(x);
  const uint32_t ordered = (u & 0x80000000u) ? ~u : (u | 0x80000000u);
  return (uint64_t(ordered) << kIdBits) | (kIdMask - uint64_t(id));
}

__device__ __forceinline__ int id_of(uint64_t key) { return int(kIdMask - (key & kIdMask)); }

constexpr int kTopBuckets = 11;          // a top-logprob candidate lies within 2^j / 64 of the largest, j < this
constexpr int kMaxTopCandidates = 1024;  // more candidates than this: the top ones are found by descend

struct Shared {
  union {
    float bins[kAbove + 1][kThreads];                  // descend's
    unsigned long long candidates[kMaxTopCandidates];  // the keys of the top-logprob candidates
  };
  float totals[kAbove + 1];
  float partial[kWarps];
  unsigned long long keys[kWarps];
  unsigned long long top[kMaxTopLogprobs];  // the best keys, in the order threads found them
  int top_found;
};

// Sum over the block in a fixed order; every thread gets the result.
__device__ float block_sum(float v, Shared& sh) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  v = warp_sum(v);
  if (lane == 0) sh.partial[warp] = v;
  __syncthreads();
  float t = lane < kWarps ? sh.partial[lane] : 0.0f;
  t = warp_sum(t);
  __syncthreads();
  return t;
}

// Max (or min) over the block; every thread gets the result.
template <bool kMax>
__device__ uint64_t block_extreme(uint64_t v, Shared& sh) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  for (int o = 16; o > 0; o >>= 1) {
    const uint64_t other = __shfl_xor_sync(0xffffffffu, (unsigned long long)v, o);
    v = kMax ? (other > v ? other : v) : (other < v ? other : v);
  }
  if (lane == 0) sh.keys[warp] = v;
  __syncthreads();
  uint64_t r = sh.keys[0];
  for (int w = 1; w < kWarps; ++w) r = kMax ? (sh.keys[w] > r ? sh.keys[w] : r) : (sh.keys[w] < r ? sh.keys[w] : r);
  __syncthreads();
  return r;
}

// The largest key C with f(C) = Σ weight(i) over keys ≥ C satisfying f > target (strict) or f ≥ target; 0 when
// no key does. weight(i, key) is 0 for tokens outside the set.
template <typename Weight>
__device__ uint64_t descend(const float* row, int n, Weight weight, float target, bool strict, Shared& sh) {
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  uint64_t prefix = 0;
  for (int shift = kKeyBits - 4; shift >= 0; shift -= 4) {
    for (int b = 0; b <= kAbove; ++b) sh.bins[b][tid] = 0.0f;
    const uint64_t high = prefix >> (shift + 4);
#pragma unroll 4
    for (int i = tid; i < n; i += kThreads) {
      const uint64_t key = rank_key(row[i], i);
      const uint64_t kh = key >> (shift + 4);
      if (kh < high) continue;
      const float w = weight(i, key);
      if (kh > high) sh.bins[kAbove][tid] += w;
      else sh.bins[(key >> shift) & 15][tid] += w;
    }
    __syncthreads();
    for (int b = warp; b <= kAbove; b += kWarps) {
      float s = 0.0f;
      for (int j = lane; j < kThreads; j += 32) s += sh.bins[b][j];
      s = warp_sum(s);
      if (lane == 0) sh.totals[b] = s;
    }
    __syncthreads();
    float f = sh.totals[kAbove];
    int pick = -1;
    for (int d = 15; d >= 0; --d) {
      f += sh.totals[d];
      if (strict ? f > target : f >= target) {
        pick = d;
        break;
      }
    }
    // The shared totals give every thread the same pick. None: the bound lies past this order's sum.
    if (pick < 0) return 0;
    prefix |= uint64_t(pick) << shift;
    __syncthreads();
  }
  return prefix;
}

// A temperature draw from a row whose largest key is `best`: top-k, min-p and top-p cut the set, then the key where
// the running mass passes uniform × the set's mass. Returns the chosen key.
__device__ uint64_t draw(const float* row, int vocab, const SampleRow& p, uint64_t best, Shared& sh) {
  const int tid = threadIdx.x;
  const float mx = row[id_of(best)], inv_t = 1.0f / p.temperature;
  auto prob = [&](int i) { return expf((row[i] - mx) * inv_t); };
  // Top-k: the k-th largest key.
  uint64_t kth = 0;
  if (p.top_k > 0 && p.top_k < vocab)
    kth = descend(row, vocab, [](int, uint64_t) { return 1.0f; }, float(p.top_k), false, sh);
  float total = 0.0f;
#pragma unroll 8
  for (int i = tid; i < vocab; i += kThreads)
    if (rank_key(row[i], i) >= kth) total += prob(i);
  total = block_sum(total, sh);
  // Min-p keeps the top token and those at least min_p times as likely (the top token's probability is 1).
  auto kept = [&](int i, uint64_t key) {
    if (key < kth) return 0.0f;
    const float q = prob(i);
    return (p.min_p > 0.0f && key != best && !(q >= p.min_p)) ? 0.0f : q;
  };
  // Top-p: the shortest prefix whose mass reaches top_p of the top-k mass.
  uint64_t nucleus = 0;
  if (p.top_p < 1.0f) {
    const float need = p.top_p * total;
    nucleus = need > 0.0f ? descend(row, vocab, kept, need, false, sh) : best;
  }
  auto chosen = [&](int i, uint64_t key) { return key >= nucleus ? kept(i, key) : 0.0f; };
  float mass = 0.0f;
#pragma unroll 8
  for (int i = tid; i < vocab; i += kThreads) mass += chosen(i, rank_key(row[i], i));
  mass = block_sum(mass, sh);
  const float target = p.uniform * mass;
  // descend sums in other orders than mass: a target within rounding of the mass may find no key (0).
  uint64_t pick = mass > target ? descend(row, vocab, chosen, target, true, sh) : 0;
  if (pick == 0) {
    // Rounding left the draw past the mass: the last token of the set, as on the host.
    uint64_t low = ~uint64_t{0};
#pragma unroll 8
    for (int i = tid; i < vocab; i += kThreads) {
      const uint64_t key = rank_key(row[i], i);
      const bool in = key >= kth && key >= nucleus && (p.min_p <= 0.0f || key == best || prob(i) >= p.min_p);
      if (in && key < low) low = key;
    }
    pick = block_extreme<false>(low, sh);
  }
  return pick;
}

// The least j with `below` ≤ 2^j / 64, kTopBuckets when there is none: how far under the largest logit one lies.
__device__ __forceinline__ int top_bucket(float below) {
  if (!(below <= 16.0f)) return kTopBuckets;
  int j = 0;
  for (float bound = 1.0f / 64.0f; below > bound; bound *= 2.0f) ++j;
  return j;
}

// Puts the `count` largest keys of the row into sh.top, largest first. One pass counts the logits in each bucket
// under the largest; the keys of the least buckets holding `count` are gathered and each ranked among the others.
// When those are more than kMaxTopCandidates (rows nearly flat at the top), descend finds the count-th key instead.
__device__ void find_top_keys(const float* row, int vocab, float mx, uint64_t best, int count, Shared& sh) {
  const int tid = threadIdx.x;
  int counts[kTopBuckets] = {};
  for (int i = tid; i < vocab; i += kThreads) {
    const int b = top_bucket(mx - row[i]);
#pragma unroll
    for (int j = 0; j < kTopBuckets; ++j) counts[j] += b == j ? 1 : 0;
  }
  int deepest = -1, found = 0;
#pragma unroll
  for (int j = 0; j < kTopBuckets; ++j) {
    const int within = found + int(block_sum(float(counts[j]), sh));
    if (deepest < 0) found = within;
    if (deepest < 0 && within >= count) deepest = j;
  }
  if (tid == 0) sh.top_found = 0;
  __syncthreads();
  if (deepest >= 0 && found <= kMaxTopCandidates) {
    for (int i = tid; i < vocab; i += kThreads)
      if (top_bucket(mx - row[i]) <= deepest) sh.candidates[atomicAdd(&sh.top_found, 1)] = rank_key(row[i], i);
    __syncthreads();
    for (int c = tid; c < found; c += kThreads) {
      int above = 0;
      for (int k = 0; k < found; ++k) above += sh.candidates[k] > sh.candidates[c] ? 1 : 0;
      if (above < count) sh.top[above] = sh.candidates[c];
    }
    __syncthreads();
    return;
  }
  const uint64_t last = count == 1 ? best : descend(row, vocab, [](int, uint64_t) { return 1.0f; }, float(count),
                                                     false, sh);
  for (int i = tid; i < vocab; i += kThreads) {
    const uint64_t key = rank_key(row[i], i);
    if (key >= last) {
      const int slot = atomicAdd(&sh.top_found, 1);
      if (slot < kMaxTopLogprobs) sh.top[slot] = key;
    }
  }
  __syncthreads();
  if (tid != 0) return;
  for (int a = 1; a < count; ++a)
    for (int b = a; b > 0 && sh.top[b] > sh.top[b - 1]; --b) {
      const unsigned long long t = sh.top[b];
      sh.top[b] = sh.top[b - 1];
      sh.top[b - 1] = t;
    }
}

// The record of a row whose largest key is `best` and whose chosen id is `chosen`: the log-sum-exp over the row in
// a fixed order, then the `count` largest keys.
__device__ void write_logprobs(const float* row, int vocab, uint64_t best, int chosen, int count, Shared& sh,
                               LogprobRecord& rec) {
  const int tid = threadIdx.x;
  const float mx = row[id_of(best)];
  float s = 0.0f;
#pragma unroll 8
  for (int i = tid; i < vocab; i += kThreads) s += expf(row[i] - mx);
  const float lse = mx + logf(block_sum(s, sh));
  count = min(min(count, kMaxTopLogprobs), vocab);
  if (count > 0) find_top_keys(row, vocab, mx, best, count, sh);
  __syncthreads();
  if (tid != 0) return;
  rec.chosen = row[chosen] - lse;
  rec.count = count;
  for (int j = 0; j < count; ++j) {
    rec.top_ids[j] = id_of(sh.top[j]);
    rec.top_logprobs[j] = row[id_of(sh.top[j])] - lse;
  }
}

__global__ void __cluster_dims__(kCluster, 1, 1) __launch_bounds__(kThreads)
    sample_kernel(const float* logits, int vocab, const SampleRow* params, int32_t* ids, LogprobRecord* records) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 900
  __trap();  // clusters need sm_90
#else
  wait_for_previous_grid();
  __shared__ Shared sh;
  __shared__ unsigned long long cluster_best[kCluster];  // in block 0: each block's best key
  const int r = blockIdx.x / kCluster, tid = threadIdx.x;
  const uint32_t rank = hopper::cluster_rank();
  const SampleRow p = params[r];
  if (p.mode != 1 && p.mode != 2) {
    if (rank == 0 && tid == 0) ids[r] = -1;
    return;
  }
  const float* row = logits + size_t(r) * size_t(vocab);
  uint64_t best = 0;
#pragma unroll 8
  for (int i = int(rank) * kThreads + tid; i < vocab; i += kThreads * kCluster) {
    const uint64_t key = rank_key(row[i], i);
    best = key > best ? key : best;
  }
  best = block_extreme<true>(best, sh);
  if (tid == 0) hopper::cluster_store(hopper::cluster_address(&cluster_best[rank], 0), (unsigned long long)best);
  hopper::cluster_sync();
  if (rank != 0) return;  // block 0 goes on alone; no block reads another's memory from here
  for (int b = 0; b < kCluster; ++b) best = cluster_best[b] > best ? cluster_best[b] : best;
  const uint64_t pick = p.mode == 1 || !(p.temperature > 0.0f) ? best : draw(row, vocab, p, best, sh);
  if (tid == 0) ids[r] = id_of(pick);
  if (p.logprobs >= 0) write_logprobs(row, vocab, best, id_of(pick), p.logprobs, sh, records[r]);
#endif
}

}  // namespace

void sample_rows(const float* logits, int rows, int vocab, const SampleRow* params, int32_t* ids,
                 LogprobRecord* records, void* stream) {
  if (vocab < 1 || vocab > kMaxSampleVocab)
    throw Error("device sampling supports vocabularies of 1.." + std::to_string(kMaxSampleVocab) + " tokens, not " +
                std::to_string(vocab));
  if (rows <= 0) return;
  launch_overlapping_kernel("sample_rows", sample_kernel, dim3(rows * kCluster), dim3(kThreads), 0, stream, logits,
                            vocab, params, ids, records);
}

}  // namespace fs::cuda::kernels
