// API keys: constant-time comparison, both headers, and the key file's permission check.
#include <gtest/gtest.h>

#include <sys/stat.h>

#include <filesystem>
#include <fstream>

#include "core/error.h"
#include "server/auth.h"

namespace fs::server {
namespace {

TEST(Auth, ConstantTimeEqual) {
  EXPECT_TRUE(constant_time_equal("secret", "secret"));
  EXPECT_FALSE(constant_time_equal("secret", "secreT"));
  EXPECT_FALSE(constant_time_equal("secret", "secret2"));
  EXPECT_FALSE(constant_time_equal("", "x"));
  EXPECT_TRUE(constant_time_equal("", ""));
}

TEST(Auth, AcceptsBearerOrXApiKey) {
  ApiKeys keys({"k1", "k2"});
  EXPECT_TRUE(keys.enabled());
  EXPECT_TRUE(keys.allows("Bearer k1", ""));
  EXPECT_TRUE(keys.allows("bearer k2", ""));
  EXPECT_TRUE(keys.allows("", "k2"));
  EXPECT_TRUE(keys.allows("Bearer wrong", "k1"));
  EXPECT_FALSE(keys.allows("Bearer wrong", ""));
  EXPECT_FALSE(keys.allows("k1", ""));
  EXPECT_FALSE(keys.allows("Basic k1", ""));
  EXPECT_FALSE(keys.allows("Bearer ", ""));
  EXPECT_FALSE(keys.allows("", ""));
  EXPECT_TRUE(ApiKeys().allows("", ""));
}

TEST(Auth, KeyFileMustBePrivate) {
  auto path = std::filesystem::temp_directory_path() / ("foldserve_keys_" + std::to_string(::getpid()));
  {
    std::ofstream f(path);
    f << "# keys\n\n  alpha  \nbeta\r\n";
  }
  ::chmod(path.c_str(), 0644);
  EXPECT_THROW(load_api_key_file(path), Error);
  ::chmod(path.c_str(), 0600);
  EXPECT_EQ(load_api_key_file(path), (std::vector<std::string>{"alpha", "beta"}));
  {
    std::ofstream f(path);
    f << "# only a comment\n";
  }
  EXPECT_THROW(load_api_key_file(path), Error);
  std::filesystem::remove(path);
  EXPECT_THROW(load_api_key_file(path), Error);
}

}  // namespace
}  // namespace fs::server
