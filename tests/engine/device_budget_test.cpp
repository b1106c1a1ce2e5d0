// The device memory budget: the KV pool in the device's bytes per page, round scratch and a reserve against what is
// free beside the resident weights; the pool sized to fit; the host RAM a device engine keeps.
#include <gtest/gtest.h>

#include "budget_config.h"
#include "core/error.h"
#include "engine/device_budget.h"
#include "engine/drafters/drafter.h"
#include "models/kv_pool.h"

namespace fs {
namespace {

constexpr size_t kMiB = size_t(1) << 20, kGiB = size_t(1) << 30;

// A model that only answers the budget's questions: a host model unless given a device page size.
class FabricatedModel final : public Model {
 public:
  explicit FabricatedModel(size_t device_bytes_per_position = 0) : per_position_(device_bytes_per_position) {}
  const ModelConfig& config() const override { return config_; }
  std::vector<float> forward(std::span<const SequenceChunk>, KvPool&) override { throw Error("not run"); }
  std::vector<float> hidden_states(const SequenceChunk&, KvPool&) override { throw Error("not run"); }
  size_t weight_bytes() const override { return 10 * kGiB; }
  size_t kv_page_bytes(int page_tokens) const override {
    return per_position_ ? size_t(page_tokens) * per_position_ : Model::kv_page_bytes(page_tokens);
  }
  // One MiB per row and per logit row, a word per page-table entry and per pool page.
  size_t round_scratch_bytes(const RoundLimits& r) const override {
    return size_t(r.rows + r.logit_rows) * kMiB + (r.page_entries + size_t(r.pool_pages)) * 4;
  }

