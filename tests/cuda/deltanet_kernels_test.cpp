// The Gated DeltaNet kernels (conv step, delta rule, gated output norm) against the CPU layer's steps on random
// inputs, and their batch invariance: a sequence alone == beside others and chunked == whole, bit for bit.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

#include "backends/cuda/kernels/deltanet_ops.h"
#include "core/dtype.h"
#include "gpu_fixture.h"
#include "models/gated_deltanet.h"
#include "support/fixtures.h"

namespace fs::test {
namespace {

namespace k = cuda::kernels;

// A layer's shape and small weights; its fused projection rows are qkv | z | b | a.
struct Layer {
  DeltaNetShape shape;
  std::vector<float> weight, a_log, dt_bias, norm;

  int width() const { return shape.conv_channels() + shape.value_channels() + 2 * shape.value_heads; }
  int z_at() const { return shape.conv_channels(); }
  int b_at() const { return z_at() + shape.value_channels(); }
  int a_at() const { return b_at() + shape.value_heads; }
};

Layer random_layer(std::mt19937& rng, int key_heads, int group, int key_dim, int value_dim) {
  Layer l;
  l.shape = {key_heads, key_heads * group, key_dim, value_dim, 4, 1e-6f};
  l.weight = random_floats(rng, size_t(l.shape.conv_channels()) * 4, 0.5f);
  l.a_log = random_floats(rng, size_t(l.shape.value_heads), 0.5f);
  l.dt_bias = random_floats(rng, size_t(l.shape.value_heads));
  l.norm = random_floats(rng, size_t(value_dim));
  return l;
}

// One sequence of a call: its rows follow the previous sequence's; taps in ascending after_rows.
struct SeqSpec {
  int rows;
  bool fresh;
  std::vector<int> taps;
  bool token_loop = false;  // in a run of the chunked form, left to the token loop
};

int total_rows(const std::vector<SeqSpec>& seqs) {
  int T = 0;
  for (const SeqSpec& s : seqs) T += s.rows;
  return T;
}

int total_taps(const std::vector<SeqSpec>& seqs) {
  int n = 0;
  for (const SeqSpec& s : seqs) n += int(s.taps.size());
  return n;
}

// What a call produces: conv [T, C], core [T, V], the gated norm [T, V] (as floats), each sequence's state after
// the call and each tap's snapshot (in sequence then tap order).
struct Outputs {
  std::vector<float> conv, core, normed;
  std::vector<std::vector<float>> states, snapshots;
};

std::vector<float> columns(const std::vector<float>& rows, int width, int first_row, int n, int at, int count) {
  std::vector<float> out(size_t(n) * count);
  for (int r = 0; r < n; ++r)
    std::copy_n(rows.data() + size_t(first_row + r) * width + at, count, out.data() + size_t(r) * count);
  return out;
}

// The CPU steps of models/gated_deltanet.h on `fused` [T, width], from `states` (one per sequence).
Outputs cpu_run(const Layer& l, const std::vector<float>& fused, const std::vector<SeqSpec>& seqs,
                std::vector<std::vector<float>> states) {
  const DeltaNetShape& s = l.shape;
  const int T = total_rows(seqs), C = s.conv_channels(), V = s.value_channels(), nv = s.value_heads, W = l.width();
  Outputs o;
  o.conv.assign(size_t(T) * C, 0.0f);
  o.core.assign(size_t(T) * V, 0.0f);
  o.normed.assign(size_t(T) * V, 0.0f);
  int first = 0;
  for (size_t i = 0; i < seqs.size(); ++i) {
    const SeqSpec& q = seqs[i];
    std::vector<float>& state = states[i];
    if (q.fresh) std::fill(state.begin(), state.end(), 0.0f);
    std::vector<std::vector<float>> snaps(q.taps.size(), std::vector<float>(s.state_floats()));
    std::vector<DeltaNetTap> taps;
    for (size_t t = 0; t < q.taps.size(); ++t) taps.push_back({q.taps[t], snaps[t].data()});
    const auto in = columns(fused, W, first, q.rows, 0, C);
    const auto b = columns(fused, W, first, q.rows, l.b_at(), nv), a = columns(fused, W, first, q.rows, l.a_at(), nv);
    deltanet_conv(s, l.weight.data(), in.data(), q.rows, state.data(), taps, o.conv.data() + size_t(first) * C);
    for (int h = 0; h < nv; ++h)
      deltanet_recurrence(s, l.a_log[size_t(h)], l.dt_bias[size_t(h)], o.conv.data() + size_t(first) * C, a.data(),
                          b.data(), q.rows, h, state.data(), taps, o.core.data() + size_t(first) * V);
    for (auto& snap : snaps) o.snapshots.push_back(snap);
    first += q.rows;
  }
  const auto z = columns(fused, W, 0, T, l.z_at(), V);
  deltanet_gated_norm(s, l.norm.data(), o.core.data(), z.data(), T, o.normed.data());
  o.states = std::move(states);
  return o;
}

// The layer on the GPU with a state slot per sequence and a snapshot slot per tap, at a layer offset inside slots
// wider than the layer state (as in a state buffer shared by several layers).
class GpuLayer {
 public:
  static constexpr int kLayerOffset = 7;

