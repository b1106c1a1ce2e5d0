#include <gtest/gtest.h>

#include <cstdio>

#include "vision/image_digest.h"
#include "core/sha256.h"
#include "core/thread_pool.h"
#include "vision_fixtures.h"

namespace fs::vision {
namespace {

std::string sha256sum_tool(const std::filesystem::path& p) {
  std::string cmd = "sha256sum '" + p.string() + "'";
  FILE* f = popen(cmd.c_str(), "r");
  if (!f) return "";
  char buf[128] = {};
  size_t n = fread(buf, 1, 64, f);
  pclose(f);
  return std::string(buf, n);
}

TEST(Digest, Sha256MatchesSha256sum) {
  FS_REQUIRE_SHARED(shared);
  for (const char* name : {"grid224x168.png", "photo320x208.jpg", "odd97x61.webp", "wide640x400.png"}) {
    auto path = shared / "images" / name;
    auto bytes = test::file_bytes(path);
    Sha256 h;
    // Uneven pieces exercise the block buffering.
    size_t at = 0, piece = 1;
    while (at < bytes.size()) {
      size_t n = std::min(piece, bytes.size() - at);
      h.update(bytes.data() + at, n);
      at += n;
      piece = piece * 3 + 1;
    }
    EXPECT_EQ(Sha256::hex(h.finish()), sha256sum_tool(path)) << name;
  }
}

TEST(Digest, ImageDigestDependsOnPixelsAndGrid) {
  RgbImage a{2, 2, std::vector<uint8_t>(12, 7)};
  RgbImage b = a;
  EXPECT_EQ(image_digest(a, {1, 28, 28}), image_digest(b, {1, 28, 28}));
  b.pixels[5] ^= 1;
  EXPECT_NE(image_digest(a, {1, 28, 28}), image_digest(b, {1, 28, 28}));
  EXPECT_NE(image_digest(a, {1, 28, 28}), image_digest(a, {1, 28, 56}));
  EXPECT_EQ(image_digest_hex(image_digest(a, {1, 2, 2})).size(), 64u);
}

TEST(Digest, ImageDigestIsTheSameOnAnyThreadCountAndSeesEveryBand) {
  RgbImage img{37, 101, std::vector<uint8_t>(size_t(37) * 101 * 3)};
  for (size_t i = 0; i < img.pixels.size(); ++i) img.pixels[i] = uint8_t(i * 2654435761u >> 24);
  auto digest_on = [&](int threads, const RgbImage& im) {
    ThreadPool pool(threads);
    ThreadPool::Use use(pool);
    return image_digest(im, {1, 4, 2});
  };
  const ImageDigest one = digest_on(1, img);
  for (int threads : {2, 3, 8}) EXPECT_EQ(digest_on(threads, img), one) << threads << " threads";
  for (size_t at : {size_t(0), img.pixels.size() / 2, img.pixels.size() - 1}) {
    RgbImage changed = img;
    changed.pixels[at] ^= 0x10;
    EXPECT_NE(digest_on(3, changed), one) << "byte " << at;
  }
  RgbImage wider{101, 37, img.pixels};  // same bytes, other shape
  EXPECT_NE(digest_on(2, wider), one);
}

}  // namespace
}  // namespace fs::vision
