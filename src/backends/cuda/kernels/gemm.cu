// bf16 GEMM on the tensor cores (mma.sync m16n8k16, fp32 accumulation): y[m, n] = Σ_k x[m, k]·w[n, k].
// Each lane loads 16 bytes (8 consecutive k) of a row; the two mma of a 32-wide k block take the same permutation
// of k for x and w, so the dot product is unchanged. Every output element accumulates its k blocks in increasing
// order, two mma per block, in every tile configuration: the tile shape (picked from m for speed) changes which
// elements share a warp, never the arithmetic of one element. No split-K, no atomics.
#include "backends/cuda/kernels/common.cuh"
#include "backends/cuda/kernels/ops.h"

namespace fs::cuda::kernels {

namespace {

constexpr int kWarps = 4;

__device__ __forceinline__ void mma(float (&c)[4], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3, uint32_t b0,
                                    uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

__device__ __forceinline__ uint4 load16(const uint16_t* p, bool valid) {
  return valid ? __ldg(reinterpret_cast<const uint4*>(p)) : make_uint4(0, 0, 0, 0);
}

// A warp owns 16·MT rows × 8·NT columns; U k blocks of 32 are loaded before they are multiplied.
template <int MT, int NT, int U>
__global__ void __launch_bounds__(32 * kWarps) gemm_kernel(const uint16_t* x, const uint16_t* w, const float* bias,
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
void launch(const uint16_t* x, const uint16_t* w, const float* bias, float* y, int m, int n, int k, bool accumulate,
            void* stream) {
  const int cols = 8 * NT * kWarps, rows = 16 * MT;
  dim3 grid((n + cols - 1) / cols, (m + rows - 1) / rows);
  gemm_kernel<MT, NT, U><<<grid, 32 * kWarps, 0, as_runtime(stream)>>>(x, w, bias, y, m, n, k, accumulate);
  check_launch("gemm");
}

}  // namespace

void gemm(const uint16_t* x, const uint16_t* w, const float* bias, float* y, int m, int n, int k, bool accumulate,
          void* stream) {
  if (k % 8 != 0)
    throw Error("the CUDA GEMM needs k divisible by 8 (got m=" + std::to_string(m) + " n=" + std::to_string(n) +
                " k=" + std::to_string(k) + ")");
  if (m == 0 || n == 0) return;
  if (m <= 16) launch<1, 1, 8>(x, w, bias, y, m, n, k, accumulate, stream);
  else if (m <= 64) launch<4, 2, 2>(x, w, bias, y, m, n, k, accumulate, stream);
  else launch<4, 4, 2>(x, w, bias, y, m, n, k, accumulate, stream);
}

}  // namespace fs::cuda::kernels
