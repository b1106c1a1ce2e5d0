// Image work off the round loop: the scheduler runs jobs in order on its own pool, returns their errors, drops a
// queued job and stops a running one when its caller gives up; the CPU tower stops mid-encode on its flag; the
// admitted image size follows the FLOP count and the measured speed, which a stalled calibration encode does not skew.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "core/thread_pool.h"
#include "io/hf_config.h"
#include "io/safetensors.h"
#include "vision/image_budget.h"
#include "vision/scheduled_encoder.h"
#include "vision/tower_scheduler.h"
#include "vision/vision_encoder.h"
#include "vision_fixtures.h"

namespace fs::vision {
namespace {

using namespace std::chrono;

TEST(TowerScheduler, RunsJobsOnItsOwnPoolAndReturnsTheirErrors) {
  TowerScheduler scheduler(2, 0);
  ThreadPool* seen = nullptr;
  scheduler.run([&](const CancelFlag&) { seen = &ThreadPool::global(); }, {});
  EXPECT_NE(seen, nullptr);
  EXPECT_NE(seen, &ThreadPool::global());
  EXPECT_THROW(scheduler.run([](const CancelFlag&) { throw Error("broken image"); }, {}), Error);
  EXPECT_EQ(scheduler.cancelled(), 0u);
}

TEST(TowerScheduler, StopsARunningJobAndDropsAQueuedOne) {
  TowerScheduler scheduler(1, 0);
  std::atomic<bool> started{false}, stop_first{false}, second_ran{false};
  std::thread first([&] {
    EXPECT_THROW(scheduler.run(
                     [&](const CancelFlag& cancel) {
                       started = true;
                       while (!cancel.load()) std::this_thread::sleep_for(milliseconds(1));
                     },
                     [&] { return stop_first.load(); }),
                 EncodeCancelled);
  });
  while (!started) std::this_thread::sleep_for(milliseconds(1));
  // Queued behind the running job, then given up on: it never runs.
  EXPECT_THROW(scheduler.run([&](const CancelFlag&) { second_ran = true; }, [] { return true; }), EncodeCancelled);
  stop_first = true;
  first.join();
  EXPECT_FALSE(second_ran.load());
  EXPECT_EQ(scheduler.cancelled(), 2u);
  bool third_ran = false;
  scheduler.run([&](const CancelFlag&) { third_ran = true; }, [] { return false; });
  EXPECT_TRUE(third_ran);
}

std::shared_ptr<VisionEncoder> tiny_cpu_encoder(const std::filesystem::path& shared) {
  const auto dir = test::vl_model_dir(shared);
  const auto config = VisionTowerConfig::from_json(load_model_config(dir).vision, dir.string());
  return create_cpu_vision_encoder(config, Checkpoint::open(dir), {});
}

PixelPatches synthetic(const VisionTowerConfig& c, int side) {
  PixelPatches px;
  px.grid = {1, side, side};
  px.patch_dim = c.patch_dim();
  px.values.assign(size_t(px.grid.patches()) * size_t(px.patch_dim), 0.5f);
  return px;
}

TEST(CpuTowerCancel, StopsWithinOneAttentionPassOfTheFlag) {
  FS_REQUIRE_SHARED(shared);
  auto encoder = tiny_cpu_encoder(shared);
  const VisionTowerConfig& c = encoder->config();
  // Long enough that an encode to the end would take far longer than the wait below.
  const PixelPatches small = synthetic(c, 16);
  const auto t0 = steady_clock::now();
  encoder->encode(small);
  const double small_seconds = duration<double>(steady_clock::now() - t0).count();
  const PixelPatches big = synthetic(c, 160);
  const double full_estimate = small_seconds * tower_flops(c, big.grid.patches()) / tower_flops(c, small.grid.patches());
  CancelFlag cancel{false};
  std::thread setter([&] {
    std::this_thread::sleep_for(milliseconds(200));
    cancel = true;
  });
  const auto start = steady_clock::now();
  EXPECT_THROW(encoder->encode_cancellable(big, cancel), EncodeCancelled);
  const double took = duration<double>(steady_clock::now() - start).count();
  setter.join();
  EXPECT_LT(took, 0.2 + full_estimate / 10) << "full encode estimated at " << full_estimate << " s";
  EXPECT_EQ(encoder->stats().images, 1u);
}

TEST(ImageBudget, AdmitsTheLargestImageWithinTheTimeAtTheMeasuredSpeed) {
  FS_REQUIRE_SHARED(shared);
  auto device = tiny_cpu_encoder(shared);
  const VisionTowerConfig c = device->config();
  const int64_t cap = 16384;
  ImageTimeBudget budget;
  budget.max_seconds = 2;
  budget.cap_patches = cap;
  budget.threads = 2;
  ScheduledVisionEncoder scheduled(device, budget);
  const TowerSpeed speed = scheduled.speed();
  ASSERT_GT(speed.flops_per_second, 0);
  const int64_t admitted = scheduled.admitted_patches();
  EXPECT_EQ(admitted % c.merge_unit(), 0);
  EXPECT_LE(admitted, cap);
  EXPECT_LE(tower_flops(c, admitted) / speed.flops_per_second, budget.max_seconds);
  if (admitted < cap) {
    EXPECT_GT(tower_flops(c, admitted + c.merge_unit()) / speed.flops_per_second, budget.max_seconds);
  }
  EXPECT_NE(scheduled.budget_lines().back().find(std::to_string(admitted * c.patch_size * c.patch_size)),
            std::string::npos);
  // The FLOP count grows faster than the patches: the full-attention blocks are quadratic.
  EXPECT_GT(tower_flops(c, 4096), 4 * tower_flops(c, 1024));
  budget.max_seconds = 0;
  EXPECT_EQ(ScheduledVisionEncoder(device, budget).admitted_patches(), cap);
}

// Encodes that take a fixed time per FLOP, the first one stalled as if other work held the machine.
class StallingEncoder : public VisionEncoder {
 public:
  StallingEncoder(const VisionTowerConfig& c, double flops_per_second, double stall_seconds)
      : config_(c), flops_per_second_(flops_per_second), stall_seconds_(stall_seconds) {}
  const VisionTowerConfig& config() const override { return config_; }
  std::vector<float> encode(const PixelPatches& px) override {
    double seconds = tower_flops(config_, px.grid.patches()) / flops_per_second_;
    if (encodes_++ == 0) seconds += stall_seconds_;
    std::this_thread::sleep_for(duration<double>(seconds));
    return {};
  }
  size_t weight_bytes() const override { return 0; }
  const char* device_name() const override { return "stalling test"; }
  std::vector<std::string> budget_lines() const override { return {}; }
  VisionEncoderStats stats() const override { return {}; }

 private:
  VisionTowerConfig config_;
  double flops_per_second_, stall_seconds_;
  int encodes_ = 0;
};

TEST(ImageBudget, AStalledFirstEncodeDoesNotEndTheCalibration) {
  VisionTowerConfig c;
  c.depth = 2;
  c.hidden_size = 64;
  c.intermediate_size = 128;
  c.num_heads = 4;
  c.out_hidden_size = 64;
  // 48×48 patches take 40 ms at this speed; the first image (4×4 patches) stalls for 200 ms.
  const double rate = tower_flops(c, 48 * 48) / 0.04;
  StallingEncoder encoder(c, rate, 0.2);
  const TowerSpeed speed = measure_tower_speed(encoder, 0.03, int64_t(1) << 20);
  EXPECT_GT(speed.patches, 16 * 16);
  // Sleeps only run long, so the measured speed is at most the true one; a stalled 16-patch image would put it
  // thousands of times lower.
  EXPECT_LE(speed.flops_per_second, rate * 1.001);
  EXPECT_GT(speed.flops_per_second, rate / 3);
}

}  // namespace
}  // namespace fs::vision
