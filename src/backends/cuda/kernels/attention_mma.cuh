#pragma once
// Tensor-core causal GQA attention over the paged KV cache (included by attention.cu only).
//
// A CTA owns TILES tiles of up to 16 (row, head) pairs that share a kv head: consecutive rows × the heads of a group
// (or 16 heads of a larger group). Rows of the CTA that share a page table form one segment; a segment streams its
// keys in blocks of 64 aligned to absolute position 0, in order, through a cp.async pipeline into shared memory that
// all its tiles read. Each tile has four warps; warp w owns keys 16w…16w+15 of every block and keeps its own online
// softmax: S = Q·Kᵀ and O += P·V with mma.sync m16n8k16 (Q and P rounded to bf16, f32 accumulation, exp2 with the
// scale folded in). A row's keys at or past its key count are masked to -inf, so a block holding none of its keys
// changes nothing (correction 1, P = 0, and K/V past the segment's keys are zero-filled).
//
// Keys are cut into chunks of kSplitKeys at absolute positions. Each chunk starts from an empty state; at its end
// the four warp states are merged in the order w = 0…3 into the chunk's state (max, sum, unnormalised output), and
// a row's chunk states are combined in chunk order (`combine`). A row with one chunk is that chunk's output. The
// chunks of a row run one after another in its CTA (the running total kept in the row's q, read only at the start),
// or, in calls of up to 64 rows given split scratch, on `workers` CTAs that write chunk records; the last to finish
// combines them. Either way a row's bits depend only on its q, its keys and its key count, never on the rows sharing
// the tile or the call. With one row per CTA, the first chunk's key slots and those of its first blocks that earlier
// passes wrote are requested before the wait for the kernels that write q and this pass's keys; calls with few such
// CTAs give each a deeper pipeline (Layout's DEEP), which changes when blocks arrive, not what is computed.
#include "backends/cuda/kernels/common.cuh"
#include "backends/cuda/kernels/launch.cuh"
#include "backends/cuda/kernels/mma_ptx.cuh"
#include "backends/cuda/kernels/online_softmax.cuh"
#include "backends/cuda/kernels/paged_keys.cuh"
#include "backends/cuda/kernels/ops.h"

#include <algorithm>

namespace fs::cuda::kernels::attention_mma {

constexpr int kBlockKeys = 64;  // keys per block, blocks start at absolute positions 0, 64, 128, …
constexpr int kWarps = 4;       // warp w of a tile owns keys 16w…16w+15 of each block
constexpr int kTile = 16;       // (row, head) pairs per tile: the mma M dimension
constexpr int kChunkBlocks = kSplitKeys / kBlockKeys;
static_assert(kSplitKeys % kBlockKeys == 0, "chunks hold whole key blocks");

// DEEP: as many key blocks in flight as fit a multiprocessor's shared memory (up to 8 stages), for decode calls
// whose CTAs leave most multiprocessors free; else three stages (two where three do not fit).
template <int HD, int TILES, bool DEEP = false>
struct Layout {
  static constexpr int kThreads = 32 * kWarps * TILES;
  static constexpr int kSlots = kTile * TILES;  // (row, head) pairs per CTA
  static constexpr int kStride = HD + 8;  // padded shared row (bf16 elements): conflict-free ldmatrix
  static constexpr int kQElems = kSlots * kStride;
  static constexpr int kStageElems = 2 * kBlockKeys * kStride;  // K block, then V block
  static constexpr int kAccStride = HD + 8;                      // f32 row of one warp's partial output
  static constexpr int kWarpFloats = kTile * kAccStride + 2 * kTile;  // partial output, then m and l
  static constexpr size_t kMergeBytes = size_t(kWarps) * TILES * kWarpFloats * 4;
  static constexpr size_t kRunBytes = size_t(2 * 2 * kSlots) * 4;  // running max and sum per slot, two buffers
  static constexpr size_t kKeySlotBytes = size_t(kChunkBlocks) * kBlockKeys * 4;  // the chunk's key slots
  static constexpr size_t smem_bytes(int stages) {
    const size_t kv = size_t(stages) * kStageElems * 2;
    return kQElems * 2 + (kv > kMergeBytes ? kv : kMergeBytes) + kRunBytes + kKeySlotBytes;
  }
  // CTAs a multiprocessor holds: two for prompt tiles in pairs at head_dim ≤ 128 (each with half the registers and
  // shared memory), so one CTA's start and merge overlap the other's key blocks; else one.
  static constexpr int kCtas = TILES == 2 && HD <= 128 && !DEEP ? 2 : 1;
  // Stages that fit a CTA's share of shared memory (227 KB, less 1 KB a CTA for the static variables).
  static constexpr bool fits(int stages) { return smem_bytes(stages) <= (227 / kCtas - 1) * 1024; }
  static constexpr int deepest() {
    int stages = 2;
    while (stages < 8 && fits(stages + 1)) ++stages;
    return stages;
  }
  static constexpr int kStages = DEEP ? deepest() : fits(3) ? 3 : 2;
  static constexpr size_t kSmemBytes = smem_bytes(kStages);
};

struct Params {
  float* q;           // also the running output of rows whose chunks run in one CTA

