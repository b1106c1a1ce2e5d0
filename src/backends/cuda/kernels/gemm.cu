// bf16 GEMM on the tensor cores (mma.sync m16n8k16, fp32 accumulation): y[m, n] = Σ_k x[m, k]·w[n, k].
// Beyond 16 rows, tiles of x and w stream into shared memory through a multi-stage cp.async pipeline (16-byte
// copies, zero fill past the edges); up to 16 rows, each warp streams weights straight into registers. Within a
// 32-wide k block each lane reads 16 bytes (8 consecutive k) of a row; the two mma of the block take the same
// permutation of k for x and w, so the dot product is unchanged. Every output element accumulates its k blocks in
// increasing order, two mma per block, in every configuration: the configuration (picked from m for speed) changes
// which elements share a warp and how operands reach the registers, never the arithmetic of one element. No
// split-K, no atomics.
#include "backends/cuda/kernels/common.cuh"
#include "backends/cuda/kernels/ops.h"

#include <iterator>

namespace fs::cuda::kernels {

namespace {

__device__ __forceinline__ void mma(float (&c)[4], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3, uint32_t b0,
                                    uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

// 16-byte global → shared copy; bytes past `valid` (0 or 16) are zero-filled.
__device__ __forceinline__ void copy16(void* smem, const void* gmem, bool valid) {
  const uint32_t s = static_cast<uint32_t>(__cvta_generic_to_shared(smem));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(s), "l"(gmem), "r"(valid ? 16 : 0) : "memory");
}
__device__ __forceinline__ void copy_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
template <int N>
__device__ __forceinline__ void copy_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

__device__ __forceinline__ uint4 load16(const uint16_t* p, bool valid) {
  return valid ? __ldg(reinterpret_cast<const uint4*>(p)) : make_uint4(0, 0, 0, 0);
}

constexpr int kWarps = 4;

// Few rows: no shared memory; each warp streams its 8·NT weight rows straight into registers, U k blocks of 32
// ahead, and owns 16·MT rows × 8·NT columns. Same fragments, same order as the tiled kernel.
template <int MT, int NT, int U>
__global__ void __launch_bounds__(32 * kWarps) direct_kernel(const uint16_t* x, const uint16_t* w, const float* bias,
                                                           float* y, int M, int N, int K, bool accumulate) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const int m0 = blockIdx.y * 16 * MT;
  const int n0 = (blockIdx.x * kWarps + warp) * 8 * NT;
  if (n0 >= N) return;
  const uint16_t* xr[MT][2];
  bool xv[MT][2];
#pragma unroll
  for (int i = 0; i < MT; ++i)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int row = m0 + i * 16 + g + h * 8;
      xv[i][h] = row < M;
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
  float acc[MT][NT][4];
#pragma unroll
  for (int i = 0; i < MT; ++i)
#pragma unroll
    for (int j = 0; j < NT; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[i][j][e] = 0.0f;

  for (int k0 = 0; k0 < K; k0 += 32 * U) {
    uint4 a[U][MT][2], b[U][NT];
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int k = k0 + u * 32;
      const bool in = k + t * 8 < K;
#pragma unroll
      for (int i = 0; i < MT; ++i)
#pragma unroll
        for (int h = 0; h < 2; ++h) a[u][i][h] = load16(xr[i][h] + k, in && xv[i][h]);
#pragma unroll
      for (int j = 0; j < NT; ++j) b[u][j] = load16(wr[j] + k, in && wv[j]);
    }
#pragma unroll
    for (int u = 0; u < U; ++u) {
      if (k0 + u * 32 >= K) break;
#pragma unroll
      for (int i = 0; i < MT; ++i)
#pragma unroll
        for (int j = 0; j < NT; ++j) {
          mma(acc[i][j], a[u][i][0].x, a[u][i][1].x, a[u][i][0].y, a[u][i][1].y, b[u][j].x, b[u][j].y);
          mma(acc[i][j], a[u][i][0].z, a[u][i][1].z, a[u][i][0].w, a[u][i][1].w, b[u][j].z, b[u][j].w);
        }
    }
  }
#pragma unroll
  for (int i = 0; i < MT; ++i)
#pragma unroll
    for (int j = 0; j < NT; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int row = m0 + i * 16 + g + (e / 2) * 8, col = n0 + j * 8 + 2 * t + (e % 2);
        if (row >= M || col >= N) continue;
        const float v = acc[i][j][e] + (bias ? bias[col] : 0.0f);
        float* out = y + size_t(row) * N + col;
        *out = accumulate ? *out + v : v;
      }
}

template <int MT, int NT, int U>
void launch_direct(const uint16_t* x, const uint16_t* w, const float* bias, float* y, int m, int n, int k,
                   bool accumulate, void* stream) {
  const int cols = 8 * NT * kWarps, rows = 16 * MT;
  dim3 grid((n + cols - 1) / cols, (m + rows - 1) / rows);
  direct_kernel<MT, NT, U><<<grid, 32 * kWarps, 0, as_runtime(stream)>>>(x, w, bias, y, m, n, k, accumulate);
  check_launch("gemm");
}

// Tile shape: MW×NW warps, each owning 16·MT rows × 8·NT columns; a stage holds KB k blocks of 32; STAGES stages.
template <int MW, int NW, int MT, int NT, int KB, int STAGES>
struct Tile {
  static constexpr int kThreads = 32 * MW * NW;
  static constexpr int kRows = 16 * MT * MW;  // x rows per CTA
  static constexpr int kCols = 8 * NT * NW;   // w rows (output columns) per CTA
  static constexpr int kKb = KB;
  // Shared layout per stage: [KB][rows][32 k], so a row's 32-wide k block is 64 contiguous bytes.
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

// Queues the copies of one stage: x rows [m0, m0+kRows) and w rows [n0, n0+kCols) for k from k0.
template <class T>
__device__ __forceinline__ void load_stage(uint16_t* st, const uint16_t* x, const uint16_t* w, int M, int N, int K,
                                           int m0, int n0, int k0) {
  load_operand<T::kRows, T::kKb, T::kThreads>(st, x, M, K, m0, k0);
  load_operand<T::kCols, T::kKb, T::kThreads>(st + T::kKb * T::kRows * 32, w, N, K, n0, k0);
}

template <int MW, int NW, int MT, int NT, int KB, int STAGES>
__global__ void __launch_bounds__(32 * MW * NW) gemm_kernel(const uint16_t* x, const uint16_t* w, const float* bias,
                                                            float* y, int M, int N, int K, bool accumulate) {
  using T = Tile<MW, NW, MT, NT, KB, STAGES>;
  extern __shared__ __align__(16) uint16_t smem[];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const int wm = warp / NW, wn = warp % NW;
  const int m0 = blockIdx.y * T::kRows, n0 = blockIdx.x * T::kCols;
  const int steps = (K + 32 * KB - 1) / (32 * KB);

  float acc[MT][NT][4];
#pragma unroll
  for (int i = 0; i < MT; ++i)
#pragma unroll
    for (int j = 0; j < NT; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[i][j][e] = 0.0f;

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
        for (int j = 0; j < NT; ++j) {
          mma(acc[i][j], a[i][0].x, a[i][1].x, a[i][0].y, a[i][1].y, b[j].x, b[j].y);
          mma(acc[i][j], a[i][0].z, a[i][1].z, a[i][0].w, a[i][1].w, b[j].z, b[j].w);
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
        if (row >= M || col >= N) continue;
        const float v = acc[i][j][e] + (bias ? bias[col] : 0.0f);
        float* out = y + size_t(row) * N + col;
        *out = accumulate ? *out + v : v;
      }
}

template <int MW, int NW, int MT, int NT, int KB, int STAGES>
void launch(const uint16_t* x, const uint16_t* w, const float* bias, float* y, int m, int n, int k, bool accumulate,
            void* stream) {
  using T = Tile<MW, NW, MT, NT, KB, STAGES>;
  auto kernel = gemm_kernel<MW, NW, MT, NT, KB, STAGES>;
  static const cudaError_t attr = [&] {
    cudaError_t e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(T::kSmemBytes));
    if (e != cudaSuccess) return e;
    return cudaFuncSetAttribute(kernel, cudaFuncAttributePreferredSharedMemoryCarveout, cudaSharedmemCarveoutMaxShared);
  }();
  if (attr != cudaSuccess) throw Error(std::string("CUDA gemm shared memory setup failed: ") + cudaGetErrorString(attr));
  dim3 grid((n + T::kCols - 1) / T::kCols, (m + T::kRows - 1) / T::kRows);
  kernel<<<grid, T::kThreads, T::kSmemBytes, as_runtime(stream)>>>(x, w, bias, y, m, n, k, accumulate);
  check_launch("gemm");
}

// The tile configurations, smallest rows first; all share one arithmetic per element.
using Launcher = void (*)(const uint16_t*, const uint16_t*, const float*, float*, int, int, int, bool, void*);
constexpr Launcher kVariants[] = {
    launch<1, 2, 1, 1, 4, 8>,  // 0: 16×16 tile, 8 stages of 128 k
    launch<1, 4, 1, 1, 4, 6>,  // 1: 16×32 tile, 6 stages of 128 k
    launch<1, 4, 1, 2, 2, 8>,  // 2: 16×64 tile, 8 stages of 64 k
    launch<1, 2, 1, 1, 8, 6>,  // 3: 16×16 tile, 6 stages of 256 k
    launch<2, 2, 2, 4, 2, 4>,  // 4: 64×64 tile
    launch<2, 2, 2, 1, 2, 8>,  // 5: 64×16 tile
    launch<1, 4, 4, 1, 2, 8>,  // 6: 64×32 tile
    launch<2, 4, 4, 4, 2, 3>,  // 7: 128×128 tile, 3 stages
    launch<2, 4, 4, 4, 2, 4>,  // 8: 128×128 tile, 4 stages
    launch_direct<1, 1, 8>,    // 9: no shared memory, 16×8 per warp, 8 k blocks ahead in registers
};

void check_k(int m, int n, int k) {
  if (k % 8 != 0)
    throw Error("the CUDA GEMM needs k divisible by 8 (got m=" + std::to_string(m) + " n=" + std::to_string(n) +
                " k=" + std::to_string(k) + ")");
}

}  // namespace

int gemm_variants() { return int(std::size(kVariants)); }

void gemm_variant(int variant, const uint16_t* x, const uint16_t* w, const float* bias, float* y, int m, int n, int k,
                  bool accumulate, void* stream) {
  check_k(m, n, k);
  if (variant < 0 || variant >= gemm_variants()) throw Error("no GEMM variant " + std::to_string(variant));
  if (m == 0 || n == 0) return;
  kVariants[variant](x, w, bias, y, m, n, k, accumulate, stream);
}

void gemm(const uint16_t* x, const uint16_t* w, const float* bias, float* y, int m, int n, int k, bool accumulate,
          void* stream) {
  check_k(m, n, k);
  if (m == 0 || n == 0) return;
  kVariants[m <= 16 ? 9 : m <= 64 ? 6 : 7](x, w, bias, y, m, n, k, accumulate, stream);
}

}  // namespace fs::cuda::kernels
