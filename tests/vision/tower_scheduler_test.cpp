// Image work off the round loop: the scheduler runs jobs in order on its own pool, returns their errors, drops a
// queued job and stops a running one when its caller gives up; the CPU tower stops mid-encode on its flag; the
// admitted image size follows the FLOP count and the measured speed.
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

}  // namespace
}  // namespace fs::vision
