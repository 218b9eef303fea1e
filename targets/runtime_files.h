// Where the files a model.so is linked from live: the runtime archives and the version script.
// Looked up, in order, in `preferred` (CompileOptions::runtimeDir); in $NNC_RUNTIME_DIR; in
// <directory of this executable>/../lib/nnc (an installed, possibly relocated tree: `cmake
// --install`); in the build tree nnc was built in.
#pragma once

#include <string>

namespace nnc {

enum class RuntimeFile {
  Runtime,         // libnnc_runtime.a: the plan executor, thread pool, C ABI
  RuntimeAot,      // libnnc_runtime_aot.a: nnc_model_create of a model.so
  Builtins,        // libnnc_builtins.a: host kernels of opaque ops
  RuntimeCuda,     // libnnc_runtime_cuda.a
  RuntimeCudaAot,  // libnnc_runtime_cuda_aot.a
  VersionScript,   // model_so.map: exports exactly the C ABI
  CudaEmulator,    // libnnc_cuda_emulator.so: the CUDA emulator (runtime/cuda/emulator.h), not linked
};

// The path of `file`, by the order above (the build tree's path when no other has it).
std::string runtimeFile(RuntimeFile file, const std::string& preferred = "");

// The directory runtimeFile(RuntimeFile::Runtime, preferred) is in (for `nnc -v`).
std::string runtimeDirectory(const std::string& preferred = "");

}  // namespace nnc