  GpuLayer(Gpu& gpu, const Layer& l, const std::vector<std::vector<float>>& states, int snapshots)
      : gpu_(gpu), l_(l), slot_(int64_t(l.shape.state_floats()) + 12) {
    std::vector<float> host(size_t(slot_) * states.size() + 16, -1.0f);
    for (size_t i = 0; i < states.size(); ++i)
      std::copy(states[i].begin(), states[i].end(), host.begin() + long(size_t(slot_) * i + kLayerOffset));
    states_ = gpu.upload(host);
    snapshots_ = gpu.poisoned<float>(size_t(slot_) * size_t(std::max(snapshots, 1)) + 16);
    weight_ = gpu.upload(l.weight);
    a_log_ = gpu.upload(l.a_log);
    dt_bias_ = gpu.upload(l.dt_bias);
    norm_ = gpu.upload(l.norm);
  }

  // Runs the three kernels on `fused` for `seqs` in state slots from `first_slot` on, their taps in snapshot slots
  // from `first_snapshot` on. The recurrence reads `conv_in` and the norm `core_in` when given (each step on the CPU
  // result of the one before), else the kernels' own outputs.
  Outputs run(const std::vector<float>& fused, const std::vector<SeqSpec>& seqs, int first_slot = 0,
              int first_snapshot = 0, const std::vector<float>* conv_in = nullptr,
              const std::vector<float>* core_in = nullptr, bool chunked = false) {
    const DeltaNetShape& s = l_.shape;
    const int T = total_rows(seqs), C = s.conv_channels(), V = s.value_channels(), W = l_.width();
    const k::DeltaNetBatch batch = upload_batch(seqs, first_slot, first_snapshot, chunked);
    const float* in = gpu_.upload(fused);
    float* conv = gpu_.poisoned<float>(size_t(T) * C);
    float* core = gpu_.poisoned<float>(size_t(T) * V);
    uint16_t* normed = gpu_.poisoned<uint16_t>(size_t(T) * V);
    k::deltanet_conv(in, W, T, weight_, s, batch, conv, gpu_.stream());
    Outputs o;
    o.conv = gpu_.download(conv, size_t(T) * C);  // before its q and k are normalised in place
    float* recurrence_in = conv_in ? gpu_.upload(*conv_in) : conv;
    k::deltanet_normalize(recurrence_in, T, s, gpu_.stream());
    k::deltanet_recurrence(recurrence_in, T, in + l_.b_at(), in + l_.a_at(), W, a_log_, dt_bias_, s, batch, core,
                           gpu_.stream());
    if (chunked) {
      const int marked = int(std::count_if(seqs.begin(), seqs.end(), [](const SeqSpec& q) { return !q.token_loop; }));
      k::deltanet_recurrence_chunked(recurrence_in, T, in + l_.b_at(), in + l_.a_at(), W, a_log_, dt_bias_, s, batch,
                                     marked, gpu_.poisoned<float>(k::deltanet_chunked_prep_floats(T, marked, s)),
                                     core, false, 3, gpu_.stream());
    }
    k::deltanet_gated_norm(core_in ? gpu_.upload(*core_in) : core, in + l_.z_at(), W, norm_, T, s, normed,
                           gpu_.stream());
    o.core = gpu_.download(core, size_t(T) * V);
    o.normed = from_bf16(gpu_.download(normed, size_t(T) * V));
    collect_states(o, seqs, first_slot, first_snapshot);
    return o;
  }

