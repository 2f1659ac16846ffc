#include "rt/hash.h"

#include <gtest/gtest.h>

#include <string>

namespace {

// FIPS 180-4 / NIST example vectors, plus the padding edge cases of 55 and 64 bytes (checked with
// coreutils sha256sum).
struct Vector {
  std::string input;
  const char* sha256;
};

const Vector kVectors[] = {
    {"", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"},
    {"abc", "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"},
    {"abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq",
     "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"},
    {"abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmnoijklmnopjklmnopqklmnopqrlmnopqrsmnopqrstnopqrstu",
     "cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1"},
    {std::string(1000000, 'a'), "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0"},
    {std::string(55, 'x'), "d5e285683cd4efc02d021a5c62014694958901005d6f71e89e0989fac77e4072"},
    {std::string(64, 'y'), "ffbf30ab94107b2c14d75cfb455ec94f200400ddc5ce304e0c21894090db055f"},
};

TEST(Hash, Sha256Vectors) {
  for (const Vector& v : kVectors) EXPECT_EQ(rt::content_hash(v.input), v.sha256) << "input size " << v.input.size();
}

TEST(Hash, IncrementalEqualsOneShotAtEverySplit) {
  for (const Vector& v : kVectors) {
    if (v.input.size() > 200) continue;
    for (size_t split = 0; split <= v.input.size(); ++split) {
      rt::Hasher h;
      h.update(std::string_view(v.input).substr(0, split)).update(std::string_view(v.input).substr(split));
      ASSERT_EQ(h.hex(), v.sha256) << "split at " << split;
    }
  }
  // Byte by byte through many blocks, and hex() does not end the hasher.
  rt::Hasher h;
  for (int i = 0; i < 1000000; ++i) h.update("a");
  EXPECT_EQ(h.hex(), kVectors[4].sha256);
  EXPECT_EQ(h.hex(), kVectors[4].sha256);
  h.update("b");
  EXPECT_NE(h.hex(), kVectors[4].sha256);
}

TEST(Hash, FieldsAreUnambiguous) {
  EXPECT_NE(rt::Hasher().field("ab").field("c").hex(), rt::Hasher().field("a").field("bc").hex());
  EXPECT_NE(rt::Hasher().field("").field("x").hex(), rt::Hasher().field("x").field("").hex());
  EXPECT_EQ(rt::Hasher().field("ab").field("c").hex(), rt::Hasher().field("ab").field("c").hex());
  const auto digest = rt::Hasher().update("abc").digest();
  EXPECT_EQ(digest[0], 0xba);
  EXPECT_EQ(digest[31], 0xad);
}

}  // namespace