  const float* gate;  // null, or f32 [rows, heads·HD]: the output multiplied by sigmoid(gate) before rounding
  uint16_t* out;
  PagedKv kv;
  int row0, rows;                // the launch's rows: row0 … rows − 1 of the call
  int heads, kv_heads, group;    // group: query heads per kv head
  int tile_heads, head_tiles;    // heads per tile (≤ 16) and tiles per group
  int tile_rows;                 // rows per CTA (tile_rows · tile_heads ≤ 16 · TILES)
  float scale_log2;              // softmax scale · log2(e)
  int workers;                   // CTAs sharing a row's chunks (gridDim.z); 1 without split scratch
  AttentionSplit split;
};

// Chunks of a row with `keys` keys.
__device__ __forceinline__ int chunk_count(int keys) { return (keys + kSplitKeys - 1) / kSplitKeys; }

// A row's chunk states folded in chunk order: (M, L, O) += chunk (m, l, o), each side scaled to the larger max.
__device__ __forceinline__ void combine(float& M, float& L, float& o0, float& o1, float m, float l, float c0,
                                        float c1) {
  const float mx = fmaxf(M, m);
  const float a = M == -INFINITY ? 0.0f : exp2f(M - mx), b = m == -INFINITY ? 0.0f : exp2f(m - mx);
  L = fmaf(L, a, l * b);
  o0 = fmaf(o0, a, c0 * b);
  o1 = fmaf(o1, a, c1 * b);
  M = mx;
}

// Writes output elements d, d + 1 of (row, head): o / l, times sigmoid(gate) when gated, as bf16.
__device__ __forceinline__ void finish(const Params& p, size_t at, float o0, float o1, float l) {
  const float inv = l > 0.0f ? 1.0f / l : 0.0f;
  float a = o0 * inv, c = o1 * inv;
  if (p.gate) {
    const float2 gate = *reinterpret_cast<const float2*>(p.gate + at);
    a *= sigmoid(gate.x);
    c *= sigmoid(gate.y);
  }
  *reinterpret_cast<uint32_t*>(p.out + at) = ptx::pack_bf16(a, c);
}

using ptx::copy16;
using ptx::copy_commit;
using ptx::copy_wait;
using ptx::ldmatrix_x4;
using ptx::ldmatrix_x4_trans;
using ptx::mma;
using ptx::pack_bf16;

// The tile's q as mma A fragments, one per 16 dims: held in registers, or (HELD false: kernels whose registers are
// capped so two CTAs fit a multiprocessor) read again from the tile's q in shared memory at each use.
template <int HD, bool HELD>
struct QFragments {
  const uint16_t* lane_row;  // this lane's ldmatrix address in the tile's bf16 q rows
  uint32_t held[HELD ? HD / 16 : 1][4];
  __device__ __forceinline__ void load(const uint16_t* row) {
    lane_row = row;
    if constexpr (HELD)
#pragma unroll
      for (int kk = 0; kk < HD / 16; ++kk) ldmatrix_x4(held[kk], lane_row + kk * 16);
  }
  __device__ __forceinline__ void get(int kk, uint32_t (&f)[4]) const {
    if constexpr (HELD) {
#pragma unroll
      for (int e = 0; e < 4; ++e) f[e] = held[kk][e];
    } else {
      ldmatrix_x4(f, lane_row + kk * 16);
    }
  }
};

// Finds the slots of keys [64·b0, 64·b1) (-1 past `keys`) into `slots`, all at once: one wait on the page table per
// chunk, not one per block.
__device__ __forceinline__ void find_key_slots(int32_t* slots, const Params& p, int row, const int32_t* table,
                                               int keys, int b0, int b1, int threads) {
  for (int i = threadIdx.x; i < (b1 - b0) * kBlockKeys; i += threads) {
    const int j = b0 * kBlockKeys + i;
    slots[i] = j < keys ? int32_t(key_slot(p.kv, row, table, j)) : -1;
  }
}

// Queues the copies of a key block whose key slots are in `slots` into one stage; keys without a slot are
// zero-filled and their pages never read. When the CTA's threads tile a key row evenly, each thread keeps one
// 16-byte column of the row and walks the keys with fixed strides.
template <int HD, int TILES>
__device__ __forceinline__ void load_block(uint16_t* stage, const Params& p, const int32_t* slots, int kvh) {
  using L = Layout<HD, TILES>;
  constexpr int kChunks = HD / 8;  // 16-byte chunks per key row
  const int width = p.kv_heads * HD;
  uint16_t* ks = stage;
  uint16_t* vs = stage + kBlockKeys * L::kStride;
  constexpr int kKeysPerPass = L::kThreads / kChunks;
  if constexpr (L::kThreads % kChunks == 0 && kBlockKeys % kKeysPerPass == 0) {
    const int part = threadIdx.x % kChunks, key0 = threadIdx.x / kChunks;
    const uint16_t* k_col = p.kv.keys + kvh * HD + part * 8;
    const uint16_t* v_col = p.kv.values + kvh * HD + part * 8;
    const int dst = key0 * L::kStride + part * 8;
#pragma unroll
    for (int i = 0; i < kBlockKeys / kKeysPerPass; ++i) {
      const int32_t slot = slots[key0 + i * kKeysPerPass];
      const long long at = slot >= 0 ? (long long)slot * width : 0;
      copy16(ks + dst + i * kKeysPerPass * L::kStride, k_col + at, slot >= 0);
      copy16(vs + dst + i * kKeysPerPass * L::kStride, v_col + at, slot >= 0);
    }
  } else {
#pragma unroll 4
    for (int c = threadIdx.x; c < kBlockKeys * kChunks; c += L::kThreads) {
      const int key = c / kChunks, part = c % kChunks;
      const int32_t slot = slots[key];
      const bool valid = slot >= 0;
      const size_t at = valid ? size_t(slot) * width + size_t(kvh) * HD + size_t(part) * 8 : 0;
      copy16(ks + key * L::kStride + part * 8, p.kv.keys + at, valid);
      copy16(vs + key * L::kStride + part * 8, p.kv.values + at, valid);
    }
  }
}

// The first stages of a chunk, blocks [b0, b1): its key slots, then the copies of its first blocks (a commit group
// each, as run_chunk issues them) as long as every key of the block is below `settled`; returns how many.
template <int HD, int TILES, bool DEEP>
__device__ __forceinline__ int start_chunk(const Params& p, uint16_t* kv_smem, int32_t* key_slots, int seg,
                                           const int32_t* table, int keys, int kvh, int b0, int b1, int settled) {
  using L = Layout<HD, TILES, DEEP>;
  find_key_slots(key_slots, p, seg, table, keys, b0, b1, L::kThreads);
  __syncthreads();
  int issued = 0;
  for (; issued < L::kStages - 1 && b0 + issued < b1 && (b0 + issued + 1) * kBlockKeys <= settled; ++issued) {
    load_block<HD, TILES>(kv_smem + issued * L::kStageElems, p, key_slots + issued * kBlockKeys, kvh);
    copy_commit();
  }
  return issued;
}

// Queues the chunk's first blocks from `issued` on, a commit group each (empty past b1), until kStages − 1 are on
// their way; returns that count.
template <int HD, int TILES, bool DEEP>
__device__ __forceinline__ int queue_first_blocks(const Params& p, uint16_t* kv_smem, const int32_t* key_slots,
                                                  int kvh, int b0, int b1, int issued) {
  using L = Layout<HD, TILES, DEEP>;
  for (int s = issued; s < L::kStages - 1; ++s) {
    if (b0 + s < b1) load_block<HD, TILES>(kv_smem + s * L::kStageElems, p, key_slots + s * kBlockKeys, kvh);
    copy_commit();
  }
  return L::kStages - 1;
}

// A CTA's q fragments: shared memory where two CTAs share a multiprocessor's registers, else registers.
template <int HD, int TILES, bool DEEP>
using QTile = QFragments<HD, Layout<HD, TILES, DEEP>::kCtas == 1>;

// One chunk of a segment: blocks [b0, b1) through the pipeline into the warps' online softmax (state from empty),
// then each warp's state into `merge` (shared memory over the pipeline's stages). `started`: start_chunk ran, and
// its first `issued` blocks are on their way.
template <int HD, int TILES, bool DEEP>
__device__ __forceinline__ void run_chunk(const Params& p, uint16_t* kv_smem, float* merge, int32_t* key_slots,
                                          const QTile<HD, TILES, DEEP>& qf, const int (&row_keys)[2], int seg,
                                          const int32_t* table, int keys, int kvh, int b0, int b1, bool started,
                                          int issued) {
  using L = Layout<HD, TILES, DEEP>;
  const int tid = threadIdx.x, tile = tid / (32 * kWarps), warp = (tid / 32) % kWarps, lane = tid % 32;
  const int g = lane / 4, t = lane % 4;
  auto slots_of = [&](int b) { return key_slots + (b - b0) * kBlockKeys; };
  if (!started) issued = start_chunk<HD, TILES, DEEP>(p, kv_smem, key_slots, seg, table, keys, kvh, b0, b1, 0);
  queue_first_blocks<HD, TILES, DEEP>(p, kv_smem, key_slots, kvh, b0, b1, issued);
  float o[HD / 8][4];
#pragma unroll
  for (int n = 0; n < HD / 8; ++n)
#pragma unroll
    for (int e = 0; e < 4; ++e) o[n][e] = 0.0f;
  float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};

