// Helpers for the hostile-input, leak and out-of-memory tests (issue 4): the C ABI of a dlopen'd
// model.so, memory figures from /proc/self/statm, and running the nnc binary under an address-space
// limit (RLIMIT_AS) so that "out of memory" can be provoked on any machine.
#pragma once

#include <dlfcn.h>
#include <sys/resource.h>

#include <cstdint>
#include <fstream>
#include <string>
#include <type_traits>
#include <vector>

#include "driver/compiler.h"
#include "tests/tools/nnc_cli_util.h"

namespace nnc::testing {

// The C ABI of one model.so, looked up with dlsym (the library stays loaded for the process).
struct SoApi {
  decltype(&nnc_model_create) create = nullptr;
  decltype(&nnc_model_num_outputs) numOutputs = nullptr;
  decltype(&nnc_model_output_info) outputInfo = nullptr;
  decltype(&nnc_model_run) run = nullptr;
  decltype(&nnc_model_last_error) modelLastError = nullptr;
  decltype(&nnc_last_error) lastError = nullptr;
  decltype(&nnc_model_destroy) destroy = nullptr;
};

inline bool openSo(const std::string& path, SoApi* api, std::string* error) {
  void* lib = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    *error = dlerror();
    return false;
  }
  auto sym = [&](auto& fn, const char* name) {
    fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(lib, name));
    return fn != nullptr;
  };
  if (sym(api->create, "nnc_model_create") && sym(api->numOutputs, "nnc_model_num_outputs") &&
      sym(api->outputInfo, "nnc_model_output_info") && sym(api->run, "nnc_model_run") &&
      sym(api->modelLastError, "nnc_model_last_error") && sym(api->lastError, "nnc_last_error") &&
      sym(api->destroy, "nnc_model_destroy"))
    return true;
  *error = "a C ABI symbol is missing from " + path;
  return false;
}

inline nnc_tensor tensorArg(const Tensor& t) {
  return {const_cast<std::byte*>(t.data()), t.byteSize(), static_cast<nnc_dtype>(dtypeToOnnx(t.dtype())),
          t.shape().rank(), t.shape().dims().data()};
}

// Runs a handle on `inputs`; outputs are allocated from the model's output info.
inline Expected<std::vector<Tensor>> runSo(const SoApi& api, nnc_model* m, const std::vector<Tensor>& inputs) {
  std::vector<nnc_tensor> in;
  for (const Tensor& t : inputs) in.push_back(tensorArg(t));
  std::vector<Tensor> outputs;
  for (size_t i = 0; i < api.numOutputs(m); ++i) {
    nnc_tensor_info info;
    if (api.outputInfo(m, i, &info) != NNC_OK) return Status::error(api.modelLastError(m));
    outputs.emplace_back(*dtypeFromOnnx(info.dtype), Shape(std::vector<int64_t>(info.shape, info.shape + info.rank)));
  }
  std::vector<nnc_tensor> out;
  for (Tensor& t : outputs) {
    nnc_tensor a = tensorArg(t);
    a.data = t.mutableData();  // own the buffer before handing out its address
    out.push_back(a);
  }
  if (api.run(m, in.data(), in.size(), out.data(), out.size()) != NNC_OK) return Status::error(api.modelLastError(m));
  return outputs;
}

// Resident and virtual size of this process, in bytes (/proc/self/statm counts pages).
inline size_t residentBytes() {
  std::ifstream statm("/proc/self/statm");
  size_t size = 0, resident = 0;
  statm >> size >> resident;
  return resident * static_cast<size_t>(sysconf(_SC_PAGESIZE));
}
inline size_t virtualBytes() {
  std::ifstream statm("/proc/self/statm");
  size_t size = 0;
  statm >> size;
  return size * static_cast<size_t>(sysconf(_SC_PAGESIZE));
}

// Caps this process's address space (soft limit only, so the hard limit is left for others).
inline bool limitAddressSpace(size_t bytes) {
  rlimit r{};
  if (getrlimit(RLIMIT_AS, &r) != 0) return false;
  r.rlim_cur = static_cast<rlim_t>(bytes);
  return setrlimit(RLIMIT_AS, &r) == 0;
}

// Whether RLIMIT_AS can be used: an AddressSanitizer build reserves terabytes of shadow address
// space at startup, so under any realistic limit it cannot even start.
#if defined(NNC_TESTS_UNDER_ASAN)
inline constexpr bool kAddressLimitsWork = false;
#else
inline constexpr bool kAddressLimitsWork = true;
#endif

// runNnc (nnc_cli_util.h) with the child's address space capped at `asLimit` bytes: allocations
// beyond it fail as they would on a machine without the memory. (Without a cap where
// kAddressLimitsWork is false; callers that need the cap to be safe check it themselves.)
inline RunResult runNncLimited(const std::vector<std::string>& args, const std::string& cwd, size_t asLimit) {
  auto limit = [](size_t bytes) { return !kAddressLimitsWork || limitAddressSpace(bytes); };
  return runNnc(args, cwd, {}, limit, asLimit);
}

}  // namespace nnc::testing
