#include "conformance.h"

#include "core/error.h"
#include "models/model_program.h"
#include "support/fixtures.h"

namespace fs::test {

std::vector<Instance> all_instances() {
  std::vector<Instance> out;
  for (const char* backend : {"cpu", "cuda", "cuda-tp2"})
    for (const char* fixture : {"tiny-llama3", "tiny-qwen2", "tiny-qwen3", "tiny-qwen3.5", "fortune-demo",
                                "tiny-qwen2.5-vl", "tiny-qwen3.5-vl"})
      out.push_back({fixture, backend});
  return out;
}

void PrintTo(const Instance& instance, std::ostream* os) { *os << instance.fixture << " on " << instance.backend; }

std::string instance_name(const ::testing::TestParamInfo<Instance>& info) {
  std::string name = info.param.fixture + "_" + info.param.backend;
  for (char& c : name)
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  return name;
}

double reference_tolerance(const std::string& backend) { return backend == "cpu" ? 1e-4 : 2e-2; }

double near_tie_margin(const std::string& backend) { return backend == "cpu" ? 1e-3 : 5e-2; }

std::unique_ptr<Model> create_instance_model(const Instance& instance, const ModelConfig& config,
                                             std::shared_ptr<Checkpoint> checkpoint) {
  if (instance.backend == "cuda-tp2") return create_model_on("cuda", config, std::move(checkpoint), 2);
  return create_model_on(instance.backend, config, std::move(checkpoint));
}

void Conformance::SetUp() {
  FS_REQUIRE_SHARED(shared);
  const Instance& instance = GetParam();
  if (instance.backend != "cpu" && !cuda_backend_available()) GTEST_SKIP() << "no CUDA device";
  if (instance.backend == "cuda-tp2" && cuda_backend_devices() < 2) GTEST_SKIP() << "tensor parallelism needs 2 GPUs";
  model_dir = shared / "models" / instance.fixture;
  reference_dir = shared / "reference" / instance.fixture;
  ASSERT_TRUE(std::filesystem::exists(model_dir / "config.json")) << model_dir;
  config = load_model_config(model_dir);
  checkpoint = Checkpoint::open(model_dir);
  try {
    model = create_instance_model(instance, config, checkpoint);
  } catch (const Error& e) {
    // A backend that refuses the family by name (or a split that does not divide its heads): the instance turns on
    // when the backend learns it.
    const std::string message = e.what();
    const std::string family = model_program(config, checkpoint.get()).family;
    if (message.find(config.architecture) != std::string::npos || message.find(family) != std::string::npos ||
        message.find("not a multiple of") != std::string::npos)
      GTEST_SKIP() << message;
    throw;
  }
}

}  // namespace fs::test
