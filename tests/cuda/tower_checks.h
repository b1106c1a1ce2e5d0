// Checks shared by the CUDA vision tower tests: a tower's fixture images and reference features, its encoder with
// resident or host weights, features against the reference and the CPU tower, and --vision-host bitwise equal to
// resident weights with repeated encodes bitwise equal and pinned memory allocated once.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "backends/cuda/kernels/vision_tower_cuda.h"
#include "core/files.h"
#include "io/hf_config.h"
#include "io/safetensors.h"
#include "support/fixtures.h"
#include "vision/vision_encoder.h"

namespace fs::test {

struct TowerFixture {
  vision::VisionTowerConfig config;
  std::shared_ptr<Checkpoint> checkpoint;
  std::vector<std::string> names;
  std::vector<vision::PixelPatches> images;
  std::vector<std::vector<float>> reference;
  int64_t max_patches = 0;
};

// A fixture with the tower config and checkpoint of the model in `dir`, and no cases yet.
inline TowerFixture open_tower(const std::filesystem::path& dir) {
  TowerFixture f;
  f.config = vision::VisionTowerConfig::from_json(load_model_config(dir).vision, dir.string());
  f.checkpoint = Checkpoint::open(dir);
  return f;
}

// Adds one reference case: `pixels` holds its grid_thw and pixel_values, `image` its file name and tower_output.
inline void add_tower_case(TowerFixture& f, const json& image, const json& pixels, const std::filesystem::path& ref) {
  vision::PixelPatches px;
  px.grid = {pixels["grid_thw"][0].get<int>(), pixels["grid_thw"][1].get<int>(), pixels["grid_thw"][2].get<int>()};
  px.patch_dim = pixels["pixel_values"]["shape"][1].get<int>();
  px.values = read_f32(ref / pixels["pixel_values"]["file"].get<std::string>());
  f.max_patches = std::max(f.max_patches, px.grid.patches());
  f.names.push_back(image["file"].get<std::string>());
  f.images.push_back(std::move(px));
  f.reference.push_back(read_f32(ref / image["tower_output"]["file"].get<std::string>()));
}

inline std::unique_ptr<vision::VisionEncoder> cuda_tower_encoder(const TowerFixture& f, bool on_host) {
  vision::VisionEncoderOptions o;
  o.device = "cuda";
  o.weights_on_host = on_host;
  o.max_patches = f.max_patches;
  return cuda::create_cuda_vision_encoder(f.config, f.checkpoint, o);
}

// Each image's CUDA features are finite and within 2e-2 rel L2 of the reference and of `cpu`'s.
template <class CpuTower>
void expect_matches_reference_and_cpu(const TowerFixture& f, CpuTower& cpu, const char* label) {
  auto gpu = cuda_tower_encoder(f, false);
  for (size_t i = 0; i < f.images.size(); ++i) {
    SCOPED_TRACE(f.names[i]);
    auto out = gpu->encode(f.images[i]);
    ASSERT_EQ(out.size(), f.reference[i].size());
    for (float v : out) ASSERT_TRUE(std::isfinite(v));
    const double vs_ref = rel_l2(out, f.reference[i]);
    const double vs_cpu = rel_l2(out, cpu.encode(f.images[i]));
    std::printf("%s: %s rel L2 %.3g vs reference, %.3g vs CPU tower\n", f.names[i].c_str(), label, vs_ref, vs_cpu);
    EXPECT_LE(vs_ref, 2e-2);
    EXPECT_LE(vs_cpu, 2e-2);
  }
}

// Two rounds over the images: host weights give resident's bits, a second encode gives the same bits, the image
// stage (and, with host weights, the pinned weights) allocated once and never freed. Fills both encoders' stats;
// call it under ASSERT_NO_FATAL_FAILURE.
inline void expect_host_weights_same_bits_pinned_once(const TowerFixture& f, vision::VisionEncoderStats& rs,
                                                      vision::VisionEncoderStats& ss) {
  auto resident = cuda_tower_encoder(f, false);
  auto staged = cuda_tower_encoder(f, true);
  for (int round = 0; round < 2; ++round)
    for (size_t i = 0; i < f.images.size(); ++i) {
      SCOPED_TRACE(f.names[i] + " round " + std::to_string(round));
      auto a = resident->encode(f.images[i]);
      auto b = staged->encode(f.images[i]);
      auto a2 = resident->encode(f.images[i]);
      ASSERT_EQ(a.size(), b.size());
      EXPECT_EQ(0, std::memcmp(a.data(), b.data(), a.size() * sizeof(float))) << "--vision-host changed the bits";
      EXPECT_EQ(0, std::memcmp(a.data(), a2.data(), a.size() * sizeof(float))) << "a second encode changed the bits";
    }
  rs = resident->stats();
  ss = staged->stats();
  const uint64_t encodes = 2 * f.images.size();
  EXPECT_EQ(rs.images, 2 * encodes);
  EXPECT_EQ(ss.images, encodes);
  EXPECT_EQ(rs.pinned_allocations, 1u);
  EXPECT_EQ(ss.pinned_allocations, 2u);
  EXPECT_EQ(rs.pinned_frees, 0u);
  EXPECT_EQ(ss.pinned_frees, 0u);
  EXPECT_EQ(ss.device_weight_bytes, 0u);
  EXPECT_GT(ss.device_slot_bytes, 0u);
  EXPECT_LT(ss.device_slot_bytes, rs.device_weight_bytes);
  for (const auto& line : staged->budget_lines()) std::printf("%s\n", line.c_str());
}

}  // namespace fs::test
