// nnc_model_create for a compiled model.so (library nnc_runtime_aot): reads the plan, weights and
// kernel table that the compiler embedded in the same shared library.
//
// Symbols the model.so must define (the driver's .incbin assembly and the LLVM backend emit them):
//   const uint8_t  nnc_embedded_plan[];         serializePlan() bytes
//   const uint64_t nnc_embedded_plan_size;
//   const uint8_t  nnc_embedded_weights[];      the weights blob (may be empty)
//   const NncKernelEntry nnc_model_kernels[];   {name, function} per generated kernel
//   const int64_t  nnc_model_num_kernels;
// Optional (weak; checked when present):
//   const uint64_t nnc_embedded_weights_size;   bytes in nnc_embedded_weights
//   const uint8_t  nnc_embedded_weights_external;  non-zero: the weights are in "<path of .so>.weights"
#include <dlfcn.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>

#include "runtime/model_handle.h"

// The layout the LLVM backend emits for each kernel-table entry.
struct NncKernelEntry {
  const char* name;
  void* fn;
};

#define NNC_EMBEDDED extern __attribute__((visibility("hidden")))
extern "C" {
NNC_EMBEDDED const uint8_t nnc_embedded_plan[];
NNC_EMBEDDED const uint64_t nnc_embedded_plan_size;
NNC_EMBEDDED const uint8_t nnc_embedded_weights[];
NNC_EMBEDDED const NncKernelEntry nnc_model_kernels[];
NNC_EMBEDDED const int64_t nnc_model_num_kernels;
NNC_EMBEDDED __attribute__((weak)) const uint64_t nnc_embedded_weights_size;
NNC_EMBEDDED __attribute__((weak)) const uint8_t nnc_embedded_weights_external;
}

namespace {

nnc_status fail(nnc_status status, std::string message) {
  nnc::rt::setThreadLastError("nnc_model_create: " + message);
  return status;
}

// Maps "<this .so>.weights" read-only. Returns false with a message on failure.
bool mapExternalWeights(uint64_t expectedSize, const uint8_t** weights, std::shared_ptr<void>* keepAlive,
                        std::string* error) {
  Dl_info info{};
  if (!dladdr(reinterpret_cast<void*>(&nnc_model_create), &info) || !info.dli_fname) {
    *error = "cannot find the path of the model library";
    return false;
  }
  std::string path = std::string(info.dli_fname) + ".weights";
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    *error = "cannot open weights file '" + path + "': " + std::strerror(errno);
    return false;
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0 || static_cast<uint64_t>(st.st_size) != expectedSize) {
    *error = "weights file '" + path + "' has " + std::to_string(st.st_size) + " bytes, expected " +
             std::to_string(expectedSize);
    ::close(fd);
    return false;
  }
  if (expectedSize == 0) {
    ::close(fd);
    *weights = nullptr;
    return true;
  }
  void* p = ::mmap(nullptr, expectedSize, PROT_READ, MAP_PRIVATE, fd, 0);
  ::close(fd);
  if (p == MAP_FAILED) {
    *error = "cannot map weights file '" + path + "': " + std::strerror(errno);
    return false;
  }
  size_t length = static_cast<size_t>(expectedSize);
  *keepAlive = std::shared_ptr<void>(p, [length](void* q) { ::munmap(q, length); });
  *weights = static_cast<const uint8_t*>(p);
  return true;
}

}  // namespace

extern "C" nnc_status nnc_model_create(nnc_model** m, const nnc_options* opts) {
  if (!m) return fail(NNC_ERROR_INVALID_ARGUMENT, "m is null");
  *m = nullptr;

  nnc::rt::Plan plan;
  std::string error;
  if (!nnc::rt::deserializePlan(nnc_embedded_plan, static_cast<size_t>(nnc_embedded_plan_size), &plan, &error))
    return fail(NNC_ERROR_INTERNAL, "corrupt embedded plan: " + error);

  const uint8_t* weights = nnc_embedded_weights;
  std::shared_ptr<void> keepAlive;
  if (&nnc_embedded_weights_external && nnc_embedded_weights_external) {
    if (!mapExternalWeights(plan.weightsSize, &weights, &keepAlive, &error)) return fail(NNC_ERROR_INTERNAL, error);
  } else if (&nnc_embedded_weights_size && nnc_embedded_weights_size < plan.weightsSize) {
    return fail(NNC_ERROR_INTERNAL, "embedded weights have " + std::to_string(nnc_embedded_weights_size) +
                                        " bytes, the plan needs " + std::to_string(plan.weightsSize));
  }

  if (nnc_model_num_kernels < 0) return fail(NNC_ERROR_INTERNAL, "corrupt kernel table");
  nnc::rt::SymbolTable symbols;
  symbols.kernels.reserve(static_cast<size_t>(nnc_model_num_kernels));
  for (int64_t i = 0; i < nnc_model_num_kernels; ++i) {
    const NncKernelEntry& e = nnc_model_kernels[i];
    if (!e.name || !e.fn) return fail(NNC_ERROR_INTERNAL, "corrupt kernel table entry " + std::to_string(i));
    symbols.kernels.emplace_back(e.name, reinterpret_cast<nnc::rt::KernelFn>(e.fn));
  }

  nnc_status status = NNC_OK;
  nnc_model* model =
      nnc::rt::createModelHandle(std::move(plan), weights, std::move(keepAlive), symbols, opts, &error, &status);
  if (!model) return fail(status, error);
  *m = model;
  return NNC_OK;
}
