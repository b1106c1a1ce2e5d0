// bf16 (or f16) GEMM on the tensor cores, fp32 accumulation: y[m, n] = Σ_k x[m, k]·w[n, k]. k is cut into fixed
// slices of 2048 (a function of k alone); every output element is ((p0 + p1) + p2) + … where p_s accumulates slice s
// from 0 in tensor-core steps of 16 consecutive k, in increasing order. `gemm` runs the Hopper wgmma kernels: up to 64
// rows with the weights as wgmma's A operand (gemm_wgmma_rows.cuh), more rows with x as A (gemm_wgmma.cuh); the
// configuration (picked from the shape for speed) changes which elements share a warp and how operands reach the
// tensor cores, never the arithmetic of one element. The mma.sync tile kernel (gemm_tiled.cuh) keeps the slices but
// feeds each step interleaved k (16 bytes per lane), so it rounds differently: a variant for comparison, and k = 0.
#include "backends/cuda/kernels/gemm_tiled.cuh"
#include "backends/cuda/kernels/gemm_wgmma.cuh"
#include "backends/cuda/kernels/gemm_wgmma_rows.cuh"
#include "backends/cuda/kernels/ops.h"

#include <iterator>
#include <utility>

namespace fs::cuda::kernels {

namespace {

using namespace gemm_detail;

// The configurations. "wgmma rows T sS xC": up to T rows, S shared-memory stages, clusters of C CTAs per tile;
// "w128": tiles of 128 columns (two consumer warpgroups); "cN": tiles of N columns (one consumer warpgroup);
// "bB": B boxes of 64 k a stage (each weight row read B·128 bytes at a time).
using Launcher = void (*)(const uint16_t*, const uint16_t*, const GemmOut&, int, int, int, void*);
struct Variant {
  const char* name;
  bool gemm_bits;  // the arithmetic of `gemm` (wgmma steps of 16 consecutive k), bit for bit
};
constexpr Variant kVariants[] = {
    {"tile 128x128 s3", false},               // 0: mma.sync, for comparison
    {"wgmma 128x128 s6", true},               // 1: Hopper TMA + wgmma, persistent
    {"wgmma 128x192 s5", true},               // 2: the same, wider tiles
    {"wgmma rows 8 s12", true},               // 3: weights as A, up to 8 rows
    {"wgmma rows 8 s12 x2", true},            // 4: clusters of 2 CTAs per tile
    {"wgmma rows 16 s12", true},              // 5
    {"wgmma rows 16 s12 x2", true},           // 6: 9…16 rows, few column tiles
    {"wgmma rows 32 s8", true},               // 7: 17…32 rows; 9…16, many tiles
    {"wgmma rows 32 s8 x2", true},            // 8
    {"wgmma rows 64 s8", true},               // 9: 33…64 rows
    {"wgmma rows 64 s8 x2", true},            // 10
    {"wgmma rows 64 s8 w128", true},          // 11: 33…64 rows, many tiles
    {"wgmma rows 64 s8 w128 x2", true},       // 12: 33…64 rows, see pick_variant
    {"wgmma rows 32 s8 w128 x2", true},       // 13: 9…32 rows, see pick_variant
    {"wgmma rows 8 s4 b4", true},             // 14: up to 8 rows, 73…96 tiles
    {"wgmma rows 8 s8 c192", true},           // 15: up to 8 rows, many tiles
    {"wgmma rows 8 s6 c256", true},           // 16
    {"wgmma rows 16 s4 b4", true},            // 17: 9…16 rows, up to 96 tiles
    {"wgmma rows 16 s8 c192", true},          // 18: 9…16 rows, many tiles
    {"wgmma rows 16 s6 c256", true},          // 19
    {"wgmma rows 32 s6 b2", true},            // 20: 17…32 rows, 73…96 tiles
    {"wgmma rows 32 s6 c192", true},          // 21: 17…32 rows, uneven waves
    {"wgmma 128x256 s3", true},               // 22: x as A, widest tiles
    {"wgmma rows 64 s6 b2", true},            // 23: 33…64 rows, 89…255 tiles
    {"wgmma rows 64 s6 b2 x2", true},         // 24: 33…64 rows, up to 72 tiles
    {"wgmma rows 32 s6 b2 x2", true},         // 25: 9…32 rows, up to 72 tiles
    {"wgmma rows 16 s6 w128 c256", true},     // 26: 9…16 rows, 256-column tiles filling their waves
};
// Each variant's launcher, in kVariants' order, for bf16 halves or (F16) f16 halves.
template <bool F16>
constexpr Launcher kLaunchers[] = {
    launch_tiled<F16, 4, 4, 2, 4, 2, 3>,
    launch_wgmma<F16, 128, 6>,
    launch_wgmma<F16, 192, 5>,
    launch_wgmma_rows<F16, 8, 12, 1>,
    launch_wgmma_rows<F16, 8, 12, 2>,
    launch_wgmma_rows<F16, 16, 12, 1>,
    launch_wgmma_rows<F16, 16, 12, 2>,
    launch_wgmma_rows<F16, 32, 8, 1>,
    launch_wgmma_rows<F16, 32, 8, 2>,
    launch_wgmma_rows<F16, 64, 8, 1>,
    launch_wgmma_rows<F16, 64, 8, 2>,
    launch_wgmma_rows<F16, 64, 8, 1, 2>,
    launch_wgmma_rows<F16, 64, 8, 2, 2>,
    launch_wgmma_rows<F16, 32, 8, 2, 2>,
    launch_wgmma_rows<F16, 8, 4, 1, 1, 4>,
    launch_wgmma_rows<F16, 8, 8, 1, 1, 1, 3>,
    launch_wgmma_rows<F16, 8, 6, 1, 1, 1, 4>,
    launch_wgmma_rows<F16, 16, 4, 1, 1, 4>,
    launch_wgmma_rows<F16, 16, 8, 1, 1, 1, 3>,
    launch_wgmma_rows<F16, 16, 6, 1, 1, 1, 4>,
    launch_wgmma_rows<F16, 32, 6, 1, 1, 2>,
    launch_wgmma_rows<F16, 32, 6, 1, 1, 1, 3>,
    launch_wgmma<F16, 256, 3>,
    launch_wgmma_rows<F16, 64, 6, 1, 1, 2>,
    launch_wgmma_rows<F16, 64, 6, 2, 1, 2>,
    launch_wgmma_rows<F16, 32, 6, 2, 1, 2>,
    launch_wgmma_rows<F16, 16, 6, 1, 2, 1, 2>,
};
static_assert(std::size(kLaunchers<false>) == std::size(kVariants));

Launcher launcher(int variant, HalfType halves) {
  return halves == HalfType::f16 ? kLaunchers<true>[variant] : kLaunchers<false>[variant];
}

// The persistent waves of `tiles` tiles on the CTAs variant W keeps resident: {waves, resident CTAs}.
template <class W>
std::pair<int, int> waves_of(int tiles) {
  const int resident = multiprocessor_count("the wgmma GEMM") * W::per_multiprocessor();
  return {(tiles + resident - 1) / resident, resident};
}

// Whether those waves leave most of their last wave idle (544 tiles on 264 CTAs: three waves, the last 6% full).
template <class W>
bool uneven_waves(int tiles) {
  const auto [waves, resident] = waves_of<W>(tiles);
  return waves > 1 && 4 * tiles < 3 * waves * resident;
}

// Whether they fill at least two thirds of their waves.
template <class W>
bool full_waves(int tiles) {
  const auto [waves, resident] = waves_of<W>(tiles);
  return 3 * tiles >= 2 * waves * resident;
}

// Above 64 rows: the x-as-A tile whose persistent waves (one CTA a multiprocessor) cost least, a wave costing its
// tile width times the time a tile of that width takes per column (the 192-wide tile's 5 stages stream best; o and
// down at 4096 columns: 2 waves of 256 against 3 of 192).
int pick_many_rows(int m, int n) {
  struct Tile {
    int variant, cols, cost;  // cost: time per column, per cent of the 192-wide tile's
  };
  constexpr Tile kTiles[] = {{2, 192, 100}, {22, 256, 109}, {1, 128, 114}};
  const int sms = multiprocessor_count("the wgmma GEMM"), m_tiles = (m + 127) / 128;
  int best = 0;
  int64_t best_cost = 0;
  for (const Tile& t : kTiles) {
    const int64_t waves = (int64_t(m_tiles) * ((n + t.cols - 1) / t.cols) + sms - 1) / sms;
    const int64_t cost = waves * t.cols * t.cost;
    if (best == 0 || cost < best_cost) best = t.variant, best_cost = cost;
  }
  return best;
}

// The variant `gemm` runs for a shape: a function of (m, n, k) and the multiprocessor count alone.
int pick_variant(int m, int n, int k) {
  // Few column tiles (about half the multiprocessors or fewer) go to clusters of 2 CTAs, each on half the slices
  // (above 8 rows reading 256 bytes of a weight row at a time); up to 96 tiles at 32 rows or fewer, and up to 255
  // above 32 rows, to one CTA a tile reading 256 or 512 bytes of a weight row at a time. Many tiles at 16 rows or
  // fewer go to tiles of 256 or 192 columns (one CTA a multiprocessor, bigger copies) when those fill two thirds of
  // their waves; at 9…16 rows a 256-column tile has two consumer warpgroups. Slightly more tiles (73…88: a hidden
  // size of 5120) go to 128-column tiles in clusters of 2 above 32 rows, as do tiles whose persistent waves come out
  // uneven: both halve a CTA's k and read the rows from L2 once per 128 columns.
  const int tiles = (n + 63) / 64;
  const bool split = tiles <= 72, wide_split = !split && tiles <= 88, some = tiles <= 96;
  if (m > 64) return pick_many_rows(m, n);
  // 256- and 192-column tiles filling their waves (one CTA a multiprocessor at 8, 16 and 32 rows alike).
  auto c256 = [n] { return full_waves<WgmmaRows<16, 6, 1, 1, 1, 4>>((n + 255) / 256); };
  auto c192 = [n] { return full_waves<WgmmaRows<16, 8, 1, 1, 1, 3>>((n + 191) / 192); };
  if (m <= 8) {
    if (split) return 4;
    if (some) return 14;
    if (c256()) return 16;
    if (c192()) return 15;
    return uneven_waves<WgmmaRows<8, 12, 1>>(tiles) ? 13 : 3;
  }
  if (m <= 16) {
    if (split) return 25;
    if (some) return 17;
    if (c256()) return 26;
    if (c192()) return 18;
    return uneven_waves<WgmmaRows<32, 8, 1>>(tiles) ? 13 : 7;
  }
  if (m <= 32) {
    if (split) return 25;
    if (some) return 20;
    if (uneven_waves<WgmmaRows<32, 8, 1>>(tiles)) return c192() ? 21 : 13;
    return 7;
  }
  if (split) return 24;
  if (wide_split) return 12;
  // 33…64 rows over many column tiles: 128-column tiles read the rows from L2 half as often.
  if (tiles >= 256) return uneven_waves<WgmmaRows<64, 8, 1, 2>>((tiles + 1) / 2) ? 12 : 11;
  return 23;
}

void check_k(int m, int n, int k) {
  if (k % 8 != 0)
    throw Error("the CUDA GEMM needs k divisible by 8 (got m=" + std::to_string(m) + " n=" + std::to_string(n) +
                " k=" + std::to_string(k) + ")");
}

void check_swiglu(int m, int ffn, int k) {
  check_k(m, 2 * ffn, k);
  if (ffn <= 0 || ffn % kGateUpBlock != 0 || k == 0)
    throw Error("the CUDA gate|up GEMM needs an FFN width divisible by " + std::to_string(kGateUpBlock) +
                " and k > 0 (got ffn=" + std::to_string(ffn) + " k=" + std::to_string(k) + ")");
}

}  // namespace

int gemm_variants() { return int(std::size(kVariants)); }

int gemm_picked_variant(int m, int n, int k) { return pick_variant(m, n, k); }

const char* gemm_variant_name(int variant) {
  if (variant < 0 || variant >= gemm_variants()) throw Error("no GEMM variant " + std::to_string(variant));
  return kVariants[variant].name;
}

bool gemm_variant_has_gemm_bits(int variant) {
  gemm_variant_name(variant);  // throws for a variant that does not exist
  return kVariants[variant].gemm_bits;
}

void gemm_variant(int variant, const uint16_t* x, const uint16_t* w, const float* bias, float* y, int m, int n, int k,
                  bool accumulate, void* stream, HalfType halves) {
  check_k(m, n, k);
  if (variant < 0 || variant >= gemm_variants()) throw Error("no GEMM variant " + std::to_string(variant));
  if (m == 0 || n == 0) return;
  launcher(variant, halves)(x, w, GemmOut{bias, y, accumulate, nullptr}, m, n, k, stream);
}

void gemm(const uint16_t* x, const uint16_t* w, const float* bias, float* y, int m, int n, int k, bool accumulate,
          void* stream, HalfType halves) {
  check_k(m, n, k);
  if (m == 0 || n == 0) return;
  launcher(pick_variant(m, n, k), halves)(x, w, GemmOut{bias, y, accumulate, nullptr}, m, n, k, stream);
}

void gemm_swiglu_variant(int variant, const uint16_t* x, const uint16_t* w, uint16_t* act, int m, int ffn, int k,
                         void* stream, HalfType halves) {
  check_swiglu(m, ffn, k);
  if (!gemm_variant_has_gemm_bits(variant))
    throw Error(std::string("GEMM variant ") + kVariants[variant].name + " has no SwiGLU epilogue");
  if (m == 0) return;
  launcher(variant, halves)(x, w, GemmOut{nullptr, nullptr, false, act}, m, 2 * ffn, k, stream);
}

void gemm_swiglu(const uint16_t* x, const uint16_t* w, uint16_t* act, int m, int ffn, int k, void* stream,
                 HalfType halves) {
  check_swiglu(m, ffn, k);
  if (m == 0) return;
  launcher(pick_variant(m, 2 * ffn, k), halves)(x, w, GemmOut{nullptr, nullptr, false, act}, m, 2 * ffn, k, stream);
}

}  // namespace fs::cuda::kernels
