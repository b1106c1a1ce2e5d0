#include <algorithm>
#include <cmath>
#include <cstring>

#include "backends/cpu/matmul_kernels.h"

// GCC 12 warns about the undefined vectors inside its own AVX-512 intrinsics.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

#define FS_AVX512 __attribute__((target("avx512f")))

namespace fs::cpu {

namespace {

// 16 weights as floats: the two 8-lane halves the AVX2 kernel uses, in one register.
FS_AVX512 inline __m512 load16(const uint16_t* p) {
  const __m256i raw = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(raw), 16));
}
FS_AVX512 inline __m512 load16(const float* p) { return _mm512_loadu_ps(p); }

inline float to_f32(uint16_t v) { return bf16_to_f32(v); }
inline float to_f32(float v) { return v; }

// How far ahead in the packed weights a tile of kFetchRows or more input rows fetches (bytes): panels lie one after
// another. Tiles of fewer rows keep up with the hardware's own prefetch and only lose by fetching.
constexpr int kFetchAhead = 4096;
constexpr int kFetchRows = 3;

// Where the weights of one panel of `rows` packed rows lie (the layout pack_panel writes). bf16 weights go in pairs
// of 16-column blocks: 32-bit word j of a row's 64 bytes holds column k + j in its low half and k + 16 + j in its high
// half, so one shift and one mask give the two blocks as floats in the lanes of columns k + j and k + 16 + j.
template <class W>  // const for reading, mutable for packing
struct Panel {
  W* base;   // the panel's first element
  int rows;  // kPanelRows, or fewer in a matrix's last panel
  int K;
  // Columns packed in pairs of blocks (bf16 only), then one block of 16 when the pairs leave 16 or more.
  int paired() const { return sizeof(W) == 2 ? K / 32 * 32 : 0; }
  int body() const { return K / 16 * 16; }
  // Row b's 32 weights of columns [k, k + 32), k < paired().
  W* pair(int b, int k) const { return base + size_t(k) * size_t(rows) + size_t(b) * 32; }
  // Row b's 16 weights of columns [k, k + 16), paired() ≤ k < body().
  W* block(int b, int k) const { return base + size_t(k) * size_t(rows) + size_t(b) * 16; }
  // Row b's last K % 16 weights.
  W* tail(int b) const { return base + size_t(body()) * size_t(rows) + size_t(b) * size_t(K - body()); }
};

// A pair's first block (columns k + j in lane j) and second block (k + 16 + j) as floats.
FS_AVX512 inline __m512 pair_low(__m512i raw) { return _mm512_castsi512_ps(_mm512_slli_epi32(raw, 16)); }
FS_AVX512 inline __m512 pair_high(__m512i raw) {
  return _mm512_castsi512_ps(_mm512_and_si512(raw, _mm512_set1_epi32(int(0xFFFF0000u))));
}

// Each of 16 accumulators' sums (its low and high halves added, then hsum8) at once, with those adds on the same
// lanes: lane 4·r + b holds the sum of a[4·r + b].
FS_AVX512 inline __m512 sums16(const __m512 (&a)[16]) {
  __m512 z[8], q[4];
  for (int p = 0; p < 8; ++p)  // [low + high of a[2p] | of a[2p + 1]]
    z[p] = _mm512_add_ps(_mm512_shuffle_f32x4(a[2 * p], a[2 * p + 1], _MM_SHUFFLE(1, 0, 1, 0)),
                         _mm512_shuffle_f32x4(a[2 * p], a[2 * p + 1], _MM_SHUFFLE(3, 2, 3, 2)));
  for (int p = 0; p < 4; ++p)  // 128-bit block c: lanes i + (i + 4) of a[4p + c]'s 8
    q[p] = _mm512_add_ps(_mm512_shuffle_f32x4(z[2 * p], z[2 * p + 1], _MM_SHUFFLE(2, 0, 2, 0)),
                         _mm512_shuffle_f32x4(z[2 * p], z[2 * p + 1], _MM_SHUFFLE(3, 1, 3, 1)));
  // Block c: (0 + 2, 1 + 3) of a[c] and a[4 + c], then of a[8 + c] and a[12 + c].
  const __m512 w0 = _mm512_add_ps(_mm512_shuffle_ps(q[0], q[1], _MM_SHUFFLE(1, 0, 1, 0)),
                                  _mm512_shuffle_ps(q[0], q[1], _MM_SHUFFLE(3, 2, 3, 2)));
  const __m512 w1 = _mm512_add_ps(_mm512_shuffle_ps(q[2], q[3], _MM_SHUFFLE(1, 0, 1, 0)),
                                  _mm512_shuffle_ps(q[2], q[3], _MM_SHUFFLE(3, 2, 3, 2)));
  // Block c: the sums of a[c], a[4 + c], a[8 + c], a[12 + c]; lane 4c + m holds a[4m + c]'s.
  const __m512 t = _mm512_add_ps(_mm512_shuffle_ps(w0, w1, _MM_SHUFFLE(2, 0, 2, 0)),
                                 _mm512_shuffle_ps(w0, w1, _MM_SHUFFLE(3, 1, 3, 1)));
  return _mm512_permutexvar_ps(_mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15), t);
}