  // The normalised conv of `fused` for `seqs` (slots as in run): deltanet_conv_normalized when `fused_kernel`,
  // else deltanet_conv then deltanet_normalize. Fills conv, states and snapshots.
  Outputs normalized_conv(const std::vector<float>& fused, const std::vector<SeqSpec>& seqs, bool fused_kernel) {
    const DeltaNetShape& s = l_.shape;
    const int T = total_rows(seqs), C = s.conv_channels();
    const k::DeltaNetBatch batch = upload_batch(seqs, 0, 0);
    const float* in = gpu_.upload(fused);
    float* conv = gpu_.poisoned<float>(size_t(T) * C);
    if (fused_kernel) {
      k::deltanet_conv_normalized(in, l_.width(), T, weight_, s, batch, conv, gpu_.stream());
    } else {
      k::deltanet_conv(in, l_.width(), T, weight_, s, batch, conv, gpu_.stream());
      k::deltanet_normalize(conv, T, s, gpu_.stream());
    }
    Outputs o;
    o.conv = gpu_.download(conv, size_t(T) * C);
    collect_states(o, seqs, 0, 0);
    return o;
  }

  std::vector<float> state(int slot) {
    return gpu_.download(states_ + kLayerOffset + slot * slot_, l_.shape.state_floats());
  }
  std::vector<float> snapshot(int slot) {
    return gpu_.download(snapshots_ + kLayerOffset + slot * slot_, l_.shape.state_floats());
  }

 private:
  // The call's sequence and snapshot descriptors in device memory.
  k::DeltaNetBatch upload_batch(const std::vector<SeqSpec>& seqs, int first_slot, int first_snapshot,
                                bool chunked = false) {
    std::vector<k::DeltaNetSeq> descs;
    std::vector<k::DeltaNetSnapshot> taps;
    int first = 0;
    for (size_t i = 0; i < seqs.size(); ++i) {
      const int64_t state = (first_slot + int64_t(i)) * slot_;
      descs.push_back({first, seqs[i].rows, state, seqs[i].fresh ? 1 : 0, int(taps.size()), int(seqs[i].taps.size()),
                       chunked && !seqs[i].token_loop ? 1 : 0});
      for (int after : seqs[i].taps) taps.push_back({after, (first_snapshot + int64_t(taps.size())) * slot_});
      first += seqs[i].rows;
    }
    return {gpu_.upload(descs), int(descs.size()), gpu_.upload(taps), states_ + kLayerOffset,
            snapshots_ + kLayerOffset};
  }

  // Each sequence's state and each tap's snapshot after a call on `seqs` (as upload_batch placed them).
  void collect_states(Outputs& o, const std::vector<SeqSpec>& seqs, int first_slot, int first_snapshot) {
    for (size_t i = 0; i < seqs.size(); ++i) o.states.push_back(state(first_slot + int(i)));
    for (int j = 0; j < total_taps(seqs); ++j) o.snapshots.push_back(snapshot(first_snapshot + j));
  }