 private:
  ModelConfig config_ = test::small_budget_config();
  size_t per_position_;
};

class NoDrafts final : public Drafter {
 public:
  const char* name() const override { return "none"; }
  std::vector<std::vector<int32_t>> propose(std::span<const DraftRequest> requests) override {
    return std::vector<std::vector<int32_t>>(requests.size());
  }
};

EngineOptions serving_options() {
  EngineOptions o;
  o.parallel = 4;
  o.context = 1024;
  o.round_tokens = 256;
  return o;
}

TEST(DeviceBudget, HostModelPagesAreTheF32PoolsAndItHasNoDevice) {
  const FabricatedModel host;
  EXPECT_EQ(host.kv_page_bytes(16), KvPool::bytes_per_page(4, 2, 64, 16));
  EXPECT_FALSE(host.device_memory_free().has_value());
  EXPECT_EQ(host.round_scratch_bytes(largest_round(serving_options())), size_t(256 + 4) * kMiB + (256 + 256) * 4);
}

TEST(DeviceBudget, LargestRoundHoldsEveryWindowOrTheRoundsTokens) {
  EngineOptions o = serving_options();
  RoundLimits r = largest_round(o);
  EXPECT_EQ(r.rows, 256);
  EXPECT_EQ(r.logit_rows, 4);
  EXPECT_EQ(r.page_entries, size_t(4 * 64));
  EXPECT_EQ(r.pool_pages, 4 * 64);
  o.drafter = std::make_shared<NoDrafts>();
  o.draft_tokens = 7;
  o.parallel = 64;
  o.kv_pages = 100;
  r = largest_round(o);
  EXPECT_EQ(r.rows, 512);
  EXPECT_EQ(r.logit_rows, 512);
  EXPECT_EQ(r.page_entries, size_t(64 * 64));
  EXPECT_EQ(r.pool_pages, 100);
}

TEST(DeviceBudget, CountsThePoolInDeviceBytesAndLeavesTheResidentWeightsOut) {
  const FabricatedModel device(kMiB);
  EngineOptions o = serving_options();
  o.kv_pages = 100;
  const MemoryBudget b = device_budget(device, o, 8 * kGiB);
  EXPECT_EQ(b.where, "device memory");
  ASSERT_EQ(b.resident.size(), 1u);
  EXPECT_EQ(b.resident[0].bytes, 10 * kGiB);
  ASSERT_EQ(b.lines.size(), 3u);
  EXPECT_EQ(b.lines[0].bytes, 100 * 16 * kMiB);
  EXPECT_EQ(b.lines[1].bytes, device.round_scratch_bytes(largest_round(o)));
  EXPECT_EQ(b.lines[2].bytes, kDeviceReserveBytes);
  EXPECT_EQ(b.total(), 1600 * kMiB + b.lines[1].bytes + kDeviceReserveBytes);
  EXPECT_TRUE(b.fits());
  const std::string report = b.report();
  EXPECT_NE(report.find("memory budget (device memory)"), std::string::npos) << report;
  EXPECT_NE(report.find("weights: 10.00 GiB (resident)"), std::string::npos) << report;
  EXPECT_NE(report.find("a pool of 100 pages of 16777216 bytes"), std::string::npos) << report;
}

TEST(DeviceBudget, RefusesAPoolThatDoesNotFitWithTheNumbers) {
  const FabricatedModel device(kMiB);
  EngineOptions o = serving_options();
  o.kv_pages = 960;  // 15 GiB of pages
  const MemoryBudget b = device_budget(device, o, 8 * kGiB);
  EXPECT_FALSE(b.fits());
  try {
    b.require();
    FAIL() << "a 15 GiB pool fit in 8 GiB";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("does not fit in device memory"), std::string::npos) << m;
    EXPECT_NE(m.find("short by"), std::string::npos) << m;
    EXPECT_NE(m.find("a pool of 960 pages"), std::string::npos) << m;
    EXPECT_NE(m.find("need 15.00 GiB"), std::string::npos) << m;
  }
}

TEST(DeviceBudget, PagesThatFitAreTheMostTheBudgetTakes) {
  const FabricatedModel device(kMiB);
  EngineOptions o = serving_options();
  const int pages = device_kv_pages_that_fit(device, o, 8 * kGiB);
  ASSERT_GT(pages, 400);
  o.kv_pages = pages;
  EXPECT_TRUE(device_budget(device, o, 8 * kGiB).fits());
  o.kv_pages = pages + 1;
  EXPECT_FALSE(device_budget(device, o, 8 * kGiB).fits());
  EXPECT_EQ(device_kv_pages_that_fit(device, o, 600 * kMiB), 0);
}

TEST(DeviceBudget, ServingPoolHoldsEveryStreamWhenItFitsElseShrinksButKeepsOneFullStream) {
  const FabricatedModel device(kMiB);
  EngineOptions o = serving_options();
  o.prompt_cache_pages = 10;
  const int per_stream = 1024 / o.kv_page_tokens;
  EXPECT_EQ(device_kv_pool_pages_for_serving(device, o, 80 * kGiB), 4 * per_stream + 10);
  const int fit = device_kv_pages_that_fit(device, o, 3 * kGiB);
  ASSERT_GT(fit, per_stream);
  ASSERT_LT(fit, 4 * per_stream);
  EXPECT_EQ(device_kv_pool_pages_for_serving(device, o, 3 * kGiB), fit);
  EXPECT_EQ(device_kv_pool_pages_for_serving(device, o, kGiB), per_stream);
  o.kv_pages = per_stream;
  EXPECT_FALSE(device_budget(device, o, kGiB).fits());
}

TEST(DeviceBudget, PromptCacheOnTheDeviceCountsTheDevicesPages) {
  const FabricatedModel device(kMiB);
  EngineOptions o = serving_options();
  size_prompt_cache_on_device(o, device, 1.0);
  EXPECT_EQ(o.prompt_cache_pages, 64);
  EXPECT_THROW(size_prompt_cache_on_device(o, device, -1.0), Error);
}

TEST(DeviceBudget, HostRamBesideTheDeviceHoldsTheHostTierAndTheCallersLines) {
  const FabricatedModel device(kMiB);
  EngineOptions o = serving_options();
  EXPECT_TRUE(host_budget_beside_device(device, o, {{"vision", 0}}, kGiB).lines.empty());
  o.prompt_cache_host_pages = 1000;
  const MemoryBudget b = host_budget_beside_device(device, o, {{"vision", 5 * kMiB}}, kGiB);
  ASSERT_EQ(b.lines.size(), 3u);
  EXPECT_EQ(b.where, "RAM");
  EXPECT_EQ(b.lines[0].bytes, 1000 * KvPool::bytes_per_page(4, 2, 64, 16));
  EXPECT_EQ(b.lines[1].bytes, 5 * kMiB);
  EXPECT_TRUE(b.fits());
  o.prompt_cache_host_pages = 100000;
  EXPECT_THROW(host_budget_beside_device(device, o, {}, kGiB).require(), Error);
}

}  // namespace
}  // namespace fs
