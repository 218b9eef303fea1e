#include "targets/runtime_files.h"

#include <unistd.h>

#include <cstdlib>
#include <filesystem>

namespace nnc {

namespace {

struct Entry {
  const char* basename;
  const char* buildPath;  // where the build tree has it (compile definitions from driver/CMakeLists.txt)
};

Entry entryOf(RuntimeFile file) {
  switch (file) {
    case RuntimeFile::Runtime: return {"libnnc_runtime.a", NNC_RUNTIME_ARCHIVE};
    case RuntimeFile::RuntimeAot: return {"libnnc_runtime_aot.a", NNC_RUNTIME_AOT_ARCHIVE};
    case RuntimeFile::Builtins: return {"libnnc_builtins.a", NNC_BUILTINS_ARCHIVE};
    case RuntimeFile::RuntimeCuda: return {"libnnc_runtime_cuda.a", NNC_RUNTIME_CUDA_ARCHIVE};
    case RuntimeFile::RuntimeCudaAot: return {"libnnc_runtime_cuda_aot.a", NNC_RUNTIME_CUDA_AOT_ARCHIVE};
    case RuntimeFile::VersionScript: return {"model_so.map", NNC_RUNTIME_VERSION_SCRIPT};
    case RuntimeFile::CudaEmulator: return {"libnnc_cuda_emulator.so", NNC_CUDA_EMULATOR_LIBRARY};
  }
  return {"", ""};
}

// <directory of the running executable>/../lib/nnc, or "" when /proc/self/exe cannot be read.
std::string installedDirectory() {
  std::error_code ec;
  const std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec || exe.empty()) return "";
  return (exe.parent_path().parent_path() / "lib" / "nnc").string();
}

}  // namespace

std::string runtimeFile(RuntimeFile file, const std::string& preferred) {
  const Entry e = entryOf(file);
  const char* env = std::getenv("NNC_RUNTIME_DIR");
  for (const std::string& dir : {preferred, std::string(env ? env : ""), installedDirectory()}) {
    if (dir.empty()) continue;
    const std::filesystem::path p = std::filesystem::path(dir) / e.basename;
    std::error_code ec;
    if (std::filesystem::exists(p, ec)) return p.string();
  }
  return e.buildPath;
}

std::string runtimeDirectory(const std::string& preferred) {
  return std::filesystem::path(runtimeFile(RuntimeFile::Runtime, preferred)).parent_path().string();
}

}  // namespace nnc