  for (int b = b0; b < b1; ++b) {
    copy_wait<L::kStages - 2>();
    __syncthreads();
    const int next = b + L::kStages - 1;
    if (next < b1)
      load_block<HD, TILES>(kv_smem + ((next - b0) % L::kStages) * L::kStageElems, p, slots_of(next), kvh);
    copy_commit();
    const uint16_t* ks = kv_smem + ((b - b0) % L::kStages) * L::kStageElems + warp * 16 * L::kStride;
    const uint16_t* vs = ks + kBlockKeys * L::kStride;

    // S = Q·Kᵀ over this warp's 16 keys: two n8 tiles.
    float s[2][4] = {{0.0f, 0.0f, 0.0f, 0.0f}, {0.0f, 0.0f, 0.0f, 0.0f}};
#pragma unroll
    for (int kk = 0; kk < HD / 16; ++kk) {
      uint32_t kf[4], qa[4];
      ldmatrix_x4(kf, ks + ((lane / 16) * 8 + lane % 8) * L::kStride + kk * 16 + (lane / 8) % 2 * 8);
      qf.get(kk, qa);
      mma(s[0], qa, kf[0], kf[1]);
      mma(s[1], qa, kf[2], kf[3]);
    }

    // Online softmax for this lane's two tile slots (g and g + 8), four keys each.
    const int key0 = b * kBlockKeys + warp * 16 + 2 * t;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      float mx = -INFINITY;
#pragma unroll
      for (int n = 0; n < 2; ++n)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const float v = key0 + n * 8 + e < row_keys[h] ? s[n][2 * h + e] * p.scale_log2 : -INFINITY;
          s[n][2 * h + e] = v;
          mx = fmaxf(mx, v);
        }
      const float base = online_softmax_rescale(m[h], l[h], o, h, mx);
#pragma unroll
      for (int n = 0; n < 2; ++n)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const float pr = __bfloat162float(__float2bfloat16_rn(exp2f(s[n][2 * h + e] - base)));
          s[n][2 * h + e] = pr;
          l[h] += pr;
        }
    }

    // O += P·V: P (16 × 16 keys) is the A fragment straight from the S accumulators.
    const uint32_t pa[4] = {pack_bf16(s[0][0], s[0][1]), pack_bf16(s[0][2], s[0][3]), pack_bf16(s[1][0], s[1][1]),
                            pack_bf16(s[1][2], s[1][3])};
