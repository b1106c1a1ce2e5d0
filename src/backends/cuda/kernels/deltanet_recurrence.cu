// The gated delta rule: q and k L2-normalised in place (a warp per (row, key head)), then a block per (sequence,
// value head, 32 state columns) runs the tokens in order, four lanes per column each holding a quarter of the state
// rows of two columns, token tiles streaming through shared memory.
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
constexpr int kColumnsPerLane = 2;
constexpr int kColumnsPerBlock = 32;
constexpr int kColumnStride = kColumnsPerBlock / kColumnsPerLane;  // from one of a thread's columns to the next
constexpr int kRecurrenceThreads = kLanesPerColumn * kColumnStride;
constexpr int kPrefillTile = 16;  // tokens a block stages at once when sequences have many rows

// x · rsqrt(Σx² + 1e-6) · scale over n values, by one warp, into dst.
__device__ void l2_normalize(const float* x, int n, float scale, float* dst) {
  const int lane = threadIdx.x % 32;
  float ss = 0.0f;
  for (int i = lane; i < n; i += 32) ss = fmaf(x[i], x[i], ss);
  const float inv = 1.0f / sqrtf(warp_sum(ss) + 1e-6f);
  for (int i = lane; i < n; i += 32) dst[i] = (x[i] * inv) * scale;
}

// Per (row, key head): q and k of the conv output L2-normalised in place, q also scaled (one warp).
__global__ void normalize_kernel(float* conv, Dims d) {
  let_next_grid_start();
  wait_for_previous_grid();
  float* row = conv + size_t(blockIdx.x) * d.C + size_t(blockIdx.y) * d.dk;
  l2_normalize(row, d.dk, d.q_scale, row);
  l2_normalize(row + d.KC, d.dk, 1.0f, row + d.KC);
}

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
template <int R, int TILE>
struct RecurrenceTile {
  float q[TILE][RecurrenceRows<R>::kRowFloats];
  float k[TILE][RecurrenceRows<R>::kRowFloats];
  float v[TILE][kColumnsPerBlock];
  float b[TILE], a[TILE];
};

// A recurrence block's shared memory: two token-tile stages, and each thread's per-token output terms of the tile
// (summed over a column's lanes once the tile is done).
template <int R, int TILE>
struct RecurrenceSmem {
  RecurrenceTile<R, TILE> tiles[2];
  float partial[TILE][kColumnsPerLane][kRecurrenceThreads];
};

// W floats global → shared, asynchronously (W = 4 needs both ends 16-byte aligned).
template <int W>
__device__ __forceinline__ void copy_floats(float* smem, const float* gmem, bool valid) {
  if constexpr (W == 4) ptx::copy16(smem, gmem, valid);
  else ptx::copy4(smem, gmem, valid);
}

// Queues the copies of rows first_row … first_row + n − 1 (n ≤ TILE) into `tile`, W floats a copy: each thread
// takes fixed pieces of a row and walks them down the tile's rows.
template <int R, int W, int TILE>
__device__ void stage_tile(RecurrenceTile<R, TILE>& tile, const float* conv, const float* b, const float* a,
                           int ab_stride, const Dims& d, int first_row, int n, int h, int column0) {
  using Rows = RecurrenceRows<R>;
  constexpr int kPieces = kLanesPerColumn * R / W;  // of one q (or k) row
  const float* heads = conv + size_t(first_row) * d.C + size_t(h / d.group) * d.dk;
  for (int e = threadIdx.x; e < 2 * kPieces; e += kRecurrenceThreads) {
    const int i = (e % kPieces) * W;
    const bool valid = i < d.dk;
    const float* src = heads + (e < kPieces ? 0 : d.KC) + (valid ? i : 0);
    float* dst = (e < kPieces ? &tile.q[0][0] : &tile.k[0][0]) + Rows::at(i);
    for (int t = 0; t < n; ++t, src += d.C, dst += Rows::kRowFloats) copy_floats<W>(dst, src, valid);
  }
  const float* values = conv + size_t(first_row) * d.C + 2 * size_t(d.KC) + size_t(h) * d.dv;
  for (int j = threadIdx.x * W; j < kColumnsPerBlock; j += kRecurrenceThreads * W) {
    const bool valid = column0 + j < d.dv;
    const float* src = values + (valid ? column0 + j : 0);
    for (int t = 0; t < n; ++t, src += d.C) copy_floats<W>(&tile.v[t][j], src, valid);
  }
  for (int t = threadIdx.x; t < n; t += kRecurrenceThreads) {
    const size_t at = size_t(first_row + t) * ab_stride + h;
    ptx::copy4(&tile.b[t], b + at, true);
    ptx::copy4(&tile.a[t], a + at, true);
  }
}