  Gpu& gpu_;
  const Layer& l_;
  int64_t slot_;
  float* states_ = nullptr;
  float* snapshots_ = nullptr;
  float *weight_ = nullptr, *a_log_ = nullptr, *dt_bias_ = nullptr, *norm_ = nullptr;
};

std::vector<std::vector<float>> random_states(std::mt19937& rng, const Layer& l, size_t n) {
  std::vector<std::vector<float>> states;
  for (size_t i = 0; i < n; ++i) states.push_back(random_floats(rng, l.shape.state_floats(), 0.3f));
  return states;
}

std::vector<float> head(const std::vector<float>& v, size_t n) { return {v.begin(), v.begin() + long(n)}; }
std::vector<float> tail_from(const std::vector<float>& v, size_t n) { return {v.begin() + long(n), v.end()}; }

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0);
}

bool same_bits(const Outputs& a, const Outputs& b) {
  if (!same_bits(a.conv, b.conv) || !same_bits(a.core, b.core) || !same_bits(a.normed, b.normed)) return false;
  if (a.states.size() != b.states.size() || a.snapshots.size() != b.snapshots.size()) return false;
  for (size_t i = 0; i < a.states.size(); ++i)
    if (!same_bits(a.states[i], b.states[i])) return false;
  for (size_t i = 0; i < a.snapshots.size(); ++i)
    if (!same_bits(a.snapshots[i], b.snapshots[i])) return false;
  return true;
}

struct Case {
  int key_heads, group, key_dim, value_dim;
};

// The last case's odd dims take the kernels' one-float copies; the others copy 16 bytes at a time.
const Case kCases[] = {{2, 1, 16, 32}, {1, 3, 32, 16}, {2, 3, 24, 40}, {2, 3, 64, 48}, {1, 1, 128, 128},
                       {2, 3, 128, 64}, {2, 2, 10, 37}};

std::string name(const Case& c) {
  return std::to_string(c.key_heads) + "x" + std::to_string(c.group) + " heads, dk " + std::to_string(c.key_dim) +
         " dv " + std::to_string(c.value_dim);
}

// Continued and fresh sequences of 17, 1, 64 and 2 rows (fewer than the conv tail), with taps at the ends and inside.
const std::vector<SeqSpec> kMixed = {{17, false, {1, 16, 17}}, {1, true, {}}, {64, true, {5, 64}}, {2, false, {2}}};

// A case's random layer, then random input rows for kMixed and each sequence's starting state, drawn from `rng`.
struct MixedInput {
  Layer l;
  std::vector<float> fused;
  std::vector<std::vector<float>> states;
};

MixedInput random_mixed_input(std::mt19937& rng, const Case& c) {
  MixedInput in;
  in.l = random_layer(rng, c.key_heads, c.group, c.key_dim, c.value_dim);
  in.fused = random_floats(rng, size_t(total_rows(kMixed)) * in.l.width());
  in.states = random_states(rng, in.l, kMixed.size());
  return in;
}

// Calls check(gpu, input) for each case's random mixed input, drawn from an rng seeded `seed`, on a fresh GPU; stops
// at the first fatal failure.
template <class Check>
void for_each_mixed_case(uint32_t seed, Check check) {
  std::mt19937 rng(seed);
  for (const Case& c : kCases) {
    SCOPED_TRACE(name(c));
    Gpu gpu;
    check(gpu, random_mixed_input(rng, c));
    if (::testing::Test::HasFatalFailure()) return;
  }
}