#pragma unroll
    for (int dn = 0; dn < HD / 16; ++dn) {
      uint32_t vf[4];
      ldmatrix_x4_trans(vf, vs + ((lane / 8) % 2 * 8 + lane % 8) * L::kStride + dn * 16 + (lane / 16) * 8);
      mma(o[2 * dn], pa, vf[0], vf[1]);
      mma(o[2 * dn + 1], pa, vf[2], vf[3]);
    }
  }
  copy_wait<0>();
  __syncthreads();

#pragma unroll
  for (int h = 0; h < 2; ++h) {
    l[h] += __shfl_xor_sync(0xffffffffu, l[h], 1);
    l[h] += __shfl_xor_sync(0xffffffffu, l[h], 2);
  }
  float* mine = merge + (tile * kWarps + warp) * L::kWarpFloats;
#pragma unroll
  for (int n = 0; n < HD / 8; ++n)
#pragma unroll
    for (int h = 0; h < 2; ++h)
      *reinterpret_cast<float2*>(mine + (g + 8 * h) * L::kAccStride + n * 8 + 2 * t) =
          make_float2(o[n][2 * h], o[n][2 * h + 1]);
  if (t == 0) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      mine[kTile * L::kAccStride + g + 8 * h] = m[h];
      mine[kTile * L::kAccStride + kTile + g + 8 * h] = l[h];
    }
  }
  __syncthreads();
}

