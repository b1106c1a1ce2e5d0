#pragma once
// One conformance suite for every fixture on every backend: a test of the suite derives from Conformance and is
// instantiated over all_instances(); a CUDA instance skips without a GPU or when the backend refuses the family.
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "io/hf_config.h"
#include "io/safetensors.h"
#include "models/model.h"

namespace fs::test {

struct Instance {
  std::string fixture;  // a folder of ../shared/models
  std::string backend;  // "cpu", "cuda" or "cuda-tp2"
};

void PrintTo(const Instance& instance, std::ostream* os);

// Every fixture on every backend.
std::vector<Instance> all_instances();
// A gtest-safe name such as tiny_qwen3_5_cpu.
std::string instance_name(const ::testing::TestParamInfo<Instance>& info);

// How close a backend's logits and hidden states come to transformers' float32 answers (relative L2).
double reference_tolerance(const std::string& backend);
// Greedy steps whose top-1 − top-2 margin is below this may flip on the backend: ids compare up to the first one.
double near_tie_margin(const std::string& backend);

// The fixture's model on the instance's backend ("cuda-tp2": split over two GPUs).
std::unique_ptr<Model> create_instance_model(const Instance& instance, const ModelConfig& config,
                                             std::shared_ptr<Checkpoint> checkpoint);

// Loads the instance's fixture onto its backend.
class Conformance : public ::testing::TestWithParam<Instance> {
 protected:
  void SetUp() override;

  std::filesystem::path model_dir, reference_dir;
  ModelConfig config;
  std::shared_ptr<Checkpoint> checkpoint;
  std::unique_ptr<Model> model;
};

#define FS_CONFORMANCE_INSTANCES(suite) \
  INSTANTIATE_TEST_SUITE_P(Fixtures, suite, ::testing::ValuesIn(all_instances()), instance_name)

}  // namespace fs::test
