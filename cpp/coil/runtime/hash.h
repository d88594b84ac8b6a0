// runtime::Sha256 — the content hash behind coil's on-disk caches.
//
// A plain, dependency-free SHA-256 (FIPS 180-4). It is used for cache keys (over kernel source,
// compiler and flags) and for checking that a cached shared library is intact, so it must be
// exact and stable across runs and machines; it does not need to be fast beyond "hashing a few
// hundred kilobytes is negligible next to running a compiler". Digests print as 64 lowercase hex
// characters.
//
// Streaming use: construct, update() any number of times, then hex_digest() once (finishing the
// hash; calling update() afterwards is a programming error and throws std::logic_error).
//
// Tests: tests/cpp/runtime/hash_test.cpp.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace coil::runtime {

class Sha256 {
 public:
  Sha256();
  void update(const void* data, size_t size);
  void update(std::string_view text) { update(text.data(), text.size()); }
  // Finishes the hash and returns it as 64 lowercase hex characters.
  std::string hex_digest();

 private:
  void compress(const uint8_t* block);

  std::array<uint32_t, 8> state_;
  std::array<uint8_t, 64> buffer_;
  size_t buffered_ = 0;       // bytes waiting in buffer_
  uint64_t total_bytes_ = 0;  // message length so far
  bool finished_ = false;
};

// The SHA-256 of `data` as 64 lowercase hex characters.
std::string sha256_hex(std::string_view data);

}  // namespace coil::runtime