// The chunk's state of CTA slot `slot` at output dims d, d + 1: its tile's warps merged in order 0…3.
template <int HD, int TILES>
__device__ __forceinline__ void chunk_state(const float* merge, int slot, int d, float& mt, float& sum, float& o0,
                                            float& o1) {
  using L = Layout<HD, TILES>;
  const int i = slot % kTile;
  const float* warps = merge + (slot / kTile) * kWarps * L::kWarpFloats;
  mt = -INFINITY;
#pragma unroll
  for (int w = 0; w < kWarps; ++w) mt = fmaxf(mt, warps[w * L::kWarpFloats + kTile * L::kAccStride + i]);
  sum = 0.0f, o0 = 0.0f, o1 = 0.0f;
#pragma unroll
  for (int w = 0; w < kWarps; ++w) {
    const float* st = warps + w * L::kWarpFloats;
    const float mw = st[kTile * L::kAccStride + i];
    const float f = mw == -INFINITY ? 0.0f : exp2f(mw - mt);
    sum += st[kTile * L::kAccStride + kTile + i] * f;
    const float2 a = *reinterpret_cast<const float2*>(st + i * L::kAccStride + d);
    o0 += a.x * f;
    o1 += a.y * f;
  }
}

// The first chunk record of a row in a launch of up to 64 rows (one row per CTA): the chunks of the launch's rows
// before it.
__device__ __forceinline__ int first_record(const Params& p, int row) {
  int at = 0;
  for (int r = p.row0; r < row; ++r) at += chunk_count(p.kv.row_keys[r]);
  return at;
}

// The keys of row `row`'s sequence that earlier passes wrote: those before its first row in this call (none for
// tree rows). With one row per CTA they are read before griddepcontrol.wait; the page tables and row counts come
// from the pass's uploaded metadata, which no kernel writes.
__device__ __forceinline__ int settled_keys(const Params& p, int row, int table_at) {
  if (is_tree_row(p.kv, row)) return 0;
  int first = row;
  for (; first > 0 && p.kv.row_table[first - 1] == table_at; --first)
    if (is_tree_row(p.kv, first - 1)) return 0;
  return p.kv.row_keys[first] - 1;
}