// R input rows against panel rows [b0, b0 + NB): R · NB accumulators (at most 24, beside R inputs, of 32 registers)
// whose low and high halves are the AVX2 kernel's acc0 and acc1, so every output has its bits whatever R and NB are.
// kPairsOnly: K is a multiple of 32 and bf16, all in pairs of blocks (no block of 16, no tail), which lets the sums stay
// in registers from the first step to the last.
template <int R, int NB, bool kPairsOnly, class W>
FS_AVX512 void tile(const float* x, const Panel<W>& p, int b0, float* y, size_t y_stride) {
  const int K = p.K, body = kPairsOnly ? K : p.body();
  __m512 acc[R][NB];
  for (int r = 0; r < R; ++r)
    for (int b = 0; b < NB; ++b) acc[r][b] = _mm512_setzero_ps();
  const int paired = kPairsOnly ? K : p.paired();
  for (int k = 0; k < paired; k += 32) {
    if (R >= kFetchRows && b0 == 0) {  // the panel's first tile fetches for the others too
      const char* ahead = reinterpret_cast<const char*>(p.pair(0, k)) + kFetchAhead;
      for (int j = 0; j < (kPairsOnly ? kPanelRows : p.rows) * 64; j += 64) _mm_prefetch(ahead + j, _MM_HINT_T0);
    }
    __m512i raw[NB];
    for (int b = 0; b < NB; ++b) raw[b] = _mm512_loadu_si512(p.pair(b0 + b, k));
    __m512 xv[R];
    for (int r = 0; r < R; ++r) xv[r] = _mm512_loadu_ps(x + size_t(r) * size_t(K) + k);
    for (int b = 0; b < NB; ++b) {
      const __m512 wv = pair_low(raw[b]);
      for (int r = 0; r < R; ++r) acc[r][b] = _mm512_fmadd_ps(xv[r], wv, acc[r][b]);
    }
    for (int r = 0; r < R; ++r) xv[r] = _mm512_loadu_ps(x + size_t(r) * size_t(K) + k + 16);
    for (int b = 0; b < NB; ++b) {
      const __m512 wv = pair_high(raw[b]);
      for (int r = 0; r < R; ++r) acc[r][b] = _mm512_fmadd_ps(xv[r], wv, acc[r][b]);
    }
  }
  for (int k = paired; k < body; k += 16) {
    __m512 xv[R];
    for (int r = 0; r < R; ++r) xv[r] = _mm512_loadu_ps(x + size_t(r) * size_t(K) + k);
    if (R >= kFetchRows && b0 == 0) {
      const char* ahead = reinterpret_cast<const char*>(p.block(0, k)) + kFetchAhead;
      for (int j = 0; j < p.rows * 16 * int(sizeof(W)); j += 64) _mm_prefetch(ahead + j, _MM_HINT_T0);
    }
    for (int b = 0; b < NB; ++b) {
      const __m512 wv = load16(p.block(b0 + b, k));
      for (int r = 0; r < R; ++r) acc[r][b] = _mm512_fmadd_ps(xv[r], wv, acc[r][b]);
    }
  }
  if (NB == 4 && body == K) {  // no tail: four rows' sums at a time
    for (int r0 = 0; r0 < R; r0 += 4) {
      __m512 a[16];
      for (int i = 0; i < 16; ++i) a[i] = _mm512_setzero_ps();
      for (int r = r0; r < R && r < r0 + 4; ++r)
        for (int b = 0; b < NB; ++b) a[4 * (r - r0) + b] = acc[r][b];
      alignas(64) float sums[16];
      _mm512_store_ps(sums, sums16(a));
      for (int r = r0; r < R && r < r0 + 4; ++r)
        std::memcpy(y + size_t(r) * y_stride, sums + 4 * (r - r0), NB * sizeof(float));
    }
    return;
  }
  for (int r = 0; r < R; ++r)
    for (int b = 0; b < NB; ++b) {
      const __m256 lo = _mm512_castps512_ps256(acc[r][b]);
      const __m256 hi = _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(acc[r][b]), 1));
      float s = hsum8(_mm256_add_ps(lo, hi));
      const float* xr = x + size_t(r) * size_t(K) + body;
      const W* wt = p.tail(b0 + b);
      for (int t = 0; t < K - body; ++t) s = std::fma(xr[t], to_f32(wt[t]), s);
      y[size_t(r) * y_stride + size_t(b)] = s;
    }
}

