#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <mutex>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/thread_pool.h"
#include "vision/image_pipeline.h"
#include "vision/image_processor.h"
#include "vision/parallel_rows.h"
#include "vision/pil_resize.h"
#include "vision/torch_resize.h"

namespace fs::vision {
namespace {

RgbImage random_image(int width, int height, uint32_t seed) {
  std::mt19937 rng(seed);
  RgbImage img{width, height, std::vector<uint8_t>(size_t(width) * size_t(height) * 3)};
  for (auto& p : img.pixels) p = uint8_t(rng() >> 24);
  return img;
}

template <typename F>
auto with_threads(int threads, F f) {
  ThreadPool pool(threads);
  ThreadPool::Use use(pool);
  return f();
}

TEST(ParallelRows, CoversEveryRowOnceWhateverThePoolSize) {
  for (int threads : {1, 2, 3, 7, 40})
    for (int rows : {0, 1, 5, 16, 17, 333})
      for (int min_rows : {1, 4, 100}) {
        SCOPED_TRACE(std::to_string(threads) + " threads, " + std::to_string(rows) + " rows, min " +
                     std::to_string(min_rows));
        std::vector<int> hits(size_t(rows), 0);
        std::mutex mu;
        int ranges = 0;
        with_threads(threads, [&] {
          parallel_rows(rows, min_rows, [&](int begin, int end) {
            std::lock_guard lock(mu);
            ++ranges;
            EXPECT_LT(begin, end);
            if (ranges > 1) {
              EXPECT_GE(end - begin, min_rows);
            }
            for (int r = begin; r < end; ++r) ++hits[size_t(r)];
          });
          return 0;
        });
        for (int h : hits) EXPECT_EQ(h, 1);
        EXPECT_LE(ranges, std::min(threads, kMaxRowParts));
      }
}

// Resizes in both directions, one side only, odd sizes: the same bytes on 1 thread as on several.
TEST(ParallelPreprocess, ResizesAreBitIdenticalOnAnyThreadCount) {
  struct Case {
    int w, h, ow, oh;
  };
  const Case cases[] = {{517, 389, 211, 600}, {97, 61, 84, 56}, {1001, 757, 1001, 311}, {333, 1111, 129, 1111},
                        {64, 48, 640, 481}};
  uint32_t seed = 1;
  for (const Case& c : cases) {
    SCOPED_TRACE(std::to_string(c.w) + "x" + std::to_string(c.h) + " -> " + std::to_string(c.ow) + "x" +
                 std::to_string(c.oh));
    const RgbImage img = random_image(c.w, c.h, seed++);
    const RgbImage pil1 = with_threads(1, [&] { return resize_bicubic_pil(img, c.ow, c.oh); });
    const RgbImage torch1 = with_threads(1, [&] { return resize_bicubic_torch(img, c.ow, c.oh); });
    ASSERT_EQ(pil1.pixels.size(), size_t(c.ow) * size_t(c.oh) * 3);
    ASSERT_EQ(torch1.pixels.size(), size_t(c.ow) * size_t(c.oh) * 3);
    for (int threads : {2, 3, 8}) {
      SCOPED_TRACE(std::to_string(threads) + " threads");
      EXPECT_EQ(with_threads(threads, [&] { return resize_bicubic_pil(img, c.ow, c.oh); }).pixels, pil1.pixels);
      EXPECT_EQ(with_threads(threads, [&] { return resize_bicubic_torch(img, c.ow, c.oh); }).pixels, torch1.pixels);
    }
  }
}

// preprocess_image, both backends, images that are shrunk, grown, kept and resized on one side only.
TEST(ParallelPreprocess, PatchesAreBitIdenticalOnAnyThreadCount) {
  const int sizes[][2] = {{1001, 757}, {97, 61}, {224, 197}, {333, 1111}, {448, 336}, {2049, 1663}};
  uint32_t seed = 100;
  for (ImageBackend backend : {ImageBackend::Pil, ImageBackend::Torchvision}) {
    ImageProcessorConfig config;
    config.backend = backend;
    config.max_pixels = 28 * 28 * 600;
    for (const auto& size : sizes) {
      SCOPED_TRACE(std::string(backend == ImageBackend::Pil ? "pil " : "torchvision ") + std::to_string(size[0]) +
                   "x" + std::to_string(size[1]));
      const RgbImage img = random_image(size[0], size[1], seed++);
      const PixelPatches one = with_threads(1, [&] { return preprocess_image(img, config); });
      ASSERT_GT(one.values.size(), 0u);
      for (int threads : {2, 5}) {
        SCOPED_TRACE(std::to_string(threads) + " threads");
        const PixelPatches many = with_threads(threads, [&] { return preprocess_image(img, config); });
        EXPECT_EQ(many.grid.h, one.grid.h);
        EXPECT_EQ(many.grid.w, one.grid.w);
        ASSERT_EQ(many.values.size(), one.values.size());
        EXPECT_EQ(std::memcmp(many.values.data(), one.values.data(), one.values.size() * sizeof(float)), 0);
      }
      const PreparedImage prepared = with_threads(3, [&] { return prepare_image(img, config); });
      EXPECT_EQ(prepared.patches.values, one.values);
      EXPECT_EQ(prepared.digest, image_digest(img, one.grid));
    }
  }
}

TEST(ImagePipeline, EncodesInOrderWithTheCallersPool) {
  ThreadPool pool(3);
  ThreadPool::Use use(pool);
  std::vector<size_t> encoded;
  std::atomic<int> foreign_pool{0};
  pipeline_images(
      5,
      [&](size_t k) {
        if (&ThreadPool::global() != &pool) ++foreign_pool;
        PreparedImage p;
        p.patches.values.assign(1, float(k));
        return p;
      },
      [&](size_t k, PreparedImage& p) {
        EXPECT_EQ(p.patches.values.at(0), float(k));
        encoded.push_back(k);
      });
  EXPECT_EQ(encoded, (std::vector<size_t>{0, 1, 2, 3, 4}));
  EXPECT_EQ(foreign_pool.load(), 0);
}

TEST(ImagePipeline, FailuresComeInImageOrder) {
  // prepare(2) fails while encode(1) runs: encode(1) still finishes, then prepare(2)'s error comes back.
  std::vector<size_t> encoded;
  try {
    pipeline_images(
        4,
        [&](size_t k) -> PreparedImage {
          if (k == 2) throw std::runtime_error("prepare 2");
          return {};
        },
        [&](size_t k, PreparedImage&) { encoded.push_back(k); });
    FAIL() << "no exception";
  } catch (const std::runtime_error& e) {
    EXPECT_EQ(std::string(e.what()), "prepare 2");
  }
  EXPECT_EQ(encoded, (std::vector<size_t>{0, 1}));

  // encode(1) fails: prepare(2) ran beside it, its result is dropped and nothing after it runs.
  std::vector<size_t> prepared;
  std::mutex mu;
  try {
    pipeline_images(
        4,
        [&](size_t k) {
          std::lock_guard lock(mu);
          prepared.push_back(k);
          return PreparedImage{};
        },
        [&](size_t k, PreparedImage&) {
          if (k == 1) throw std::runtime_error("encode 1");
        });
    FAIL() << "no exception";
  } catch (const std::runtime_error& e) {
    EXPECT_EQ(std::string(e.what()), "encode 1");
  }
  EXPECT_EQ(prepared, (std::vector<size_t>{0, 1, 2}));
}

}  // namespace
}  // namespace fs::vision