template <int HD, int TILES, bool DEEP>
__global__ void __launch_bounds__(32 * kWarps * TILES, (Layout<HD, TILES, DEEP>::kCtas))
    attention_kernel(Params p) {
  let_next_grid_start();
  using L = Layout<HD, TILES, DEEP>;
  FS_DYNAMIC_SHARED(uint16_t, smem);
  uint16_t* qs = smem;
  uint16_t* kv_smem = smem + L::kQElems;
  float* merge = reinterpret_cast<float*>(kv_smem);
  float* run = reinterpret_cast<float*>(reinterpret_cast<uint8_t*>(kv_smem) + L::kSmemBytes - L::kQElems * 2 -
                                        L::kKeySlotBytes - L::kRunBytes);  // [2 buffers][max, sum][kSlots]
  int32_t* key_slots = reinterpret_cast<int32_t*>(run + 2 * 2 * L::kSlots);
  __shared__ int last_arrival;
  const int tid = threadIdx.x, tile = tid / (32 * kWarps), lane = tid % 32;
  const int g = lane / 4;
  const int kvh = blockIdx.y / p.head_tiles, ht = blockIdx.y % p.head_tiles;
  const int head0 = kvh * p.group + ht * p.tile_heads;
  const int tile_heads = min(p.tile_heads, p.group - ht * p.tile_heads);
  // Prefill CTAs take their row groups last first: causal rows see more keys further on, so the longest start first.
  const int row_group = TILES > 1 ? int(gridDim.x - 1 - blockIdx.x) : int(blockIdx.x);
  const int row_begin = p.row0 + row_group * p.tile_rows, row_end = min(p.rows, row_begin + p.tile_rows);
  const size_t record = size_t(p.heads) * (HD + 2);  // attention_record_floats

  for (int seg = row_begin; seg < row_end;) {
    const int table_at = p.kv.row_table[seg];
    int seg_end = seg + 1, keys = p.kv.row_keys[seg];
    // A tree row reads its own ancestors' keys, so it is a segment of its own.
    if (!is_tree_row(p.kv, seg))
      while (seg_end < row_end && p.kv.row_table[seg_end] == table_at && !is_tree_row(p.kv, seg_end))
        keys = max(keys, p.kv.row_keys[seg_end++]);
    const int32_t* table = p.kv.pages + table_at;
    // CTA slot i (tile i / 16) ↔ row seg + i / tile_heads, head head0 + i % tile_heads; slots past `active` are
    // padding.
    const int active = (seg_end - seg) * tile_heads;
    const int blocks = (keys + kBlockKeys - 1) / kBlockKeys, chunks = chunk_count(keys);
    // Split over the workers when the row has several chunks and its records fit; else worker 0 runs them all.
    const int record0 = TILES == 1 && p.workers > 1 && chunks > 1 ? first_record(p, seg) : -1;
    const bool split = TILES == 1 && record0 >= 0 && record0 + chunks <= p.split.record_capacity;
    if (blockIdx.z > 0 && (!split || int(blockIdx.z) >= chunks)) break;
    const auto slot_at = [&](int slot) {
      return (size_t(seg + slot / tile_heads) * p.heads + head0 + slot % tile_heads) * HD;
    };
    // Where chunk c's record keeps the head of CTA slot `slot` (split calls: one row per CTA).
    const auto record_at = [&](int c, int slot) {
      return p.split.records + size_t(record0 + c) * record + size_t(head0 + slot % tile_heads) * (HD + 2);
    };

    // The first chunk's key slots are found before the wait for the kernels that write q and this pass's keys. With
    // one row per CTA its blocks that earlier passes wrote are on their way then too; with tiles its first blocks
    // are on their way before q is read.
    const int first_chunk = split ? int(blockIdx.z) : 0;
    const int b0 = first_chunk * kChunkBlocks, b1 = min(blocks, (first_chunk + 1) * kChunkBlocks);
    int issued = start_chunk<HD, TILES, DEEP>(p, kv_smem, key_slots, seg, table, keys, kvh, b0, b1,
                                              TILES == 1 ? settled_keys(p, seg, table_at) : 0);
    wait_for_previous_grid();
    if constexpr (TILES > 1) issued = queue_first_blocks<HD, TILES, DEEP>(p, kv_smem, key_slots, kvh, b0, b1, issued);

    // Q tile → bf16 in shared memory (padding slots zero), then into registers.
    for (int e = tid; e < L::kSlots * HD / 4; e += L::kThreads) {
      const int i = e / (HD / 4), d = (e % (HD / 4)) * 4;
      float4 v = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
      if (i < active) v = *reinterpret_cast<const float4*>(p.q + slot_at(i) + d);
      uint2 packed = make_uint2(pack_bf16(v.x, v.y), pack_bf16(v.z, v.w));
      *reinterpret_cast<uint2*>(qs + i * L::kStride + d) = packed;
    }
    int row_keys[2];
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int i = tile * kTile + g + 8 * h;
      row_keys[h] = i < active ? p.kv.row_keys[seg + i / tile_heads] : 0;
    }
    __syncthreads();
    QTile<HD, TILES, DEEP> qf;
    qf.load(qs + (tile * kTile + (lane / 8) % 2 * 8 + lane % 8) * L::kStride + (lane / 16) * 8);
    __syncthreads();  // every slot's q is in registers or stays in shared memory: a running total may overwrite it

    for (int c = first_chunk; c < chunks; c += split ? p.workers : 1) {
      run_chunk<HD, TILES, DEEP>(p, kv_smem, merge, key_slots, qf, row_keys, seg, table, keys, kvh,
                                 c * kChunkBlocks, min(blocks, (c + 1) * kChunkBlocks), c == first_chunk, issued);
      const float* run_in = run + (c % 2) * 2 * L::kSlots;
      float* run_out = run + ((c + 1) % 2) * 2 * L::kSlots;
      for (int e = tid; e < active * (HD / 2); e += L::kThreads) {
        const int slot = e / (HD / 2), d = (e % (HD / 2)) * 2;
        float mt, sum, o0, o1;
        chunk_state<HD, TILES>(merge, slot, d, mt, sum, o0, o1);
        const size_t at = slot_at(slot) + d;
        if (chunks == 1) {
          finish(p, at, o0, o1, sum);
        } else if (split) {
          float* rec = record_at(c, slot);
          *reinterpret_cast<float2*>(rec + d) = make_float2(o0, o1);
          if (d == 0) *reinterpret_cast<float2*>(rec + HD) = make_float2(mt, sum);
        } else {
          // The running total: output in the row's q, max and sum in shared memory.
          float M = mt, Lsum = sum, r0 = o0, r1 = o1;
          if (c > 0) {
            const float2 prev = *reinterpret_cast<const float2*>(p.q + at);
            M = run_in[slot], Lsum = run_in[L::kSlots + slot], r0 = prev.x, r1 = prev.y;
            combine(M, Lsum, r0, r1, mt, sum, o0, o1);
          }
          if (c == chunks - 1) {
            finish(p, at, r0, r1, Lsum);
          } else {
            *reinterpret_cast<float2*>(p.q + at) = make_float2(r0, r1);
            if (d == 0) run_out[slot] = M, run_out[L::kSlots + slot] = Lsum;
          }
        }
      }
      __syncthreads();
    }

    if (split) {
      // The last worker to finish combines the row's records in chunk order.
      __threadfence();
      __syncthreads();
      int32_t* arrivals = p.split.counters + size_t(seg - p.row0) * gridDim.y + blockIdx.y;
      if (tid == 0) last_arrival = atomicAdd(arrivals, 1) == min(p.workers, chunks) - 1;
      __syncthreads();
      if (last_arrival) {
        __threadfence();
        for (int e = tid; e < active * (HD / 2); e += L::kThreads) {
          const int slot = e / (HD / 2), d = (e % (HD / 2)) * 2;
          float M = 0.0f, Lsum = 0.0f, r0 = 0.0f, r1 = 0.0f;
          for (int c = 0; c < chunks; ++c) {
            const float* rec = record_at(c, slot);
            const float2 o = __ldcg(reinterpret_cast<const float2*>(rec + d));
            const float2 ml = __ldcg(reinterpret_cast<const float2*>(rec + HD));
            if (c == 0) M = ml.x, Lsum = ml.y, r0 = o.x, r1 = o.y;
            else combine(M, Lsum, r0, r1, ml.x, ml.y, o.x, o.y);
          }
          finish(p, slot_at(slot) + d, r0, r1, Lsum);
        }
        if (tid == 0) *arrivals = 0;
      }
    }
    seg = seg_end;
  }
}

