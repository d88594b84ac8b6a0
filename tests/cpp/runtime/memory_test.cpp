// Tests for runtime/memory.h: which huge pages a buffer's advice covers, and that advice never
// changes memory's contents.
#include "coil/runtime/memory.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>

namespace coil::runtime {
namespace {

constexpr std::uintptr_t kMiB = 1 << 20;

TEST(HugePages, OnlyWholeAlignedPagesInsideTheBufferAreAdvised) {
  // 1 MiB in, 9 MiB long: the pages at 2, 4, 6 and 8 MiB lie inside; 10 MiB ends past the end.
  PageRange r = whole_huge_pages(1 * kMiB, 9 * kMiB);
  EXPECT_EQ(r.first, 2 * kMiB);
  EXPECT_EQ(r.bytes, 8 * kMiB);
  // Aligned at both ends: all of it.
  r = whole_huge_pages(4 * kMiB, 6 * kMiB);
  EXPECT_EQ(r.first, 4 * kMiB);
  EXPECT_EQ(r.bytes, 6 * kMiB);
  // 3 MiB from 1 MiB ends at 4 MiB: only the page at 2 MiB.
  r = whole_huge_pages(1 * kMiB, 3 * kMiB);
  EXPECT_EQ(r.first, 2 * kMiB);
  EXPECT_EQ(r.bytes, 2 * kMiB);
}

TEST(HugePages, ABufferHoldingNoWholePageGetsNoAdvice) {
  EXPECT_EQ(whole_huge_pages(1 * kMiB, 2 * kMiB).bytes, 0u);  // 1..3 MiB holds no whole page
  EXPECT_EQ(whole_huge_pages(2 * kMiB, 2 * kMiB - 1).bytes, 0u);
  EXPECT_EQ(whole_huge_pages(0, 0).bytes, 0u);
  EXPECT_EQ(whole_huge_pages(~std::uintptr_t{0} - 100, 1000).bytes, 0u);  // wraps: none
  EXPECT_FALSE(advise_huge_pages(1 * kMiB, 2 * kMiB));
}

TEST(HugePages, AdvisedMemoryKeepsItsContents) {
  // The advice changes how later faults are served, never what the memory holds.
  const std::size_t n = 8 * kMiB;
  auto* p = static_cast<unsigned char*>(std::malloc(n));
  ASSERT_NE(p, nullptr);
  std::memset(p, 0x5a, n / 2);
  advise_huge_pages(reinterpret_cast<std::uintptr_t>(p), n);  // may be refused: either is fine
  std::memset(p + n / 2, 0xa5, n / 2);
  EXPECT_EQ(p[0], 0x5a);
  EXPECT_EQ(p[n / 2 - 1], 0x5a);
  EXPECT_EQ(p[n / 2], 0xa5);
  EXPECT_EQ(p[n - 1], 0xa5);
  std::free(p);
}

}  // namespace
}  // namespace coil::runtime
