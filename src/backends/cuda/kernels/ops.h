#pragma once
// Host entry points of the CUDA kernels. bf16 tensors are uint16_t storage, accumulation is fp32, and every
// kernel computes each row from that row's own sizes only, so a row's bits never depend on the batch around it.
// Pointers are device addresses; every call queues work on `stream` (a CUstream passed as void*, because nvcc
// declares its own CUstream_st before any header) and throws fs::Error if the launch fails.
#include <cstddef>
#include <cstdint>

#include "backends/cuda/host/driver_types.h"

namespace fs::cuda::kernels {

// out[r, :] = table[ids[r], :] as floats.
void embedding(const uint16_t* table, const int32_t* ids, int rows, int dim, float* out, void* stream);

// The 16-bit float type of a GEMM's x and w: bf16, or f16 (three more bits of mantissa, magnitudes up to 65504).
enum class HalfType { bf16, f16 };

// y[r] = weight · x[src(r)] / sqrt(mean(x[src(r)]²) + eps), src(r) = gather ? gather[r] : r; bf16 or f32 out.
void rmsnorm_bf16(const float* x, const int32_t* gather, const float* weight, int rows, int dim, float eps,
                  uint16_t* y, void* stream);
// The same with halves of either type out (rmsnorm_bf16's bits for bf16).
void rmsnorm_halves(HalfType halves, const float* x, const int32_t* gather, const float* weight, int rows, int dim,
                    float eps, uint16_t* y, void* stream);
void rmsnorm_f32(const float* x, const int32_t* gather, const float* weight, int rows, int dim, float eps, float* y,
                 void* stream);

// Where the new rows' keys and values go and what each row attends to.
struct PagedKv {
  uint16_t* keys = nullptr;    // this layer's keys, [slots, kv_heads * head_dim] bf16
  uint16_t* values = nullptr;  // this layer's values, same layout
  const int32_t* row_slot = nullptr;    // slot (page * page_tokens + position % page_tokens) of each new row
  const int32_t* row_keys = nullptr;    // keys each row attends to (its position + 1)
  const int32_t* row_table = nullptr;   // offset of each row's page table in `pages`
  const int32_t* pages = nullptr;       // concatenated page tables
  int page_tokens = 0;
  // Tree rows (speculative decoding), or null for none: row_tree[r] = the committed keys + 1 of a tree row (0 for
  // others) and row_parent[r] its parent row in the call (-1: the committed keys). A tree row's keys past the
  // committed ones are its ancestors' and its own, root first, read from those rows' slots.
  const int32_t* row_tree = nullptr;
  const int32_t* row_parent = nullptr;
};

struct HeadShape {
  int heads = 0;
  int kv_heads = 0;
  int head_dim = 0;
};

// Splits qkv[rows, (heads + 2·kv_heads)·head_dim] into q (f32 [rows, heads, head_dim]) and the cache: optional
// per-head RMSNorm on q and k (q_norm/k_norm null → none), rotate-half RoPE with cos/sin[rows, head_dim/2] on q and k.
void qkv_rope_store(const float* qkv, int rows, HeadShape shape, const float* q_norm, const float* k_norm, float eps,
                    const float* cos, const float* sin, const PagedKv& kv, float* q, void* stream);

// Keys per attention chunk, at absolute positions: a row's chunks are computed apart and combined in order.
inline constexpr int kSplitKeys = 1024;
// Most CTAs that share one row's chunks.
inline constexpr int kMaxSplitWorkers = 16;

// Scratch that lets calls of up to 64 rows spread a row's chunks over several CTAs: `records` holds
// `record_capacity` chunk states of heads·(head_dim + 2) floats, `counters` 64·heads ints that start at zero (and
// are left at zero). Without it every row's chunks run one after another in one CTA; the bits are the same.
struct AttentionSplit {
  float* records = nullptr;
  int record_capacity = 0;
  int32_t* counters = nullptr;
};

// Floats of one chunk record: per head of the row, its head_dim outputs, then its max and sum.
inline size_t attention_record_floats(HeadShape shape) { return size_t(shape.heads) * size_t(shape.head_dim + 2); }

// Causal GQA attention of each row over its own keys 0..row_keys-1; q f32 [rows, heads, hd], out bf16
// [rows, heads·hd]. head_dim a multiple of 16 up to 256: tensor cores (q and softmax weights rounded to bf16, f32
// accumulation), keys in blocks of 64 from position 0, each block split over 4 warps with their states merged in
// fixed order; other head dims: `plain_attention`. A row's bits depend only on q[r], its keys and row_keys[r]. No
// allocation, no host read of device data; the launch depends on rows and shape only. With `gate` (f32, out's
// layout; Qwen3.5's gated attention) each output element is multiplied by sigmoid(gate) before its one rounding.
// Keys come in chunks of kSplitKeys (see AttentionSplit); the q of a row with more than one chunk is overwritten.
// In calls of over 64 rows the first `lone_rows` (a mixed pass's decode rows) run one per CTA as in small calls.
void attention(float* q, int rows, HeadShape shape, const PagedKv& kv, float scale, const float* gate,
               const AttentionSplit& split, uint16_t* out, void* stream, int lone_rows = 0);
// The plain kernel (one warp per (row, head), f32 throughout), for any even head_dim up to 256.
void plain_attention(const float* q, int rows, HeadShape shape, const PagedKv& kv, float scale, const float* gate,
                     uint16_t* out, void* stream);

// out[r, f] = silu(gu[r, f]) · gu[r, F + f] as bf16, gu f32 [rows, 2F].
void swiglu(const float* gu, int rows, int ffn, uint16_t* out, void* stream);

// y[m, n] (=|+=) Σ_k x[m, k]·w[n, k] (+ bias[n]); x, w row-major halves of one type, y f32. Every element is the
// sum, in order, of the partial sums of fixed k slices of 2048 (each slice's tensor-core steps of 16 in increasing
// order), whatever m is.
// k must be a multiple of 8 and x, w 16-byte aligned. The launch depends on (m, n, k) and the multiprocessor count.
void gemm(const uint16_t* x, const uint16_t* w, const float* bias, float* y, int m, int n, int k, bool accumulate,
          void* stream, HalfType halves = HalfType::bf16);

// The same GEMM with its configuration forced (0 ≤ variant < gemm_variants()), for tests and benchmarks. A variant
// with gemm_variant_has_gemm_bits gives the same bits as `gemm` and differs only in speed; the others (the mma.sync
// kernels, whose tensor-core steps take interleaved k where wgmma's take 16 consecutive k) sum the same k slices in
// the same order, so a row's bits still never depend on the other rows, but they round differently.
int gemm_variants();
const char* gemm_variant_name(int variant);
bool gemm_variant_has_gemm_bits(int variant);
int gemm_picked_variant(int m, int n, int k);  // the variant `gemm` runs for the shape
void gemm_variant(int variant, const uint16_t* x, const uint16_t* w, const float* bias, float* y, int m, int n, int k,
                  bool accumulate, void* stream, HalfType halves = HalfType::bf16);

// act[m, f] = swiglu(g, u) as bf16 for the GEMM's gate g = y[m, f] and up u = y[m, ffn + f], w = [gate; up]
// [2 ffn, k] (x and w halves of one type): the bits of `gemm` then `swiglu`, without the f32 [m, 2 ffn] between
// them. The kernel reads the weights' rows gate/up interleaved in blocks of 8 so that one thread holds both halves
// of a pair; ffn must be a multiple of 8 and k positive.
void gemm_swiglu(const uint16_t* x, const uint16_t* w, uint16_t* act, int m, int ffn, int k, void* stream,
                 HalfType halves = HalfType::bf16);
// The same with a configuration forced; only variants with gemm_variant_has_gemm_bits have the epilogue.
void gemm_swiglu_variant(int variant, const uint16_t* x, const uint16_t* w, uint16_t* act, int m, int ffn, int k,
                         void* stream, HalfType halves = HalfType::bf16);

}  // namespace fs::cuda::kernels
