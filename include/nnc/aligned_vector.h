// Vectors whose storage starts on a cache line, for the buffers kernels read in place with 64-byte
// vectors (host tensors, the weights blob): at std::vector's 16-byte alignment every such access
// straddled two lines.
#pragma once

#include <sys/mman.h>

#include <cstddef>
#include <cstdint>
#include <new>
#include <vector>

namespace nnc {

inline constexpr std::size_t kCacheLineBytes = 64;
inline constexpr std::size_t kHugePageBytes = std::size_t{2} << 20;

// kHugePages: allocations of a huge page or more start on one and are advised for transparent huge
// pages. For the in-process weights blob: ResNet-18 in-process ran ~10% slower than the same
// model.so with the blob 16-byte aligned, ~5% with it 64-byte aligned on 4 KiB pages, the same on huge
// pages (bench/NOTES.md, eleventh session).
template <class T, bool kHugePages = false>
struct AlignedAllocator {
  using value_type = T;
  template <class U>
  struct rebind {
    using other = AlignedAllocator<U, kHugePages>;
  };
  AlignedAllocator() = default;
  template <class U>
  AlignedAllocator(const AlignedAllocator<U, kHugePages>&) noexcept {}

  T* allocate(std::size_t n) {
    const std::size_t bytes = n * sizeof(T), align = alignment(bytes);
    T* p = static_cast<T*>(::operator new (bytes, std::align_val_t{align}));
    if (align == kHugePageBytes) ::madvise(p, bytes / kHugePageBytes * kHugePageBytes, MADV_HUGEPAGE);  // a hint
    return p;
  }
  void deallocate(T* p, std::size_t n) noexcept {
    // Unsized: clang before 19 declares the sized form only with -fsized-deallocation.
    ::operator delete (p, std::align_val_t{alignment(n * sizeof(T))});
  }
  template <class U>
  bool operator==(const AlignedAllocator<U, kHugePages>&) const noexcept {
    return true;
  }

 private:
  static std::size_t alignment(std::size_t bytes) {
    return kHugePages && bytes >= kHugePageBytes ? kHugePageBytes : kCacheLineBytes;
  }
};

template <class T>
using CacheAlignedVector = std::vector<T, AlignedAllocator<T>>;

// The weights blob of a compiled model (each weight at a multiple of 64 bytes in it).
using WeightsBlob = std::vector<uint8_t, AlignedAllocator<uint8_t, /*kHugePages=*/true>>;

}  // namespace nnc
