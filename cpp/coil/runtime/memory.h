// runtime memory: advice to the kernel about large CPU buffers.
//
// A CPU buffer of many megabytes is usually fresh memory from mmap (glibc maps allocations above
// its threshold, at most 32 MiB, and unmaps them on free), so each call pays a page fault per
// 4 KiB page on its first write. On a virtual machine that costs more than the write: 64 MiB took
// 11-16 ms to fill fresh against 3.3 ms already mapped (2 cores, 2026-12-03). Transparent huge
// pages fault 2 MiB at a time (5 ms for the same fill). Where the system leaves huge pages to
// madvise (the common default), advise_huge_pages asks for them over the whole 2 MiB pages inside
// [address, address + nbytes), before anything has been written there.
//
// Tests: tests/cpp/runtime/memory_test.cpp.
#pragma once

#include <cstddef>
#include <cstdint>

namespace coil::runtime {

inline constexpr std::size_t kHugePageBytes = std::size_t{2} << 20;

// The 2 MiB-aligned pages inside [address, address + nbytes): {first, bytes}, bytes 0 when none.
struct PageRange {
  std::uintptr_t first = 0;
  std::size_t bytes = 0;
};
PageRange whole_huge_pages(std::uintptr_t address, std::size_t nbytes);

// madvise(MADV_HUGEPAGE) over whole_huge_pages(address, nbytes). False where there is nothing to
// advise, the platform has no such advice, or the kernel refused it (the memory is unchanged
// then: the advice only changes how later faults are served).
bool advise_huge_pages(std::uintptr_t address, std::size_t nbytes);

}  // namespace coil::runtime
