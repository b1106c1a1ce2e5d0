// SHA-256 against the FIPS 180-4 example vectors, whole and fed in pieces.
#include <gtest/gtest.h>

#include <string>

#include "core/sha256.h"

namespace fs {
namespace {

std::string digest(const std::string& s, size_t piece) {
  Sha256 h;
  for (size_t i = 0; i < s.size(); i += piece) h.update(s.data() + i, std::min(piece, s.size() - i));
  return Sha256::hex(h.finish());
}

TEST(Sha256, FipsExamples) {
  EXPECT_EQ(digest("", 1), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(digest("abc", 1), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  std::string two = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
  for (size_t piece : {1, 7, 64, 1000})
    EXPECT_EQ(digest(two, piece), "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  EXPECT_EQ(digest(std::string(1000000, 'a'), 4096),
            "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

}  // namespace
}  // namespace fs
