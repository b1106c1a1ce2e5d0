// The gated delta rule on L2-normalised q and k: a block per (sequence, value head, 32 state columns) runs the
// tokens in order, four lanes per column each holding a quarter of the state rows of one or two columns (Layout),
// token tiles streaming through shared memory.
#include <cstdint>
#include <type_traits>

#include "backends/cuda/kernels/common.cuh"
#include "backends/cuda/kernels/deltanet_dims.cuh"
#include "backends/cuda/kernels/deltanet_ops.h"
#include "backends/cuda/kernels/launch.cuh"
#include "backends/cuda/kernels/mma_ptx.cuh"

namespace fs::cuda::kernels {

namespace {

using namespace deltanet_detail;

constexpr int kLanesPerColumn = 4;
constexpr int kPrefillTile = 32;  // tokens a block stages at once when sequences have many rows

// How a block's threads hold its state columns: each thread COLUMNS of the BLOCK_COLUMNS, kColumnStride apart.
template <int COLUMNS, int BLOCK_COLUMNS>
struct Layout {
  static constexpr int kColumnsPerLane = COLUMNS;
  static constexpr int kColumnsPerBlock = BLOCK_COLUMNS;
  static constexpr int kColumnStride = BLOCK_COLUMNS / COLUMNS;  // from one of a thread's columns to the next
  static constexpr int kThreads = kLanesPerColumn * kColumnStride;
  static_assert(BLOCK_COLUMNS % COLUMNS == 0 && kThreads % 32 == 0, "whole warps of whole columns");
};

// Sum over the four lanes of a column: every lane gets the same bits.
__device__ __forceinline__ float column_sum(float v) {
  v += __shfl_xor_sync(0xffffffffu, v, 1);
  return v + __shfl_xor_sync(0xffffffffu, v, 2);
}

// R state rows per lane: key_dim ≤ 4R. Lane g of a column holds rows gR … gR + R − 1; shared memory keeps each
// lane's rows of q and k contiguous with 4 floats of padding between lanes (zeros past key_dim), so a column's four
// lanes read four 16-byte pieces in different banks with one vector load.
template <int R>
struct RecurrenceRows {
  static constexpr int kStride = R + 4;                         // floats from one lane's rows to the next lane's
  static constexpr int kRowFloats = kLanesPerColumn * kStride;  // one token's q (or k) in shared memory
  __device__ static int at(int i) { return (i / R) * kStride + i % R; }
};

// One stage of the token tiles a block streams through shared memory: q and k rows (normalised), this block's
// columns of v, and the raw b and a the tile's β and decays come from; TILE tokens.
template <int R, int TILE, typename L>
struct RecurrenceTile {
  float q[TILE][RecurrenceRows<R>::kRowFloats];
  float k[TILE][RecurrenceRows<R>::kRowFloats];
  float v[TILE][L::kColumnsPerBlock];
  float b[TILE], a[TILE];
};

// A recurrence block's shared memory: two token-tile stages, and each thread's per-token output terms of the tile
// (summed over a column's lanes once the tile is done).
template <int R, int TILE, typename L>
struct RecurrenceSmem {
  RecurrenceTile<R, TILE, L> tiles[2];
  float partial[TILE][L::kColumnsPerLane][L::kThreads];
};

// W floats global → shared, asynchronously (W = 4 needs both ends 16-byte aligned).
template <int W>
__device__ __forceinline__ void copy_floats(float* smem, const float* gmem, bool valid) {
  if constexpr (W == 4) ptx::copy16(smem, gmem, valid);
  else ptx::copy4(smem, gmem, valid);
}

// Queues the copies of rows first_row … first_row + n − 1 (n ≤ TILE) into `tile`, W floats a copy: each thread
// takes fixed pieces of the q and k rows and walks them down the tile's rows.
template <int R, int W, int TILE, typename L>
__device__ void stage_tile(RecurrenceTile<R, TILE, L>& tile, const float* conv, const float* b, const float* a,
                           int ab_stride, const Dims& d, int first_row, int n, int h, int column0) {
  using Rows = RecurrenceRows<R>;
  constexpr int kPieces = kLanesPerColumn * R / W;  // of one q (or k) row
  const float* heads = conv + size_t(first_row) * d.C + size_t(h / d.group) * d.dk;
  for (int e = threadIdx.x; e < 2 * kPieces; e += L::kThreads) {
    const int i = (e % kPieces) * W;
    const bool valid = i < d.dk;
    const float* src = heads + (e < kPieces ? 0 : d.KC) + (valid ? i : 0);
    float* dst = (e < kPieces ? &tile.q[0][0] : &tile.k[0][0]) + Rows::at(i);
#pragma unroll 8
    for (int t = 0; t < n; ++t) copy_floats<W>(dst + t * Rows::kRowFloats, src + size_t(t) * d.C, valid);
  }
  // The values and the raw b and a: each copy (row, piece) to its own thread in turn, so every thread has about as
  // many and no warp waits at the next barrier for another.
  constexpr int kValuePieces = L::kColumnsPerBlock / W;
  const float* values = conv + size_t(first_row) * d.C + 2 * size_t(d.KC) + size_t(h) * d.dv;
  for (int e = threadIdx.x; e < n * kValuePieces; e += L::kThreads) {
    const int t = e / kValuePieces, j = (e % kValuePieces) * W;
    const bool valid = column0 + j < d.dv;
    copy_floats<W>(&tile.v[t][j], values + size_t(t) * d.C + (valid ? column0 + j : 0), valid);
  }
  for (int e = L::kThreads - 1 - int(threadIdx.x); e < 2 * n; e += L::kThreads) {
    const int t = e / 2;
    const size_t at = size_t(first_row + t) * ab_stride + h;
    if (e % 2 == 0) ptx::copy4(&tile.b[t], b + at, true);
    else ptx::copy4(&tile.a[t], a + at, true);
  }
}

// A block owns kColumnsPerBlock state columns of one (sequence, value head); each thread holds its rows of
// kColumnsPerLane columns kColumnStride apart, so every q and k piece it reads from shared memory serves them all.
// Token tiles of TILE rows stream in through two stages: the next tile's copies run while this one's tokens are
// computed. A prefill block's shared memory keeps it to about two an SM, so its threads may take every register;
// single-token blocks are kept to a size four fit.
template <int R, int W, int TILE, typename L>
__global__ void __launch_bounds__(L::kThreads, TILE > 1 ? 1 : 4)
    recurrence_kernel(const float* conv, const float* b, const float* a, int ab_stride, const float* a_log,
                      const float* dt_bias, Dims d, DeltaNetBatch batch, float* out) {
  wait_for_previous_grid();
  using Rows = RecurrenceRows<R>;
  using Tile = RecurrenceTile<R, TILE, L>;
  constexpr int kColumnsPerBlock = L::kColumnsPerBlock, kColumnStride = L::kColumnStride, kThreads = L::kThreads;
  static_assert(R % 4 == 0, "rows come in float4 pieces");
  static_assert(TILE <= 32, "a warp's lanes hold the tile's β and decays");
  constexpr int kC = L::kColumnsPerLane;
  FS_DYNAMIC_SHARED(unsigned char, smem_bytes);
  RecurrenceSmem<R, TILE, L>& smem = *reinterpret_cast<RecurrenceSmem<R, TILE, L>*>(smem_bytes);
  const DeltaNetSeq s = batch.seqs[blockIdx.z];
  if (s.chunked) return;
  const int h = blockIdx.y, lane = threadIdx.x % 32, g = threadIdx.x % kLanesPerColumn;
  const int slot = threadIdx.x / kLanesPerColumn, column0 = blockIdx.x * kColumnsPerBlock;
  const int64_t head_offset = d.conv_state + int64_t(h) * d.dk * d.dv;
  float* state = batch.states + s.state + head_offset;  // [dk][dv]
  // This thread's state: S[c][m] is row gR + m of column column0 + slot + c·kColumnStride.
  float S[kC][R];
  auto holds = [&](int c, int m) { return slot + c * kColumnStride + column0 < d.dv && g * R + m < d.dk; };
  auto at = [&](int c, int m) { return size_t(g * R + m) * d.dv + column0 + slot + c * kColumnStride; };
#pragma unroll
  for (int c = 0; c < kC; ++c)
#pragma unroll
    for (int m = 0; m < R; ++m) S[c][m] = !s.fresh && holds(c, m) ? state[at(c, m)] : 0.0f;
  const float A = expf(a_log[h]), bias = dt_bias[h];
  int tap = s.first_tap;
  const int tap_end = s.first_tap + s.tap_count;
  int tap_row = tap < tap_end ? batch.taps[tap].after_rows : -1;  // rows before the next snapshot
  stage_tile<R, W, TILE, L>(smem.tiles[0], conv, b, a, ab_stride, d, s.first_row, min(TILE, s.rows), h, column0);
  ptx::copy_commit();
  // A token's arithmetic, the same wherever it falls in a call: with `sum` the column sum of state · k (this lane's
  // part in four interleaved sums over its rows), δ = (v − decay · sum) · β, the state becomes decay · state + k ⊗ δ,
  // and its output terms are the lanes' parts of state · q. Rows past key_dim hold zero state and zero q and k, so
  // they add exact zeros.
  auto load_rows = [&](const float* rows, float (&dst)[R]) {
    const float4* p = reinterpret_cast<const float4*>(rows);
#pragma unroll
    for (int m4 = 0; m4 < R / 4; ++m4) {
      const float4 v = p[m4];
      dst[4 * m4] = v.x, dst[4 * m4 + 1] = v.y, dst[4 * m4 + 2] = v.z, dst[4 * m4 + 3] = v.w;
    }
  };
  // This lane's part of the state · x for each of its columns.
  auto dot = [&](const float (&x)[R], float (&dst)[kC]) {
    float part[kC][4];
#pragma unroll
    for (int c = 0; c < kC; ++c)
#pragma unroll
      for (int j = 0; j < 4; ++j) part[c][j] = S[c][j] * x[j];
#pragma unroll
    for (int m = 4; m < R; ++m)
#pragma unroll
      for (int c = 0; c < kC; ++c) part[c][m % 4] = fmaf(S[c][m], x[m], part[c][m % 4]);
#pragma unroll
    for (int c = 0; c < kC; ++c) dst[c] = (part[c][0] + part[c][1]) + (part[c][2] + part[c][3]);
  };
  for (int base = 0, buf = 0; base < s.rows; base += TILE, buf ^= 1) {
    const int n = min(TILE, s.rows - base);
    ptx::copy_wait<0>();
    __syncthreads();  // this tile is in, and every thread is done with the other stage
    if (base + TILE < s.rows)
      stage_tile<R, W, TILE, L>(smem.tiles[buf ^ 1], conv, b, a, ab_stride, d, s.first_row + base + TILE,
                             min(TILE, s.rows - base - TILE), h, column0);
    ptx::copy_commit();
    if (base + TILE >= s.rows) let_next_grid_start();  // this block's last tile: the next kernel may be scheduled
    const Tile& tile = smem.tiles[buf];
    // This thread's places in the tile at token 0 (token t's are t rows further), found once per tile.
    const float* q_rows = &tile.q[0][g * Rows::kStride];
    const float* k_rows = &tile.k[0][g * Rows::kStride];
    const float* values = &tile.v[0][slot];
    float* terms = &smem.partial[0][0][threadIdx.x];
    // Lane t of each warp: token t's β and decay.
    const float beta_at = lane < n ? sigmoid(tile.b[lane]) : 0.0f;
    const float decay_at = lane < n ? expf(-A * softplus(tile.a[lane] + bias)) : 0.0f;
    // Token t's output terms from its q rows `q` and the state it left.
    auto write_terms = [&](int t, const float (&q)[R]) {
      float o[kC];
      dot(q, o);
#pragma unroll
      for (int c = 0; c < kC; ++c) terms[(t * kC + c) * kThreads] = o[c];
    };
    // The same, loading token t's q rows.
    auto store_output = [&](int t) {
      float q[R];
      load_rows(q_rows + t * Rows::kRowFloats, q);
      write_terms(t, q);
    };
    // Token t's step with its k rows in `k`; it loads the next token's k rows (the tile's last row at its end)
    // into `next_k` before its own products, so they are in when that token starts. In tiles of several tokens the
    // previous token's output terms are (re)computed while the column sums travel between lanes, with no branch:
    // from the same state they are the same bits, and at the tile's first token the terms stored in token 0's
    // place are overwritten once it is done.
    auto step = [&](int t, const float (&k)[R], float (&next_k)[R]) {
      float q[R], part[kC], sum[kC], delta[kC];
      const int before = max(t - 1, 0);
      if constexpr (TILE > 1) {
        load_rows(q_rows + before * Rows::kRowFloats, q);
        load_rows(k_rows + min(t + 1, n - 1) * Rows::kRowFloats, next_k);
      }
      dot(k, part);
#pragma unroll
      for (int c = 0; c < kC; ++c) sum[c] = column_sum(part[c]);
      if constexpr (TILE > 1) write_terms(before, q);
      const float beta = __shfl_sync(0xffffffffu, beta_at, t), decay = __shfl_sync(0xffffffffu, decay_at, t);
#pragma unroll
      for (int c = 0; c < kC; ++c)
        delta[c] = fmaf(-decay, sum[c], values[t * kColumnsPerBlock + c * kColumnStride]) * beta;
#pragma unroll
      for (int m = 0; m < R; ++m)
#pragma unroll
        for (int c = 0; c < kC; ++c) S[c][m] = fmaf(k[m], delta[c], S[c][m] * decay);
    };
    // Runs of tokens, each ending at the tile's last token or at one a snapshot follows; two k buffers take
    // turns, so no token's rows are copied between registers.
    for (int t = 0; t < n; ++t) {
      const int tap_at = tap_row - base - 1, last = tap_at >= t && tap_at < n - 1 ? tap_at : n - 1;
      float k0[R], k1[R];
      load_rows(k_rows + t * Rows::kRowFloats, k0);
      for (;;) {
        step(t, k0, k1);
        if (++t > last) break;
        step(t, k1, k0);
        if (++t > last) break;
      }
      store_output(--t);
      for (; tap_row == base + t + 1; tap_row = tap < tap_end ? batch.taps[tap].after_rows : -1) {
        float* copy = batch.snapshots + batch.taps[tap++].dest + head_offset;
#pragma unroll
        for (int c = 0; c < kC; ++c)
#pragma unroll
          for (int m = 0; m < R; ++m)
            if (holds(c, m)) copy[at(c, m)] = S[c][m];
      }
    }
    // The tile's outputs of this warp's columns: each the sum of its four lanes' terms, paired as column_sum pairs
    // them. A lane sums one column's terms every kPassTokens tokens; all are read (past the tile's last token they
    // are unused) before any is stored, so the reads overlap.
    __syncwarp();
    static_assert(kLanesPerColumn == 4, "a column's terms are one float4");
    constexpr int kSlots = 32 / kLanesPerColumn, kWarpColumns = kSlots * kC, kPassTokens = 32 / kWarpColumns;
    static_assert(32 % kWarpColumns == 0, "a warp's lanes cover whole tokens of its columns");
    constexpr int kPasses = (TILE + kPassTokens - 1) / kPassTokens;
    const int first_token = lane / kWarpColumns, c = lane % kWarpColumns / kSlots;
    const int at_slot = threadIdx.x / 32 * kSlots + lane % kSlots, column = at_slot + c * kColumnStride;
    const float* lane_terms = &smem.partial[0][c][at_slot * kLanesPerColumn];
    float sums[kPasses];
#pragma unroll
    for (int i = 0; i < kPasses; ++i) {
      const int t = min(first_token + i * kPassTokens, TILE - 1);
      const float4 p = *reinterpret_cast<const float4*>(lane_terms + t * kC * kThreads);
      sums[i] = (p.x + p.y) + (p.z + p.w);
    }
    float* lane_out = out + size_t(s.first_row + base + first_token) * d.V + size_t(h) * d.dv + column0 + column;
#pragma unroll
    for (int i = 0; i < kPasses; ++i)
      if (first_token + i * kPassTokens < n && column0 + column < d.dv)
        lane_out[size_t(i) * kPassTokens * d.V] = sums[i];
  }
#pragma unroll
  for (int c = 0; c < kC; ++c)
#pragma unroll
    for (int m = 0; m < R; ++m)
      if (holds(c, m)) state[at(c, m)] = S[c][m];
}

}  // namespace

void deltanet_recurrence(const float* conv, int T, const float* b, const float* a, int ab_stride, const float* a_log,
                         const float* dt_bias, const DeltaNetShape& shape, const DeltaNetBatch& batch, float* out,
                         void* stream) {
  const Dims d = dims_of(shape);
  check_batch(T, batch);
  if (T == 0 || batch.count == 0) return;
  // 16-byte copies when every q, k and v piece starts on a 16-byte boundary.
  const bool vec = d.C % 4 == 0 && d.dk % 4 == 0 && d.dv % 4 == 0 && reinterpret_cast<uintptr_t>(conv) % 16 == 0;
  // Calls of one row per sequence (decode rounds) stage single tokens and give a thread one column, so more warps
  // share the work of the state's one pass; longer calls give a thread two columns, so each q and k row it reads
  // serves both. A column's arithmetic is the same in either layout.
  const bool single_rows = T == batch.count;
  auto launch = [&](auto rows, auto vec_copies, auto layout, auto tile) {
    constexpr int kR = decltype(rows)::value, kTile = decltype(tile)::value;
    constexpr int kW = decltype(vec_copies)::value ? 4 : 1;
    using L = decltype(layout);
    const dim3 grid(unsigned((d.dv + L::kColumnsPerBlock - 1) / L::kColumnsPerBlock), unsigned(d.nv),
                    unsigned(batch.count));
    const auto kernel = recurrence_kernel<kR, kW, kTile, L>;
    const unsigned bytes = sizeof(RecurrenceSmem<kR, kTile, L>);
    allow_shared_memory_once(kernel, bytes, "deltanet_recurrence");
    launch_overlapping_kernel("deltanet_recurrence", kernel, grid, dim3(L::kThreads), bytes, stream, conv, b, a,
                              ab_stride, a_log, dt_bias, d, batch, out);
  };
  auto with_copies = [&](auto rows, auto vec_copies) {
    if (single_rows) launch(rows, vec_copies, Layout<1, 32>{}, std::integral_constant<int, 1>{});
    else launch(rows, vec_copies, Layout<2, 32>{}, std::integral_constant<int, kPrefillTile>{});
  };
  auto with_rows = [&](auto rows) {
    vec ? with_copies(rows, std::true_type{}) : with_copies(rows, std::false_type{});
  };
  if (d.dk <= 16) with_rows(std::integral_constant<int, 4>{});
  else if (d.dk <= 32) with_rows(std::integral_constant<int, 8>{});
  else if (d.dk <= 64) with_rows(std::integral_constant<int, 16>{});
  else with_rows(std::integral_constant<int, 32>{});
}

}  // namespace fs::cuda::kernels