TEST(CudaDeltaNet, StepsMatchCpu) {
  FS_REQUIRE_GPU();
  for_each_mixed_case(13, [](Gpu& gpu, const MixedInput& in) {
    const auto& [l, fused, states] = in;
    const DeltaNetShape& s = l.shape;
    const Outputs want = cpu_run(l, fused, kMixed, states);
    GpuLayer layer(gpu, l, states, total_taps(kMixed));
    const Outputs got = layer.run(fused, kMixed, 0, 0, &want.conv, &want.core);
    EXPECT_LE(rel_l2(got.conv, want.conv), 1e-5);
    EXPECT_LE(rel_l2(got.core, want.core), 1e-5);
    for (size_t i = 0; i < want.normed.size(); ++i)  // a bf16 rounding of values computed in another order
      ASSERT_LE(std::fabs(got.normed[i] - want.normed[i]), std::fabs(want.normed[i]) / 128 + 1e-30f) << "at " << i;
    const size_t conv_state = s.conv_state_floats();
    for (size_t i = 0; i < want.states.size(); ++i) {
      SCOPED_TRACE("sequence " + std::to_string(i));
      EXPECT_TRUE(same_bits(head(got.states[i], conv_state), head(want.states[i], conv_state)));
      EXPECT_LE(rel_l2(tail_from(got.states[i], conv_state), tail_from(want.states[i], conv_state)), 1e-5);
    }
    ASSERT_EQ(got.snapshots.size(), want.snapshots.size());
    for (size_t i = 0; i < want.snapshots.size(); ++i) {
      SCOPED_TRACE("snapshot " + std::to_string(i));
      EXPECT_TRUE(same_bits(head(got.snapshots[i], conv_state), head(want.snapshots[i], conv_state)));
      EXPECT_LE(rel_l2(tail_from(got.snapshots[i], conv_state), tail_from(want.snapshots[i], conv_state)), 1e-5);
    }
  });
}

TEST(CudaDeltaNet, ChainedKernelsMatchCpu) {
  FS_REQUIRE_GPU();
  for_each_mixed_case(14, [](Gpu& gpu, const MixedInput& in) {
    const auto& [l, fused, states] = in;
    const Outputs want = cpu_run(l, fused, kMixed, states);
    GpuLayer layer(gpu, l, states, total_taps(kMixed));
    const Outputs got = layer.run(fused, kMixed);
    EXPECT_LE(rel_l2(got.core, want.core), 1e-5);
    EXPECT_LE(rel_l2(got.normed, want.normed), 1e-2);  // bf16 output
    for (size_t i = 0; i < want.states.size(); ++i) EXPECT_LE(rel_l2(got.states[i], want.states[i]), 1e-5);
  });
}

TEST(CudaDeltaNet, SequenceBitsDoNotDependOnTheBatch) {
  FS_REQUIRE_GPU();
  for_each_mixed_case(15, [](Gpu& gpu, const MixedInput& in) {
    const auto& [l, fused, states] = in;
    GpuLayer together(gpu, l, states, total_taps(kMixed));
    const Outputs all = together.run(fused, kMixed);
    int first = 0, first_tap = 0;
    for (size_t i = 0; i < kMixed.size(); ++i) {
      SCOPED_TRACE("sequence " + std::to_string(i));
      const SeqSpec& q = kMixed[i];
      // Alone, at row 0, in another slot of a fresh buffer holding the same starting state.
      GpuLayer alone_layer(gpu, l, {states[i], states[i]}, int(q.taps.size()) + 1);
      const Outputs alone = alone_layer.run(columns(fused, l.width(), first, q.rows, 0, l.width()), {q}, 1, 1);
      Outputs want;
      const int C = l.shape.conv_channels(), V = l.shape.value_channels();
      want.conv = columns(all.conv, C, first, q.rows, 0, C);
      want.core = columns(all.core, V, first, q.rows, 0, V);
      want.normed = columns(all.normed, V, first, q.rows, 0, V);
      want.states = {all.states[i]};
      want.snapshots = {all.snapshots.begin() + first_tap, all.snapshots.begin() + first_tap + long(q.taps.size())};
      EXPECT_TRUE(same_bits(alone, want));
      first += q.rows;
      first_tap += int(q.taps.size());
    }
  });
}