// A block owns kColumnsPerBlock state columns of one (sequence, value head); each thread holds its rows of
// kColumnsPerLane columns kColumnStride apart, so every q and k piece it reads from shared memory serves them all.
// Token tiles of TILE rows stream in through two stages: the next tile's copies run while this one's tokens are
// computed.
template <int R, int W, int TILE>
__global__ void __launch_bounds__(kRecurrenceThreads)
    recurrence_kernel(const float* conv, const float* b, const float* a, int ab_stride, const float* a_log,
                      const float* dt_bias, Dims d, DeltaNetBatch batch, float* out) {
  wait_for_previous_grid();
  using Rows = RecurrenceRows<R>;
  using Tile = RecurrenceTile<R, TILE>;
  static_assert(R % 4 == 0, "rows come in float4 pieces");
  static_assert(TILE < 32, "a warp's lanes hold the tile's β and decays");
  constexpr int kC = kColumnsPerLane;
  extern __shared__ __align__(16) unsigned char smem_bytes[];
  RecurrenceSmem<R, TILE>& smem = *reinterpret_cast<RecurrenceSmem<R, TILE>*>(smem_bytes);
  const DeltaNetSeq s = batch.seqs[blockIdx.z];
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
  stage_tile<R, W, TILE>(smem.tiles[0], conv, b, a, ab_stride, d, s.first_row, min(TILE, s.rows), h, column0);
  ptx::copy_commit();
  // Token t's decayed state · k (`mem`) comes from the pass that finished token t − 1 when both are in this tile
  // and no snapshot falls between them; each product and sum is the same either way. Rows past key_dim hold zero
  // state and zero q and k, so they add exact zeros.
  float mem[kC];
  bool mem_ready = false;
  // This lane's rows of a token's q or k in shared memory (`rows`: this lane's first), into registers.
  auto load_rows = [&](const float* rows, float (&dst)[R]) {
    const float4* p = reinterpret_cast<const float4*>(rows);
#pragma unroll
    for (int m4 = 0; m4 < R / 4; ++m4) {
      const float4 v = p[m4];
      dst[4 * m4] = v.x, dst[4 * m4 + 1] = v.y, dst[4 * m4 + 2] = v.z, dst[4 * m4 + 3] = v.w;
    }
  };
  for (int base = 0, buf = 0; base < s.rows; base += TILE, buf ^= 1) {
    const int n = min(TILE, s.rows - base);
    ptx::copy_wait<0>();
    __syncthreads();  // this tile is in, and every thread is done with the other stage
    if (base + TILE < s.rows)
      stage_tile<R, W, TILE>(smem.tiles[buf ^ 1], conv, b, a, ab_stride, d, s.first_row + base + TILE,
                             min(TILE, s.rows - base - TILE), h, column0);
    ptx::copy_commit();
    const Tile& tile = smem.tiles[buf];
    // This thread's places in the tile at token 0 (token t's are t rows further), found once per tile.
    const float* q_rows = &tile.q[0][g * Rows::kStride];
    const float* k_rows = &tile.k[0][g * Rows::kStride];
    const float* values = &tile.v[0][slot];
    float* terms = &smem.partial[0][0][threadIdx.x];
    // Lane t of each warp: token t's β and decay.
    const float beta_at = lane < n ? sigmoid(tile.b[lane]) : 0.0f;
    const float decay_at = lane < n ? expf(-A * softplus(tile.a[lane] + bias)) : 0.0f;
    for (int t = 0; t < n; ++t) {
      float k[R];
      load_rows(k_rows + t * Rows::kRowFloats, k);
      const float beta = __shfl_sync(0xffffffffu, beta_at, t);
      const float decay = __shfl_sync(0xffffffffu, decay_at, t);
      const float next_decay = __shfl_sync(0xffffffffu, decay_at, t + 1);
      if (!mem_ready) {
#pragma unroll
        for (int c = 0; c < kC; ++c) {
          mem[c] = 0.0f;
#pragma unroll
          for (int m = 0; m < R; ++m) {
            S[c][m] *= decay;
            mem[c] = fmaf(S[c][m], k[m], mem[c]);
          }
        }
      }
      float delta[kC], o[kC];
#pragma unroll
      for (int c = 0; c < kC; ++c) {
        delta[c] = (values[t * kColumnsPerBlock + c * kColumnStride] - column_sum(mem[c])) * beta;
        o[c] = 0.0f;
      }
      const bool tap_here = tap_row == base + t + 1;
      mem_ready = t + 1 < n && !tap_here;
      float q[R];
      load_rows(q_rows + t * Rows::kRowFloats, q);
#pragma unroll
      for (int m = 0; m < R; ++m)
#pragma unroll
        for (int c = 0; c < kC; ++c) S[c][m] = fmaf(k[m], delta[c], S[c][m]);
      if (mem_ready) {  // this token's output, then the next token's decay and state · k
        float next_k[R], next[kC];
        load_rows(k_rows + (t + 1) * Rows::kRowFloats, next_k);
#pragma unroll
        for (int c = 0; c < kC; ++c) next[c] = 0.0f;
        // Row m's output term and decay go beside row m − 1's next-token term, so no product waits on the one
        // before it; each sum still runs over the rows in order.
#pragma unroll
        for (int m = 0; m <= R; ++m) {
#pragma unroll
          for (int c = 0; c < kC && m < R; ++c) o[c] = fmaf(S[c][m], q[m], o[c]);
#pragma unroll
          for (int c = 0; c < kC && m < R; ++c) S[c][m] *= next_decay;
#pragma unroll
          for (int c = 0; c < kC && m > 0; ++c) next[c] = fmaf(S[c][m - 1], next_k[m - 1], next[c]);
        }
#pragma unroll
        for (int c = 0; c < kC; ++c) mem[c] = next[c];
      } else {
#pragma unroll
        for (int m = 0; m < R; ++m)
#pragma unroll
          for (int c = 0; c < kC; ++c) o[c] = fmaf(S[c][m], q[m], o[c]);
      }
#pragma unroll
      for (int c = 0; c < kC; ++c) terms[(t * kC + c) * kRecurrenceThreads] = o[c];
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
    // them.
    __syncwarp();
    static_assert(kLanesPerColumn == 4, "a column's terms are one float4");
    constexpr int kSlots = 32 / kLanesPerColumn, kWarpColumns = kSlots * kC;
    const int first_slot = threadIdx.x / 32 * kSlots;
    float* tile_out = out + size_t(s.first_row + base) * d.V + size_t(h) * d.dv + column0;
    for (int e = lane; e < n * kWarpColumns; e += 32) {
      const int t = e / kWarpColumns, c = e % kWarpColumns / kSlots, at_slot = first_slot + e % kSlots;
      const int column = at_slot + c * kColumnStride;
      const float4 p = *reinterpret_cast<const float4*>(&smem.partial[t][c][at_slot * kLanesPerColumn]);
      if (column0 + column < d.dv) tile_out[t * d.V + column] = (p.x + p.y) + (p.z + p.w);
    }
  }
#pragma unroll
  for (int c = 0; c < kC; ++c)
#pragma unroll
    for (int m = 0; m < R; ++m)
      if (holds(c, m)) state[at(c, m)] = S[c][m];
}

}  // namespace