// Launches the kernel for head_dim HD with TILES tiles per CTA; the grid depends on rows and the head shape only.
template <int HD, int TILES, bool DEEP = false>
void launch_tiles(Params p, cudaStream_t stream) {
  using L = Layout<HD, TILES, DEEP>;
  auto kernel = attention_kernel<HD, TILES, DEEP>;
  allow_shared_memory_once(kernel, unsigned(L::kSmemBytes), "attention");
  p.tile_rows = TILES > 1 ? L::kSlots / p.tile_heads : 1;
  dim3 grid((p.rows - p.row0 + p.tile_rows - 1) / p.tile_rows, p.kv_heads * p.head_tiles, p.workers);
  launch_overlapping_kernel("attention", kernel, grid, dim3(L::kThreads), unsigned(L::kSmemBytes), stream, p);
}

// Rows row0 … end − 1 (at most 64), one per CTA. When those CTAs fill at most half the multiprocessors, each worker
// takes a multiprocessor's shared memory for a deeper pipeline (more key blocks in flight per row) and, with split
// scratch, the workers per row cover the multiprocessors once; else three stages, and workers to cover them about
// twice. A row's bits are the same either way.
template <int HD>
void launch_row_ctas(Params p, int row0, int end, cudaStream_t stream) {
  p.row0 = row0;
  p.rows = end;
  const int ctas = (end - row0) * p.kv_heads * p.head_tiles, multiprocessors = multiprocessor_count("attention");
  constexpr bool kDeeper = Layout<HD, 1, true>::kStages > Layout<HD, 1>::kStages;
  const bool deep = kDeeper && 2 * ctas <= multiprocessors;
  if (p.split.records) p.workers = std::clamp((deep ? 1 : 2) * multiprocessors / ctas, 1, kMaxSplitWorkers);
  if constexpr (kDeeper)
    if (deep) return launch_tiles<HD, 1, true>(p, stream);
  launch_tiles<HD, 1>(p, stream);
}

