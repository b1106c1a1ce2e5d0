#pragma once
// Register-streaming GEMM for few rows: no operand staging in shared memory. A CTA owns 8·NT output columns and a
// tile of rows; its W warps take the k slices w, w+W, … of those same columns, each streaming its weight rows
// straight into registers (past L1, with an L2 prefetch hint) and keeping each slice's partial sum apart. The
// partials meet in shared memory and are added in slice order, so the arithmetic is that of every configuration.
#include "backends/cuda/kernels/gemm_common.cuh"

namespace fs::cuda::kernels::gemm_detail {

// Slices whose partials a CTA holds at once; longer k runs in rounds of this many slices.
constexpr int kRoundSlices = 16;

// MT mma tiles of 16 rows (HALF: one tile of which only the first 8 rows are used), NT of 8 columns, U k blocks per
// load group, at most WMAX warps; PIPE: the next group's weights are requested before the current group's mma.
template <int MT, int NT, int U, int WMAX, bool HALF, bool PIPE>
struct Stream {
  static_assert(!HALF || MT == 1, "half tiles hold one mma tile");
  static constexpr int kRows = HALF ? 8 : 16 * MT;
  static constexpr int kCols = 8 * NT;
  static constexpr int kFrag = MT * NT * 4 * 32;  // one warp's output fragments, in floats

  static int slices(int k) { return k > 0 ? ((k + 31) / 32 + kSliceBlocks - 1) / kSliceBlocks : 1; }
  // Warps per CTA: the fewest that spread the slices as evenly as WMAX warps would.
  static int warps(int k) {
    const int s = slices(k), per_warp = (s + WMAX - 1) / WMAX;
    return (s + per_warp - 1) / per_warp;
  }
  // Partial slots of one round, plus the running total when k needs several rounds.
  static size_t smem_bytes(int k) {
    const int s = slices(k);
    return size_t((s < kRoundSlices ? s : kRoundSlices) + (s > kRoundSlices ? 1 : 0)) * kFrag * sizeof(float);
  }
  static constexpr size_t kMaxSmemBytes = size_t(kRoundSlices + 1) * kFrag * sizeof(float);
};

template <int MT, int NT, int U, int WMAX, bool HALF, bool PIPE>
__global__ void __launch_bounds__(32 * WMAX) stream_kernel(const uint16_t* x, const uint16_t* w, const float* bias,
                                                           float* y, int M, int N, int K, bool accumulate) {
  using S = Stream<MT, NT, U, WMAX, HALF, PIPE>;
  extern __shared__ __align__(16) float part[];  // [slot][MT][NT][4][32 lanes]
  const int warps = blockDim.x / 32, warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const int m0 = blockIdx.y * S::kRows, n0 = blockIdx.x * S::kCols;
  const uint16_t* xr[MT][2];
  bool xv[MT][2];
#pragma unroll
  for (int i = 0; i < MT; ++i)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int row = m0 + i * 16 + g + h * 8;
      xv[i][h] = row < M && !(HALF && h == 1);
      xr[i][h] = x + size_t(xv[i][h] ? row : 0) * K + t * 8;
    }
  const uint16_t* wr[NT];
  bool wv[NT];
#pragma unroll
  for (int j = 0; j < NT; ++j) {
    const int col = n0 + j * 8 + g;
    wv[j] = col < N;
    wr[j] = w + size_t(wv[j] ? col : 0) * K + t * 8;
  }
  const int blocks = (K + 31) / 32, slices = K > 0 ? (blocks + kSliceBlocks - 1) / kSliceBlocks : 1;
  const int round = slices < kRoundSlices ? slices : kRoundSlices;
  float* total = part + round * S::kFrag;
  wait_for_previous_grid();