// Calls where every sequence has one row take the one-kernel conv step; it gives the bits of the conv, its tail
// and the normalisation run apart. Also a call with as many rows as sequences that are not one each.
TEST(CudaDeltaNet, OneKernelConvStepEqualsConvThenNormalize) {
  FS_REQUIRE_GPU();
  std::mt19937 rng(17);
  const std::vector<SeqSpec> one_row_each = {{1, false, {1}}, {1, true, {}}, {1, false, {}}, {1, true, {1}}};
  const std::vector<SeqSpec> uneven = {{2, false, {1, 2}}, {0, false, {}}, {1, true, {1}}};
  for (const Case& c : kCases)
    for (const auto* seqs : {&one_row_each, &uneven}) {
      SCOPED_TRACE(name(c) + (seqs == &uneven ? ", uneven rows" : ", one row each"));
      Gpu gpu;
      const Layer l = random_layer(rng, c.key_heads, c.group, c.key_dim, c.value_dim);
      const auto fused = random_floats(rng, size_t(total_rows(*seqs)) * l.width());
      const auto states = random_states(rng, l, seqs->size());
      GpuLayer apart(gpu, l, states, total_taps(*seqs)), together(gpu, l, states, total_taps(*seqs));
      EXPECT_TRUE(same_bits(together.normalized_conv(fused, *seqs, true), apart.normalized_conv(fused, *seqs, false)));
    }
}

TEST(CudaDeltaNet, ChunkedEqualsWholeBitForBit) {
  FS_REQUIRE_GPU();
  std::mt19937 rng(16);
  for (const Case& c : kCases)
    for (bool fresh : {true, false}) {
      SCOPED_TRACE(name(c) + (fresh ? " fresh" : " continued"));
      Gpu gpu;
      const Layer l = random_layer(rng, c.key_heads, c.group, c.key_dim, c.value_dim);
      const int W = l.width(), C = l.shape.conv_channels(), V = l.shape.value_channels();
      const auto fused = random_floats(rng, size_t(47) * W);
      const auto states = random_states(rng, l, 1);
      GpuLayer whole_layer(gpu, l, states, 3);
      const Outputs whole = whole_layer.run(fused, {{47, fresh, {1, 9, 47}}});
      // Rows 1 + 46 (a token tile and part of another) in two calls through the same state slot; the taps move with
      // their rows.
      GpuLayer chunked(gpu, l, states, 3);
      const Outputs first = chunked.run(columns(fused, W, 0, 1, 0, W), {{1, fresh, {1}}});
      const Outputs rest = chunked.run(columns(fused, W, 1, 46, 0, W), {{46, false, {8, 46}}}, 0, 1);
      EXPECT_TRUE(same_bits(head(whole.conv, size_t(C)), first.conv));
      EXPECT_TRUE(same_bits(tail_from(whole.conv, size_t(C)), rest.conv));
      EXPECT_TRUE(same_bits(head(whole.core, size_t(V)), first.core));
      EXPECT_TRUE(same_bits(tail_from(whole.core, size_t(V)), rest.core));
      EXPECT_TRUE(same_bits(head(whole.normed, size_t(V)), first.normed));
      EXPECT_TRUE(same_bits(tail_from(whole.normed, size_t(V)), rest.normed));
      EXPECT_TRUE(same_bits(whole.states[0], rest.states[0]));
      EXPECT_TRUE(same_bits(whole.snapshots[0], first.snapshots[0]));
      EXPECT_TRUE(same_bits(whole.snapshots[1], rest.snapshots[0]));
      EXPECT_TRUE(same_bits(whole.snapshots[2], rest.snapshots[1]));
    }
}

