// bf16 GEMM on the tensor cores (mma.sync m16n8k16, fp32 accumulation): y[m, n] = Σ_k x[m, k]·w[n, k].
// Within a 32-wide k block each lane reads 16 bytes (8 consecutive k) of a row; the two mma of the block take the
// same permutation of k for x and w, so the dot product is unchanged. k is cut into fixed slices of 1024 (a function
// of k alone); every output element is ((p0 + p1) + p2) + … where p_s accumulates slice s's k blocks in increasing
// order from 0, two mma per block, in every configuration: the configuration (picked from the shape for speed)
// changes which elements share a warp, which warp sums which slice and how operands reach the registers, never the
// arithmetic of one element. No atomics, no workspace. The Hopper wgmma variants (gemm_wgmma.cuh) keep the slices
// and their order but take 16 consecutive k per tensor-core step, so they round differently: `gemm` never picks them.
#include "backends/cuda/kernels/gemm_stream.cuh"
#include "backends/cuda/kernels/gemm_tiled.cuh"
#include "backends/cuda/kernels/gemm_wgmma.cuh"
#include "backends/cuda/kernels/ops.h"

#include <iterator>

namespace fs::cuda::kernels {

namespace {

using namespace gemm_detail;

// The configurations; all share one arithmetic per element. "stream R×C uU wW": register streaming, R rows × C
// columns per CTA, U k blocks per load group, up to W warps over the k slices.
using Launcher = void (*)(const uint16_t*, const uint16_t*, const float*, float*, int, int, int, bool, void*);
struct Variant {
  Launcher launch;
  const char* name;
  bool gemm_bits = true;  // the arithmetic of `gemm` (mma.sync k blocks), bit for bit
};
constexpr Variant kVariants[] = {
    {launch_stream<1, 1, 4, 16, true, false>, "stream 8x8 u4 w16"},       // 0: up to 8 rows
    {launch_stream<1, 2, 4, 8, false, false>, "stream 16x16 u4 w8"},      // 1: 9…16 rows
    {launch_stream<2, 2, 2, 8, false, true>, "stream 32x16 u2 w8 pipe"},  // 2: 17…32 rows
    {launch_stream<4, 2, 2, 8, false, false>, "stream 64x16 u2 w8"},      // 3: 33…64 rows
    {launch_tiled<4, 4, 2, 4, 2, 3>, "tile 128x128 s3"},                  // 4: more rows (16 warps, 3 stages)
    {launch_wgmma<128, 6>, "wgmma 128x128 s6", false},                    // 5: Hopper TMA + wgmma, persistent
    {launch_wgmma<192, 5>, "wgmma 128x192 s5", false},                    // 6: the same, wider tiles
};

// The variant `gemm` runs for a shape: a pure function of (m, n, k). Weights dominate the traffic up to 64 rows; a
// small weight (n, k ≤ 4096) gains from the narrower row tiles' extra CTAs.
int pick_variant(int m, int n, int k) {
  const bool small = n <= 4096 && k <= 4096;
  if (m <= 8) return 0;
  if (m <= 16) return 1;
  if (m <= 32) return small ? 1 : 2;
  if (m <= 64) return small ? 2 : 3;
  return 4;
}

void check_k(int m, int n, int k) {
  if (k % 8 != 0)
    throw Error("the CUDA GEMM needs k divisible by 8 (got m=" + std::to_string(m) + " n=" + std::to_string(n) +
                " k=" + std::to_string(k) + ")");
}

}  // namespace

int gemm_variants() { return int(std::size(kVariants)); }

const char* gemm_variant_name(int variant) {
  if (variant < 0 || variant >= gemm_variants()) throw Error("no GEMM variant " + std::to_string(variant));
  return kVariants[variant].name;
}

bool gemm_variant_has_gemm_bits(int variant) {
  gemm_variant_name(variant);  // throws for a variant that does not exist
  return kVariants[variant].gemm_bits;
}

void gemm_variant(int variant, const uint16_t* x, const uint16_t* w, const float* bias, float* y, int m, int n, int k,
                  bool accumulate, void* stream) {
  check_k(m, n, k);
  if (variant < 0 || variant >= gemm_variants()) throw Error("no GEMM variant " + std::to_string(variant));
  if (m == 0 || n == 0) return;
  kVariants[variant].launch(x, w, bias, y, m, n, k, accumulate, stream);
}

void gemm(const uint16_t* x, const uint16_t* w, const float* bias, float* y, int m, int n, int k, bool accumulate,
          void* stream) {
  check_k(m, n, k);
  if (m == 0 || n == 0) return;
  kVariants[pick_variant(m, n, k)].launch(x, w, bias, y, m, n, k, accumulate, stream);
}

}  // namespace fs::cuda::kernels
