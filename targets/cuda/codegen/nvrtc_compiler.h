// CUDA C++ source -> cubin (for one real architecture) and PTX through NVRTC, with an on-disk kernel
// cache. Needs the NVRTC library only; no GPU or driver.
//
// One NVRTC compile with -arch=sm_XX gives both images: the cubin (nvrtcGetCUBIN) and the PTX it was
// generated from (nvrtcGetPTX, `.target sm_XX`, i.e. compute_XX), which newer GPUs JIT-compile.
//
// Cache: key = hash of (source, options, arch, NVRTC version); entries live in $NNC_CACHE_DIR, else
// ~/.cache/nnc/kernels, one file per key, written atomically (temporary file + rename), so
// concurrent compilers at worst both compile. An unreadable or corrupt entry is a miss.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "nnc/status.h"

namespace nnc::codegen::cuda {

struct NvrtcOptions {
  std::string arch = "sm_90";             // a real architecture: sm_80, sm_90, ...
  std::vector<std::string> extraOptions;  // appended to the defaults (-std=c++17 --fmad=false)
  bool useCache = true;
  std::string cacheDir;  // empty: $NNC_CACHE_DIR, else $HOME/.cache/nnc/kernels
};

struct CompiledCuda {
  std::vector<uint8_t> cubin;
  std::string ptx;
  std::string log;  // NVRTC's log (warnings), empty when served from the cache
  bool fromCache = false;
};

// `displayName` names the translation unit in errors ("kernel 'nnc_k3_add': nvrtc: ...").
Expected<CompiledCuda> compileCuda(const std::string& source, const std::string& displayName,
                                   const NvrtcOptions& options = {});

// "13.0": the NVRTC library's version (part of the cache key).
std::string nvrtcVersionString();

// The cache directory compileCuda would use for `options`.
std::string kernelCacheDir(const NvrtcOptions& options);

// Process-wide counters, for tests and -v.
struct KernelCacheStats {
  int64_t hits = 0;
  int64_t misses = 0;  // compiled by NVRTC (cache enabled or not)
  int64_t writes = 0;
};
KernelCacheStats kernelCacheStats();

}  // namespace nnc::codegen::cuda