void deltanet_recurrence(float* conv, int T, const float* b, const float* a, int ab_stride, const float* a_log,
                         const float* dt_bias, const DeltaNetShape& shape, const DeltaNetBatch& batch, float* out,
                         void* stream) {
  const Dims d = dims_of(shape);
  check_batch(T, batch);
  if (T == 0 || batch.count == 0) return;
  // Every row's q and k normalised at once, so the recurrence's token loop waits on no reduction.
  launch_overlapping_kernel("deltanet_normalize", normalize_kernel, dim3(T, d.KC / d.dk), dim3(32), 0, stream, conv, d);
  const dim3 grid(unsigned((d.dv + kColumnsPerBlock - 1) / kColumnsPerBlock), unsigned(d.nv), unsigned(batch.count));
  // 16-byte copies when every q, k and v piece starts on a 16-byte boundary.
  const bool vec = d.C % 4 == 0 && d.dk % 4 == 0 && d.dv % 4 == 0 && reinterpret_cast<uintptr_t>(conv) % 16 == 0;
  // Calls of one row per sequence (decode rounds) stage single tokens, so more blocks fit each multiprocessor.
  const bool single_rows = T == batch.count;
  auto launch = [&](auto rows, auto vec_copies) {
    constexpr int kR = decltype(rows)::value;
    constexpr int kW = decltype(vec_copies)::value ? 4 : 1;
    auto go = [&](auto kernel, unsigned bytes) {
      allow_shared_memory_once(kernel, bytes, "deltanet_recurrence");
      launch_overlapping_kernel("deltanet_recurrence", kernel, grid, dim3(kRecurrenceThreads), bytes, stream, conv,
                                b, a, ab_stride, a_log, dt_bias, d, batch, out);
    };
    if (single_rows) go(recurrence_kernel<kR, kW, 1>, unsigned(sizeof(RecurrenceSmem<kR, 1>)));
    else go(recurrence_kernel<kR, kW, kPrefillTile>, unsigned(sizeof(RecurrenceSmem<kR, kPrefillTile>)));
  };
  auto with_rows = [&](auto rows) {
    vec ? launch(rows, std::true_type{}) : launch(rows, std::false_type{});
  };
  if (d.dk <= 16) with_rows(std::integral_constant<int, 4>{});
  else if (d.dk <= 32) with_rows(std::integral_constant<int, 8>{});
  else if (d.dk <= 64) with_rows(std::integral_constant<int, 16>{});
  else with_rows(std::integral_constant<int, 32>{});
}

}  // namespace fs::cuda::kernels
