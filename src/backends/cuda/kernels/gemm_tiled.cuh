#pragma once
// Pipelined GEMM for many rows: tiles of x and w stream into shared memory through a multi-stage cp.async pipeline
// (16-byte copies, layout [k block][row][32] so each lane's 16-byte read is conflict-free, k past the end
// zero-filled). Each warp sums one k slice at a time into `acc` and adds it onto `total` at the slice's end.
#include "backends/cuda/kernels/gemm_common.cuh"

namespace fs::cuda::kernels::gemm_detail {

// Tile shape: MW×NW warps, each owning 16·MT rows × 8·NT columns; a stage holds KB k blocks of 32; STAGES stages.
template <int MW, int NW, int MT, int NT, int KB, int STAGES>
struct Tile {
  static_assert(kSliceBlocks % KB == 0, "a stage never straddles a k slice");
  static constexpr int kThreads = 32 * MW * NW;
  static constexpr int kRows = 16 * MT * MW;  // x rows per CTA
  static constexpr int kCols = 8 * NT * NW;   // w rows (output columns) per CTA
  static constexpr int kKb = KB;
  static constexpr int kStageElems = KB * (kRows + kCols) * 32;
  static constexpr size_t kSmemBytes = size_t(STAGES) * kStageElems * sizeof(uint16_t);
};

// Queues the copies of one operand's stage: `rows` rows from r0 (of `limit`), k from k0. Consecutive threads fill
// consecutive 16 bytes of shared memory. Rows past `limit` are skipped (they only feed discarded outputs: an mma
// output row or column depends on its own input row or column alone); k past K is zero-filled.
template <int ROWS, int KB, int THREADS>
__device__ __forceinline__ void load_operand(uint16_t* s, const uint16_t* src, int limit, int K, int r0, int k0) {
#pragma unroll 4
  for (int c = threadIdx.x; c < KB * ROWS * 4; c += THREADS) {
    const int kb = c / (ROWS * 4), r = (c / 4) % ROWS, q = c % 4;
    const int row = r0 + r, k = k0 + kb * 32 + q * 8;
    if (row >= limit) continue;
    const bool ok = k < K;
    copy16(s + (kb * ROWS + r) * 32 + q * 8, src + size_t(row) * K + (ok ? k : 0), ok);
  }
}

template <class T>
__device__ __forceinline__ void load_stage(uint16_t* st, const uint16_t* x, const uint16_t* w, int M, int N, int K,
                                           int m0, int n0, int k0) {
  load_operand<T::kRows, T::kKb, T::kThreads>(st, x, M, K, m0, k0);
  load_operand<T::kCols, T::kKb, T::kThreads>(st + T::kKb * T::kRows * 32, w, N, K, n0, k0);
}

template <bool F16, int MW, int NW, int MT, int NT, int KB, int STAGES>
__global__ void __launch_bounds__(32 * MW * NW) tiled_kernel(const uint16_t* x, const uint16_t* w, const float* bias,
                                                             float* y, int M, int N, int K, bool accumulate) {
  wait_for_previous_grid();
  using T = Tile<MW, NW, MT, NT, KB, STAGES>;
  extern __shared__ __align__(16) uint16_t smem[];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const int wm = warp / NW, wn = warp % NW;
  const int m0 = blockIdx.y * T::kRows, n0 = blockIdx.x * T::kCols;
  const int steps = (K + 32 * KB - 1) / (32 * KB);

  float acc[MT][NT][4], total[MT][NT][4];
#pragma unroll
  for (int i = 0; i < MT; ++i)
#pragma unroll
    for (int j = 0; j < NT; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[i][j][e] = total[i][j][e] = 0.0f;

#pragma unroll
  for (int s = 0; s < STAGES - 1; ++s) {
    if (s < steps) load_stage<T>(smem + s * T::kStageElems, x, w, M, N, K, m0, n0, s * 32 * KB);
    copy_commit();
  }
  for (int step = 0; step < steps; ++step) {
    copy_wait<STAGES - 2>();
    __syncthreads();
    const int next = step + STAGES - 1;
    if (next < steps) load_stage<T>(smem + (next % STAGES) * T::kStageElems, x, w, M, N, K, m0, n0, next * 32 * KB);
    copy_commit();
    const uint16_t* sa = smem + (step % STAGES) * T::kStageElems;
    const uint16_t* sb = sa + KB * T::kRows * 32;
#pragma unroll
    for (int kb = 0; kb < KB; ++kb) {
      if (step * 32 * KB + kb * 32 >= K) break;
      uint4 a[MT][2], b[NT];
#pragma unroll
      for (int i = 0; i < MT; ++i)
#pragma unroll
        for (int h = 0; h < 2; ++h)
          a[i][h] = *reinterpret_cast<const uint4*>(sa + (kb * T::kRows + wm * 16 * MT + i * 16 + g + h * 8) * 32 +
                                                     t * 8);
#pragma unroll
      for (int j = 0; j < NT; ++j)
        b[j] = *reinterpret_cast<const uint4*>(sb + (kb * T::kCols + wn * 8 * NT + j * 8 + g) * 32 + t * 8);
#pragma unroll
      for (int i = 0; i < MT; ++i)
#pragma unroll
        for (int j = 0; j < NT; ++j) mma_block<F16>(acc[i][j], a[i][0], a[i][1], b[j]);
    }
    // The end of a k slice (or of k): the slice's sum joins the total.
    if (((step + 1) * KB) % kSliceBlocks == 0 || step == steps - 1) {
#pragma unroll
      for (int i = 0; i < MT; ++i)
#pragma unroll
        for (int j = 0; j < NT; ++j)
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            total[i][j][e] += acc[i][j][e];
            acc[i][j][e] = 0.0f;
          }
    }
  }
  copy_wait<0>();

#pragma unroll
  for (int i = 0; i < MT; ++i)
#pragma unroll
    for (int j = 0; j < NT; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int row = m0 + wm * 16 * MT + i * 16 + g + (e / 2) * 8;
        const int col = n0 + wn * 8 * NT + j * 8 + 2 * t + (e % 2);
        if (row < M && col < N) store_out(y, bias, N, row, col, total[i][j][e], accumulate);
      }
}

template <bool F16, int MW, int NW, int MT, int NT, int KB, int STAGES>
void launch_tiled(const uint16_t* x, const uint16_t* w, const GemmOut& out, int m, int n, int k, void* stream) {
  if (out.act) throw Error("the mma.sync GEMM has no SwiGLU epilogue");
  using T = Tile<MW, NW, MT, NT, KB, STAGES>;
  auto kernel = tiled_kernel<F16, MW, NW, MT, NT, KB, STAGES>;
  allow_shared_memory_once(kernel, unsigned(T::kSmemBytes), "gemm", true);
  dim3 grid((n + T::kCols - 1) / T::kCols, (m + T::kRows - 1) / T::kRows);
  launch_overlapping_kernel("gemm", kernel, grid, dim3(T::kThreads), unsigned(T::kSmemBytes), stream, x, w, out.bias,
                            out.y, m, n, k, out.accumulate);
}

}  // namespace fs::cuda::kernels::gemm_detail