  for (int r0 = 0; r0 < slices; r0 += kRoundSlices) {
    const int r1 = r0 + kRoundSlices < slices ? r0 + kRoundSlices : slices;
    for (int s = r0 + warp; s < r1; s += warps) {
      float acc[MT][NT][4];
#pragma unroll
      for (int i = 0; i < MT; ++i)
#pragma unroll
        for (int j = 0; j < NT; ++j)
#pragma unroll
          for (int e = 0; e < 4; ++e) acc[i][j][e] = 0.0f;
      const int b1 = (s + 1) * kSliceBlocks < blocks ? (s + 1) * kSliceBlocks : blocks;
      // Requests the weights of k blocks kb…kb+U-1 (none past the slice).
      auto load_group = [&](uint4 (&b)[U][NT], int kb) {
#pragma unroll
        for (int u = 0; u < U; ++u) {
          const int k = (kb + u) * 32;
          const bool in = kb + u < b1 && k + t * 8 < K;
#pragma unroll
          for (int j = 0; j < NT; ++j)
            b[u][j] = load16_weights(wr[j] + k, in && wv[j]);
        }
      };
      // The mma of k blocks kb…kb+U-1 in increasing order, x read as it is needed.
      auto mma_group = [&](const uint4 (&b)[U][NT], int kb) {
#pragma unroll
        for (int u = 0; u < U; ++u) {
          if (kb + u >= b1) break;
          const int k = (kb + u) * 32;
          const bool in = k + t * 8 < K;
          uint4 a[MT][2];
#pragma unroll
          for (int i = 0; i < MT; ++i)
#pragma unroll
            for (int h = 0; h < 2; ++h) a[i][h] = load16(xr[i][h] + k, in && xv[i][h]);
#pragma unroll
          for (int i = 0; i < MT; ++i)
#pragma unroll
            for (int j = 0; j < NT; ++j) mma_block(acc[i][j], a[i][0], a[i][1], b[u][j]);
        }
      };
      const int b0 = s * kSliceBlocks;
      if constexpr (PIPE) {
        uint4 ba[U][NT], bb[U][NT];
        load_group(ba, b0);
        for (int kb = b0; kb < b1; kb += 2 * U) {
          load_group(bb, kb + U);
          mma_group(ba, kb);
          load_group(ba, kb + 2 * U);
          mma_group(bb, kb + U);
        }
      } else {
        for (int kb = b0; kb < b1; kb += U) {
          uint4 b[U][NT];
          load_group(b, kb);
          mma_group(b, kb);
        }
      }
      float* slot = part + (s - r0) * S::kFrag;
#pragma unroll
      for (int i = 0; i < MT; ++i)
#pragma unroll
        for (int j = 0; j < NT; ++j)
#pragma unroll
          for (int e = 0; e < 4; ++e) slot[((i * NT + j) * 4 + e) * 32 + lane] = acc[i][j][e];
    }
    __syncthreads();
    // Each element adds this round's partials in slice order onto the total of the rounds before.
    for (int f = threadIdx.x; f < S::kFrag; f += blockDim.x) {
      float v = r0 == 0 ? 0.0f : total[f];
      for (int q = 0; q < r1 - r0; ++q) v += part[q * S::kFrag + f];
      if (r1 < slices) {
        total[f] = v;
        continue;
      }
      const int fl = f % 32, e = (f / 32) % 4, j = (f / 128) % NT, i = f / (128 * NT);
      const int row = m0 + i * 16 + fl / 4 + (e / 2) * 8, col = n0 + j * 8 + 2 * (fl % 4) + (e % 2);
      if (row < M && col < N && !(HALF && e >= 2)) store_out(y, bias, N, row, col, v, accumulate);
    }
    __syncthreads();
  }
}

template <int MT, int NT, int U, int WMAX, bool HALF, bool PIPE>
void launch_stream(const uint16_t* x, const uint16_t* w, const float* bias, float* y, int m, int n, int k,
                   bool accumulate, void* stream) {
  using S = Stream<MT, NT, U, WMAX, HALF, PIPE>;
  auto kernel = stream_kernel<MT, NT, U, WMAX, HALF, PIPE>;
  allow_shared_memory_once(kernel, unsigned(S::kMaxSmemBytes), "gemm");
  dim3 grid((n + S::kCols - 1) / S::kCols, (m + S::kRows - 1) / S::kRows);
  launch_overlapping_kernel("gemm", kernel, grid, dim3(32 * S::warps(k)), unsigned(S::smem_bytes(k)), stream, x, w, bias, y, m, n,
                k, accumulate);
}

}  // namespace fs::cuda::kernels::gemm_detail
