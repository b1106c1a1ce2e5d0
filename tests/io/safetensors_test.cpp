// safetensors parsing and validation: good files load, bad files give clear errors, never a crash.
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>

#include "core/error.h"
#include "io/safetensors.h"
#include "io/safetensors_writer.h"

namespace fs {
namespace {

std::string make_file(const std::string& header_json, size_t data_bytes) {
  std::string out(8, '\0');
  uint64_t len = header_json.size();
  std::memcpy(out.data(), &len, 8);
  out += header_json;
  out.append(data_bytes, '\x01');
  return out;
}

std::string error_of(const std::string& bytes) {
  try {
    parse_safetensors_header(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), "x.safetensors");
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(SafetensorsHeader, AcceptsAValidHeader) {
  auto f = make_file(R"({"a":{"dtype":"BF16","shape":[2,3],"data_offsets":[0,12]},"__metadata__":{"k":"v"}})", 12);
  auto h = parse_safetensors_header(reinterpret_cast<const uint8_t*>(f.data()), f.size(), "x");
  ASSERT_EQ(h.tensors.size(), 1u);
  EXPECT_EQ(h.tensors[0].shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(h.tensors[0].dtype, DType::BF16);
}

TEST(SafetensorsHeader, RefusesBadFilesByName) {
  EXPECT_NE(error_of("abc").find("truncated"), std::string::npos);
  EXPECT_NE(error_of(make_file("{", 0)).find("malformed"), std::string::npos);
  auto over = make_file(R"({"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})", 8);
  EXPECT_NE(error_of(over).find("outside the file"), std::string::npos);
  auto dtype = make_file(R"({"a":{"dtype":"Q4","shape":[4],"data_offsets":[0,4]}})", 4);
  EXPECT_NE(error_of(dtype).find("unsupported dtype Q4"), std::string::npos);
  auto span = make_file(R"({"a":{"dtype":"F32","shape":[4],"data_offsets":[0,12]}})", 16);
  EXPECT_NE(error_of(span).find("does not match"), std::string::npos);
  auto overlap = make_file(
      R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
      12);
  EXPECT_NE(error_of(overlap).find("overlap"), std::string::npos);
  auto negative = make_file(R"({"a":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}})", 4);
  EXPECT_NE(error_of(negative).find("negative"), std::string::npos);
  std::string huge(8, '\0');
  uint64_t len = kMaxSafetensorsHeader + 1;
  std::memcpy(huge.data(), &len, 8);
  EXPECT_NE(error_of(huge).find("exceeds"), std::string::npos);
  std::string past(8, '\0');
  len = 100;
  std::memcpy(past.data(), &len, 8);
  EXPECT_NE(error_of(past + "{}").find("truncated"), std::string::npos);
}

TEST(SafetensorsHeader, TruncationAtEveryLengthIsRefusedCleanly) {
  auto f = make_file(R"({"w":{"dtype":"F16","shape":[3,5],"data_offsets":[0,30]}})", 30);
  for (size_t n = 0; n < f.size(); ++n) EXPECT_FALSE(error_of(f.substr(0, n)).empty()) << n;
  EXPECT_TRUE(error_of(f).empty());
}

class CheckpointFiles : public ::testing::Test {
 protected:
  std::filesystem::path dir = std::filesystem::temp_directory_path() /
                              ("fs-ck-" + std::to_string(::getpid()) + "-" +
                               ::testing::UnitTest::GetInstance()->current_test_info()->name());
  void SetUp() override { std::filesystem::create_directories(dir); }
  void TearDown() override { std::filesystem::remove_all(dir); }
};

TEST_F(CheckpointFiles, ShardedIndexAndEveryDtypeLoad) {
  write_safetensors(dir / "a.safetensors", {random_tensor("x", DType::BF16, {4, 8}, 1.0f, 1)});
  write_safetensors(dir / "b.safetensors",
                    {random_tensor("y", DType::F16, {3}, 1.0f, 2), random_tensor("z", DType::F32, {5}, 1.0f, 3)});
  std::ofstream(dir / "model.safetensors.index.json")
      << R"({"weight_map":{"x":"a.safetensors","y":"b.safetensors","z":"b.safetensors"}})";
  auto ck = Checkpoint::open(dir);
  EXPECT_EQ(ck->names().size(), 3u);
  EXPECT_EQ(ck->get("y").dtype(), DType::F16);
  EXPECT_EQ(ck->get("z").shape(), std::vector<int64_t>{5});
  EXPECT_EQ(ck->total_bytes(), 4u * 8 * 2 + 3 * 2 + 5 * 4);
  try {
    ck->get("missing.weight");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("missing tensor missing.weight"), std::string::npos);
  }
}

TEST_F(CheckpointFiles, TruncatedFileAndEscapingShardAreRefused) {
  write_safetensors(dir / "model.safetensors", {random_tensor("x", DType::F32, {64}, 1.0f, 1)});
  std::filesystem::resize_file(dir / "model.safetensors", std::filesystem::file_size(dir / "model.safetensors") - 4);
  EXPECT_THROW(Checkpoint::open(dir), Error);
  std::filesystem::remove(dir / "model.safetensors");
  std::ofstream(dir / "model.safetensors.index.json") << R"({"weight_map":{"x":"../etc/passwd"}})";
  EXPECT_THROW(Checkpoint::open(dir), Error);
}

TEST_F(CheckpointFiles, EmptyFolderIsRefusedByName) {
  try {
    Checkpoint::open(dir);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("no model.safetensors"), std::string::npos);
  }
}

}  // namespace
}  // namespace fs