// Input rows that go through a block of panels together, of `left` rows: up to 6 at once, else groups of 4 (more
// rows' inputs would crowd the weights out of the first-level cache).
int rows_per_group(int left) { return left <= 6 ? left : 4; }

constexpr size_t kPanelsPerBlock = 8;

// Rows [0, R) of x against columns [n0, n1) of one panel that starts at column `first`: a whole panel in one tile,
// else a tile per column.
template <int R, class W>
FS_AVX512 void panel_rows(const float* x, const Panel<W>& p, size_t first, size_t n0, size_t n1, float* y, size_t N) {
  if (p.rows == kPanelRows && n0 == first && n1 == first + kPanelRows) {
    if (p.paired() == p.K) return tile<R, kPanelRows, true>(x, p, 0, y + first, N);
    return tile<R, kPanelRows, false>(x, p, 0, y + first, N);
  }
  for (size_t n = n0; n < n1; ++n) tile<R, 1, false>(x, p, int(n - first), y + n, N);
}

// Columns [begin, end) for all rows: blocks of panels, and in each block every group of rows in turn.
template <class W>
FS_AVX512 void range(const float* x, int rows, const W* packed, int K, size_t N, size_t begin, size_t end, float* y) {
  const size_t P = kPanelRows;
  for (size_t block = begin / P * P; block < end; block += P * kPanelsPerBlock) {
    for (int m = 0, group = 0; m < rows; m += group) {
      group = rows_per_group(rows - m);
      const float* xm = x + size_t(m) * size_t(K);
      float* ym = y + size_t(m) * N;
      for (size_t first = block; first < std::min(end, block + P * kPanelsPerBlock); first += P) {
        const Panel<const W> p{packed + first * size_t(K), int(std::min(P, N - first)), K};
        const size_t n0 = std::max(begin, first), n1 = std::min(end, first + size_t(p.rows));
        switch (group) {
          case 1: panel_rows<1>(xm, p, first, n0, n1, ym, N); break;
          case 2: panel_rows<2>(xm, p, first, n0, n1, ym, N); break;
          case 3: panel_rows<3>(xm, p, first, n0, n1, ym, N); break;
          case 4: panel_rows<4>(xm, p, first, n0, n1, ym, N); break;
          case 5: panel_rows<5>(xm, p, first, n0, n1, ym, N); break;
          default: panel_rows<6>(xm, p, first, n0, n1, ym, N); break;
        }
      }
    }
  }
}

// One panel of `rows` weight rows from row-major `src` into the packed layout Panel reads.
template <class W>
void pack_panel(const W* src, int rows, int K, W* dst) {
  const Panel<W> p{dst, rows, K};
  const int paired = p.paired(), body = p.body();
  for (int k = 0; k < paired; k += 32)
    for (int b = 0; b < rows; ++b) {
      W* out = p.pair(b, k);
      for (int j = 0; j < 16; ++j) {
        out[2 * j] = src[size_t(b) * K + k + j];
        out[2 * j + 1] = src[size_t(b) * K + k + 16 + j];
      }
    }
  for (int k = paired; k < body; k += 16)
    for (int b = 0; b < rows; ++b) std::memcpy(p.block(b, k), src + size_t(b) * K + k, 16 * sizeof(W));
  for (int b = 0; b < rows; ++b)
    std::memcpy(p.tail(b), src + size_t(b) * K + body, size_t(K - body) * sizeof(W));
}

template <class W>
void pack_all(const W* src, size_t N, int K, W* dst) {
  for (size_t first = 0; first < N; first += kPanelRows)
    pack_panel(src + first * size_t(K), int(std::min(size_t(kPanelRows), N - first)), K, dst + first * size_t(K));
}

}  // namespace

void matmul_range_avx512(const float* x, int rows, const WeightMatrix& w, size_t begin, size_t end, float* y) {
  if (w.dtype == DType::BF16)
    range(x, rows, reinterpret_cast<const uint16_t*>(w.packed.get()), w.cols, size_t(w.rows), begin, end, y);
  else
    range(x, rows, reinterpret_cast<const float*>(w.packed.get()), w.cols, size_t(w.rows), begin, end, y);
}

void pack_rows(const WeightMatrix& w, uint8_t* dst) {
  if (w.dtype == DType::BF16)
    pack_all(static_cast<const uint16_t*>(w.data), size_t(w.rows), w.cols, reinterpret_cast<uint16_t*>(dst));
  else
    pack_all(static_cast<const float*>(w.data), size_t(w.rows), w.cols, reinterpret_cast<float*>(dst));
}

bool avx512_available() {
  static const bool yes = __builtin_cpu_supports("avx512f");
  return yes;
}

}  // namespace fs::cpu