// The tensor-core form in chunks of 16 rows against the token loop, within float tolerance.
TEST(CudaDeltaNet, ChunkedFormMatchesTheTokenLoop) {
  FS_REQUIRE_GPU();
  std::mt19937 rng(21);
  // Whole and partial chunks, a sequence starting inside a chunk of the call's rows, snapshots at chunk ends, and
  // sequences the token loop takes in the same call (their bits as in a call of the token loop alone).
  const std::vector<SeqSpec> seqs = {{48, true, {16, 48}},       {7, false, {3, 7}, true}, {37, false, {32, 37}},
                                     {5, true, {5}},             {1, false, {}, true},     {32, false, {}}};
  for (const Case& c : {Case{2, 3, 128, 32}, Case{1, 1, 128, 16}, Case{2, 2, 64, 32}, Case{1, 3, 32, 16},
                        Case{2, 2, 16, 16}}) {
    SCOPED_TRACE(name(c));
    Gpu gpu;
    const Layer l = random_layer(rng, c.key_heads, c.group, c.key_dim, c.value_dim);
    ASSERT_TRUE(k::deltanet_chunked_takes(l.shape));
    const auto fused = random_floats(rng, size_t(total_rows(seqs)) * l.width());
    const auto states = random_states(rng, l, seqs.size());
    GpuLayer loop(gpu, l, states, total_taps(seqs)), chunked(gpu, l, states, total_taps(seqs));
    const Outputs want = loop.run(fused, seqs);
    const Outputs got = chunked.run(fused, seqs, 0, 0, nullptr, nullptr, true);
    EXPECT_LE(rel_l2(got.core, want.core), 1e-5);
    ASSERT_EQ(got.snapshots.size(), want.snapshots.size());
    const int V = l.shape.value_channels();
    size_t row = 0, tap = 0;
    for (size_t i = 0; i < seqs.size(); row += size_t(seqs[i].rows), tap += seqs[i].taps.size(), ++i) {
      SCOPED_TRACE("sequence " + std::to_string(i));
      const auto rows = [&](const Outputs& o) { return columns(o.core, V, int(row), seqs[i].rows, 0, V); };
      if (seqs[i].token_loop) {
        EXPECT_TRUE(same_bits(rows(got), rows(want)));
        EXPECT_TRUE(same_bits(got.states[i], want.states[i]));
      } else {
        EXPECT_LE(rel_l2(got.states[i], want.states[i]), 1e-5);
      }
      for (size_t t = tap; t < tap + seqs[i].taps.size(); ++t)
        if (seqs[i].token_loop) EXPECT_TRUE(same_bits(got.snapshots[t], want.snapshots[t]));
        else EXPECT_LE(rel_l2(got.snapshots[t], want.snapshots[t]), 1e-5);
    }
  }
}

// Calls cut at chunk ends give the bits of one call.
TEST(CudaDeltaNet, ChunkedFormSplitAtChunkEndsEqualsWhole) {
  FS_REQUIRE_GPU();
  std::mt19937 rng(22);
  const Case c{2, 3, 128, 32};
  Gpu gpu;
  const Layer l = random_layer(rng, c.key_heads, c.group, c.key_dim, c.value_dim);
  const int W = l.width(), V = l.shape.value_channels();
  const auto fused = random_floats(rng, size_t(43) * W);
  const auto states = random_states(rng, l, 1);
  GpuLayer whole_layer(gpu, l, states, 2);
  // 43 rows whole (the last chunk partial), against 16 + 27 and 32 + 11.
  const Outputs whole = whole_layer.run(fused, {{43, false, {16, 32}}}, 0, 0, nullptr, nullptr, true);
  for (int cut : {16, 32}) {
    SCOPED_TRACE(cut);
    GpuLayer split_layer(gpu, l, states, 1);
    const Outputs first = split_layer.run(columns(fused, W, 0, cut, 0, W), {{cut, false, {cut}}}, 0, 0, nullptr,
                                          nullptr, true);
    const Outputs rest = split_layer.run(columns(fused, W, cut, 43 - cut, 0, W), {{43 - cut, false, {}}}, 0, 0,
                                         nullptr, nullptr, true);
    EXPECT_TRUE(same_bits(head(whole.core, size_t(cut) * V), first.core));
    EXPECT_TRUE(same_bits(tail_from(whole.core, size_t(cut) * V), rest.core));
    EXPECT_TRUE(same_bits(whole.states[0], rest.states[0]));
    EXPECT_TRUE(same_bits(whole.snapshots[cut / 16 - 1], first.snapshots[0]));
  }
}

}  // namespace
}  // namespace fs::test
