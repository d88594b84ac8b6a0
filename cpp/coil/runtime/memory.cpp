#include "coil/runtime/memory.h"

#if defined(__linux__)
#include <sys/mman.h>
#endif

namespace coil::runtime {

PageRange whole_huge_pages(std::uintptr_t address, std::size_t nbytes) {
  const std::uintptr_t mask = kHugePageBytes - 1;
  std::uintptr_t first = (address + mask) & ~mask;
  std::uintptr_t end = (address + nbytes) & ~mask;
  if (address + nbytes < address || end <= first) return {};
  return {first, static_cast<std::size_t>(end - first)};
}

bool advise_huge_pages(std::uintptr_t address, std::size_t nbytes) {
  PageRange r = whole_huge_pages(address, nbytes);
  if (r.bytes == 0) return false;
#if defined(__linux__) && defined(MADV_HUGEPAGE)
  return madvise(reinterpret_cast<void*>(r.first), r.bytes, MADV_HUGEPAGE) == 0;
#else
  return false;
#endif
}

}  // namespace coil::runtime
