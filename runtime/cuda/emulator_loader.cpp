// Opens the CUDA emulator library (see emulator.h) once per process.
#include <dlfcn.h>

#include <cstdlib>
#include <cstring>
#include <vector>

#include "runtime/cuda/dynamic_library.h"
#include "runtime/cuda/emulator.h"

namespace nnc::rt::cuda::emu {
namespace {

struct EmulatorApi {
  const DriverApi* driver = nullptr;
  const CublasLtApi* cublasLt = nullptr;
};

std::vector<std::string> candidates() {
  if (const char* path = std::getenv("NNC_CUDA_EMULATOR"); path && *path) return {path};
  return {NNC_CUDA_EMULATOR_BUILD_PATH, "libnnc_cuda_emulator.so"};
}

OpenedLibrary<EmulatorApi> openOnce() {
  OpenedLibrary<EmulatorApi> o;
  std::string reasons;
  for (const std::string& candidate : candidates()) {
    if (!reasons.empty()) reasons += "; ";
    dlerror();
    void* lib = dlopen(candidate.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
      const char* err = dlerror();
      reasons += err ? std::string(err) : candidate + ": cannot be opened";
      continue;
    }
    const DriverApi* (*driver)() = nullptr;
    const CublasLtApi* (*cublasLt)() = nullptr;
    unsigned long (*abi)() = nullptr;
    std::string missing;
    bool ok = resolveSymbol(lib, "nnc_cuda_emulator_driver", &driver, &missing);
    ok &= resolveSymbol(lib, "nnc_cuda_emulator_cublaslt", &cublasLt, &missing);
    ok &= resolveSymbol(lib, "nnc_cuda_emulator_abi", &abi, &missing);
    if (!ok) {
      reasons += candidate + " lacks " + missing;
      continue;
    }
    if (abi() != emulatorAbi()) {
      reasons += candidate + " was built from other headers than this runtime (ABI " + std::to_string(abi()) +
                 ", expected " + std::to_string(emulatorAbi()) + ")";
      continue;
    }
    o.api.driver = driver();
    o.api.cublasLt = cublasLt();
    o.ok = true;
    return o;
  }
  o.why = "the CUDA emulator (NNC_CUDA_EMULATE is set) could not be opened: " + reasons;
  return o;
}

}  // namespace

bool emulationRequested() {
  const char* v = std::getenv("NNC_CUDA_EMULATE");
  return v && *v && std::strcmp(v, "0") != 0;
}

const DriverApi* openEmulatedDriver(std::string* why) {
  const EmulatorApi* api = openOncePerProcess(openOnce, why);
  return api ? api->driver : nullptr;
}

const CublasLtApi* openEmulatedCublasLt(std::string* why) {
  const EmulatorApi* api = openOncePerProcess(openOnce, why);
  return api ? api->cublasLt : nullptr;
}

}  // namespace nnc::rt::cuda::emu