template <int HD>
void launch(float* q, int rows, int lone_rows, HeadShape shape, const PagedKv& kv, float scale, const float* gate,
            const AttentionSplit& split, uint16_t* out, cudaStream_t stream) {
  Params p{};
  p.q = q;
  p.gate = gate;
  p.out = out;
  p.kv = kv;
  p.heads = shape.heads;
  p.kv_heads = shape.kv_heads;
  p.group = shape.heads / shape.kv_heads;
  p.tile_heads = p.group < kTile ? p.group : kTile;
  p.head_tiles = (p.group + p.tile_heads - 1) / p.tile_heads;
  p.scale_log2 = scale * 1.4426950408889634f;
  p.split = split;
  p.workers = 1;
  if (rows <= 64) return launch_row_ctas<HD>(p, 0, rows, stream);
  // Many rows (prefill): the lone rows first, 64 at most a launch, one per CTA (a 16-row tile would run them one
  // after another); then two tiles a CTA of consecutive rows sharing each key block.
  const int lone = std::clamp(lone_rows, 0, rows);
  for (int r = 0; r < lone; r += 64) launch_row_ctas<HD>(p, r, std::min(lone, r + 64), stream);
  if (lone == rows) return;
  p.row0 = lone;
  p.rows = rows;
  launch_tiles<HD, 2>(p, stream);
}

}  // namespace fs::cuda::kernels::attention_mma
