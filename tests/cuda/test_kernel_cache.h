// The kernel cache of the cuda tests: $NNC_CACHE_DIR when set (scripts/test.sh sets one for every
// tier), else a cache in the build tree rather than ~/.cache.
#pragma once

#include <cstdlib>

namespace nnc::testing {

inline void useTestKernelCache() {
  static const bool once = [] {
    if (!std::getenv("NNC_CACHE_DIR")) setenv("NNC_CACHE_DIR", NNC_BINARY_DIR "/cuda-kernel-cache", 1);
    return true;
  }();
  (void)once;
}

}  // namespace nnc::testing
