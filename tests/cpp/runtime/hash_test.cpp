// Tests for runtime/hash.h: SHA-256 against the FIPS 180-4 examples, and streaming updates in
// arbitrary pieces against one-shot hashing.
#include "coil/runtime/hash.h"

#include <gtest/gtest.h>

#include <stdexcept>
#include <string>

namespace coil::runtime {
namespace {

TEST(Sha256, EmptyString) {
  EXPECT_EQ(sha256_hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
}

TEST(Sha256, Abc) {
  EXPECT_EQ(sha256_hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

TEST(Sha256, TwoBlockMessage) {
  // 56 bytes: the length no longer fits in the first block, so padding takes a second one.
  EXPECT_EQ(sha256_hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
}

TEST(Sha256, MillionAs) {
  EXPECT_EQ(sha256_hex(std::string(1000000, 'a')),
            "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

TEST(Sha256, MillionAsFedInOddPieces) {
  Sha256 hasher;
  std::string piece(997, 'a');
  size_t fed = 0;
  while (fed + piece.size() <= 1000000) {
    hasher.update(piece);
    fed += piece.size();
  }
  hasher.update(std::string(1000000 - fed, 'a'));
  EXPECT_EQ(hasher.hex_digest(),
            "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

TEST(Sha256, StreamingMatchesOneShotAroundBlockBoundaries) {
  std::string text;
  for (int i = 0; i < 200; ++i) text.push_back(char('a' + (i * 7) % 26));
  for (size_t length : {0, 1, 55, 56, 57, 63, 64, 65, 119, 120, 128, 200}) {
    std::string message = text.substr(0, length);
    std::string expected = sha256_hex(message);
    for (size_t split = 0; split <= length; split += 9) {
      Sha256 hasher;
      hasher.update(std::string_view(message).substr(0, split));
      hasher.update(std::string_view(message).substr(split));
      EXPECT_EQ(hasher.hex_digest(), expected) << "length " << length << ", split " << split;
    }
  }
}

TEST(Sha256, DigestIsStableAndUpdateAfterDigestThrows) {
  Sha256 hasher;
  hasher.update("abc");
  std::string first = hasher.hex_digest();
  EXPECT_EQ(hasher.hex_digest(), first);
  EXPECT_THROW(hasher.update("more"), std::logic_error);
}

}  // namespace
}  // namespace coil::runtime
