#pragma once
// Host entry points of the Gated DeltaNet kernels (CPU references: models/gated_deltanet.h). Same conventions as
// ops.h: device pointers, work queued on `stream`, fs::Error on a failed launch, and each sequence's (or row's) bits
// depend only on its own inputs and state, never on the batch around it. The recurrence runs token by token in fp32,
// so a sequence gives the same bits whether its rows come in one call or several.
#include <cstdint>

#include "models/deltanet_shape.h"

namespace fs::cuda::kernels {

// One sequence's consecutive rows in a forward pass and where its state for this layer lives.
struct DeltaNetSeq {
  int first_row = 0;  // its rows: first_row .. first_row + rows − 1, in token order
  int rows = 0;
  int64_t state = 0;  // floats from DeltaNetBatch::states to its layer state (conv tail, then delta state)
  int fresh = 0;      // nonzero: start from a zero state (what is stored there is ignored, then overwritten)
  int first_tap = 0;  // its snapshots: taps[first_tap .. first_tap + tap_count), in ascending after_rows
  int tap_count = 0;
  int chunked = 0;    // nonzero: prompt rows from a multiple of 16 positions, for deltanet_recurrence_chunked
};

// A copy of a sequence's layer state after its first `after_rows` rows (1..rows), laid out as the state.
struct DeltaNetSnapshot {
  int after_rows = 0;
  int64_t dest = 0;  // floats from DeltaNetBatch::snapshots to the copy
};

// The sequences of one call; arrays in device memory. Sequences in ascending first_row, rows not overlapping.
struct DeltaNetBatch {
  const DeltaNetSeq* seqs = nullptr;
  int count = 0;  // number of sequences
  const DeltaNetSnapshot* taps = nullptr;
  float* states = nullptr;     // this layer's state base (the state buffer + the layer's state offset)
  float* snapshots = nullptr;  // this layer's snapshot base (the snapshot buffer + the layer's state offset)
};

// Causal depthwise conv + SiLU (weight [conv_channels, conv_kernel ≤ 8]) over each sequence's rows of `in` (rows of
// in_stride floats, q|k|v in the first conv_channels columns) → out [T, conv_channels], continuing from its conv
// tail (zeros when fresh); then the tail is updated and each tap gets the tail after its rows. Other rows untouched.
void deltanet_conv(const float* in, int in_stride, int T, const float* weight, const DeltaNetShape& shape,
                   const DeltaNetBatch& batch, float* out, void* stream);

// The q and k channels of conv [T, conv_channels] L2-normalised in place (x / sqrt(Σx² + 1e-6)), q also scaled by
// 1/sqrt(key_dim): the form the recurrence reads.
void deltanet_normalize(float* conv, int T, const DeltaNetShape& shape, void* stream);

// deltanet_conv then deltanet_normalize on its output, the same bits; when every sequence has one row (T equals
// the sequence count: decode rounds) one kernel does both.
void deltanet_conv_normalized(const float* in, int in_stride, int T, const float* weight, const DeltaNetShape& shape,
                              const DeltaNetBatch& batch, float* out, void* stream);

// The gated delta rule per (sequence, value head), token by token: conv [T, conv_channels] (the conv output, q and k
// normalised), b and a at [r·ab_stride + head], a_log and dt_bias [value_heads] → out [T, value_channels]; the delta
// state follows the conv tail (zero when fresh) and is updated; taps get it after their rows. key_dim ≤ 128.
// Sequences marked chunked are left to deltanet_recurrence_chunked.
void deltanet_recurrence(const float* conv, int T, const float* b, const float* a, int ab_stride, const float* a_log,
                         const float* dt_bias, const DeltaNetShape& shape, const DeltaNetBatch& batch, float* out,
                         void* stream);

// deltanet_recurrence in chunks of 16 rows from each sequence's first row on tensor cores (three TF32
// products a pair unless one_pass), for the batch's sequences marked chunked (deltanet_recurrence takes the others);
// shapes deltanet_chunked_takes; taps only at chunk ends (multiples of 16 rows or a sequence's last row).
// `chunked`: how many of the batch's sequences are marked (the kernels' blocks cover only those). `prep` holds
// deltanet_chunked_prep_floats(T, chunked, shape) floats of scratch; parts: 1 its kernel, 2 the state's, 3 both.
void deltanet_recurrence_chunked(const float* conv, int T, const float* b, const float* a, int ab_stride,
                                 const float* a_log, const float* dt_bias, const DeltaNetShape& shape,
                                 const DeltaNetBatch& batch, int chunked, float* prep, float* out, bool one_pass,
                                 int parts, void* stream);
size_t deltanet_chunked_prep_floats(int T, int sequences, const DeltaNetShape& shape);
// Whether deltanet_recurrence_chunked takes the shape: key_dim 16, 32, 64 or 128, value_dim a multiple of 16, up to
// 8 value heads a key head.
bool deltanet_chunked_takes(const DeltaNetShape& shape);

// Per row and value head: RMSNorm of core [T, value_channels] over value_dim (plain weight `norm`, shape.eps) ×
// SiLU(z[r·z_stride + channel]) → bf16 out [T, value_channels].
void deltanet_gated_norm(const float* core, const float* z, int z_stride, const float* norm, int T,
                         const DeltaNetShape& shape, uint16_t* out, void* stream);

}  // namespace fs::cuda::kernels
