// Decode rounds replayed from CUDA graphs give the bits of launched kernels; rows sampled on the device return ids
// equal to the host's argmax and mix with rows returned as logits; through the real engine, replies are identical
// with graphs on and off, and greedy replies with device sampling on and off.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <optional>
#include <random>
#include <thread>

#include "engine/engine.h"
#include "gpu_fixture.h"
#include "io/safetensors.h"
#include "models/kv_pool.h"
#include "support/fixtures.h"

namespace fs::test {
namespace {

// A CUDA model built with FOLDSERVE_CUDA_GRAPHS set for its construction only.
std::unique_ptr<Model> cuda_model(const std::filesystem::path& dir, bool graphs) {
  const char* old = std::getenv("FOLDSERVE_CUDA_GRAPHS");
  std::optional<std::string> saved = old ? std::optional<std::string>(old) : std::nullopt;
  setenv("FOLDSERVE_CUDA_GRAPHS", graphs ? "1" : "0", 1);
  auto m = create_cuda_model(load_model_config(dir), Checkpoint::open(dir));
  if (saved) setenv("FOLDSERVE_CUDA_GRAPHS", saved->c_str(), 1);
  else unsetenv("FOLDSERVE_CUDA_GRAPHS");
  return m;
}

struct Streams {
  std::unique_ptr<Model> model;
  std::unique_ptr<KvPool> pool;
  std::vector<std::vector<int32_t>> pages;
  Streams(const std::filesystem::path& dir, bool graphs, int streams) : model(cuda_model(dir, graphs)) {
    const auto& c = model->config();
    pool = std::make_unique<KvPool>(c.num_layers, c.num_kv_heads, c.head_dim, 16, streams * 8, false);
    model->attach_pool(*pool);
    for (int s = 0; s < streams; ++s) {
      pages.emplace_back();
      for (int i = 0; i < 8; ++i) pages.back().push_back(*pool->allocate());
    }
  }
};

TEST(CudaGraphDecode, GraphRoundsEqualLaunchedRoundsAndDeviceIdsEqualArgmax) {
  FS_REQUIRE_GPU();
  FS_REQUIRE_SHARED(shared);
  const auto dir = shared / "models/tiny-qwen3";
  for (int n : {1, 3, 5, 8, 13}) {
    SCOPED_TRACE("streams " + std::to_string(n));
    Streams off(dir, false, n), on(dir, true, n);
    const size_t V = size_t(off.model->config().vocab_size);
    std::mt19937 rng(static_cast<uint32_t>(n));
    std::uniform_int_distribution<int32_t> tok(0, int32_t(V) - 1);
    std::vector<std::vector<int32_t>> ids(static_cast<size_t>(n));
    std::vector<int32_t> next(static_cast<size_t>(n));
    for (int s = 0; s < n; ++s) {
      ids[size_t(s)].resize(size_t(3 + 5 * s % 17));
      for (auto& t : ids[size_t(s)]) t = tok(rng);
      SequenceChunk c{ids[size_t(s)], 0, off.pages[size_t(s)]};
      auto a = off.model->forward(std::span<const SequenceChunk>(&c, 1), *off.pool);
      c.pages = on.pages[size_t(s)];
      auto b = on.model->forward(std::span<const SequenceChunk>(&c, 1), *on.pool);
      ASSERT_EQ(0, std::memcmp(a.data(), b.data(), V * 4));
      next[size_t(s)] = int32_t(std::max_element(a.begin(), a.end()) - a.begin());
    }
    for (int step = 0; step < 6; ++step) {
      SCOPED_TRACE("step " + std::to_string(step));
      for (int s = 0; s < n; ++s) ids[size_t(s)].push_back(next[size_t(s)]);
      std::vector<SequenceChunk> off_chunks, on_chunks;
      std::vector<RowSampling> rows(static_cast<size_t>(n));
      for (int s = 0; s < n; ++s) {
        const auto& v = ids[size_t(s)];
        const int pos = int(v.size()) - 1;
        off_chunks.push_back(SequenceChunk{std::span<const int32_t>(&v.back(), 1), pos, off.pages[size_t(s)]});
        on_chunks.push_back(SequenceChunk{std::span<const int32_t>(&v.back(), 1), pos, on.pages[size_t(s)]});
        if ((s + step) % 3 != 0) rows[size_t(s)].mode = RowSampling::Mode::Greedy;
      }
      auto plain = off.model->forward(off_chunks, *off.pool);
      auto graph_logits = on.model->forward(on_chunks, *on.pool);
      ASSERT_EQ(plain.size(), size_t(n) * V);
      EXPECT_EQ(0, std::memcmp(plain.data(), graph_logits.data(), plain.size() * 4));
      // The sampled pass repeats the round on the graph model: it rewrites the same K/V, leaving the cache as it was.
      auto sampled = on.model->forward_sampled(on_chunks, rows, *on.pool);
      ASSERT_EQ(sampled.ids.size(), size_t(n));
      size_t host_row = 0;
      for (int s = 0; s < n; ++s) {
        const float* row = plain.data() + size_t(s) * V;
        const int32_t argmax = int32_t(std::max_element(row, row + V) - row);
        next[size_t(s)] = argmax;
        if (rows[size_t(s)].mode == RowSampling::Mode::Greedy) {
          EXPECT_EQ(sampled.ids[size_t(s)], argmax) << "stream " << s;
        } else {
          EXPECT_EQ(sampled.ids[size_t(s)], -1);
          ASSERT_GE(sampled.logits.size(), (host_row + 1) * V);
          EXPECT_EQ(0, std::memcmp(sampled.logits.data() + host_row * V, row, V * 4)) << "stream " << s;
          ++host_row;
        }
      }
      EXPECT_EQ(sampled.logits.size(), host_row * V);
    }
  }
}

struct Reply {
  std::vector<int32_t> ids;
  std::vector<float> logprobs;
  FinishReason reason = FinishReason::Error;
};

std::vector<Reply> run_engine(Model& model, const std::vector<GenerationRequest>& reqs, int parallel,
                              bool device_sampling = true) {
  EngineOptions o;
  o.parallel = parallel;
  o.context = 256;
  o.prefill_chunk = 17;
  o.round_tokens = 96;
  o.device_sampling = device_sampling;
  std::vector<Reply> out(reqs.size());
  std::mutex mu;
  std::condition_variable cv;
  int pending = int(reqs.size());
  {
    Engine engine(model, o);
    for (size_t i = 0; i < reqs.size(); ++i) {
      GenerationRequest r = reqs[i];
      r.on_token = [&out, i](const SampledToken& t) {
        out[i].ids.push_back(t.id);
        out[i].logprobs.push_back(t.logprob);
        return true;
      };
      r.on_done = [&, i](const GenerationResult& g) {
        std::lock_guard lock(mu);
        out[i].reason = g.reason;
        --pending;
        cv.notify_all();
      };
      while (!engine.submit(r)) std::this_thread::yield();
    }
    std::unique_lock lock(mu);
    cv.wait(lock, [&] { return pending == 0; });
  }
  return out;
}

std::vector<GenerationRequest> requests(int vocab, int n) {
  std::mt19937 rng(99);
  std::uniform_int_distribution<int32_t> tok(0, vocab - 1);
  std::vector<GenerationRequest> reqs;
  for (int i = 0; i < n; ++i) {
    GenerationRequest r;
    r.prompt.resize(size_t(3 + 11 * i % 37));
    for (auto& t : r.prompt) t = tok(rng);
    r.max_tokens = 20 + i % 7;
    r.sampling.seed = 4000 + uint64_t(i);
    switch (i % 5) {
      case 0: r.sampling.temperature = 0.0f; break;
      case 1: r.sampling.temperature = 0.9f, r.sampling.top_p = 0.95f; break;
      case 2: r.sampling.temperature = 1.2f, r.sampling.top_k = 40, r.sampling.min_p = 0.02f; break;
      case 3: r.sampling.temperature = 0.0f, r.sampling.logprobs = true, r.sampling.top_logprobs = 3; break;
      case 4: r.sampling.temperature = 0.8f, r.sampling.presence_penalty = 0.3f; break;
    }
    reqs.push_back(r);
  }
  return reqs;
}

bool same(const Reply& a, const Reply& b) {
  return a.ids == b.ids && a.reason == b.reason && a.logprobs.size() == b.logprobs.size() &&
         std::memcmp(a.logprobs.data(), b.logprobs.data(), a.logprobs.size() * 4) == 0;
}

TEST(CudaGraphDecode, EngineRepliesIdenticalWithGraphsOnAndOff) {
  FS_REQUIRE_GPU();
  FS_REQUIRE_SHARED(shared);
  const auto dir = shared / "models/tiny-qwen3";
  auto off = cuda_model(dir, false), on = cuda_model(dir, true);
  auto reqs = requests(off->config().vocab_size, 12);
  for (int parallel : {3, 8, 12}) {
    SCOPED_TRACE("parallel " + std::to_string(parallel));
    auto a = run_engine(*off, reqs, parallel), b = run_engine(*on, reqs, parallel);
    for (size_t i = 0; i < reqs.size(); ++i) {
      EXPECT_TRUE(same(a[i], b[i])) << "request " << i;
      EXPECT_EQ(b[i].reason, FinishReason::Length) << "request " << i;
    }
  }
}

TEST(CudaGraphDecode, DeviceGreedyEqualsHostGreedy) {
  FS_REQUIRE_GPU();
  FS_REQUIRE_SHARED(shared);
  const auto dir = shared / "models/tiny-qwen3";
  auto model = cuda_model(dir, true);
  auto reqs = requests(model->config().vocab_size, 10);
  auto device = run_engine(*model, reqs, 8);
  auto host = run_engine(*model, reqs, 8, false);
  for (size_t i = 0; i < reqs.size(); ++i) {
    if (reqs[i].sampling.temperature > 0.0f) continue;
    EXPECT_EQ(host[i].ids, device[i].ids) << "request " << i;
    EXPECT_EQ(host[i].reason, device[i].reason) << "request " << i;
    ASSERT_EQ(host[i].logprobs.size(), device[i].logprobs.size()) << "request " << i;
    // The device sums the log-sum-exp in float, the host in double: equal within float rounding (cuda-backend.md).
    float largest = 0.0f;
    for (size_t j = 0; j < host[i].logprobs.size(); ++j) {
      const float h = host[i].logprobs[j], d = device[i].logprobs[j];
      largest = std::max(largest, std::abs(h - d));
      EXPECT_NEAR(h, d, 1e-5f * std::max(1.0f, std::abs(h))) << "request " << i << " token " << j;
    }
    std::printf("request %zu: largest |host - device| logprob %g\n", i, double(largest));
  }
}

}  // namespace
}  // namespace fs::test
