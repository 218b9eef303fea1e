// nnc_model_create for a model.so compiled with --target=cuda (library nnc_runtime_cuda_aot): reads
// the plan, weights and CUDA module images that the compiler embedded in the same shared library
// and creates the CUDA executor. The CPU entry (runtime/aot_entry.cpp) is not linked into such a
// library, so a cuda model.so needs no generated host code and no kernel table.
//
// Symbols the model.so must define (the driver's .incbin assembly):
//   const uint8_t  nnc_embedded_plan[];          serializePlan() bytes, target cuda
//   const uint64_t nnc_embedded_plan_size;
//   const uint8_t  nnc_embedded_weights[];       the weights blob (may be empty)
//   const uint64_t nnc_embedded_weights_size;
//   const uint8_t  nnc_embedded_cubin[];         NVRTC's cubin for the --gpu-arch architecture
//   const uint64_t nnc_embedded_cubin_size;
//   const char     nnc_embedded_ptx[];           its PTX, NUL-terminated (for newer GPUs)
//   const uint64_t nnc_embedded_ptx_size;        without the NUL
//   const char     nnc_embedded_cuda_source[];   the CUDA C++ source for the emulator (emulator.h)
//   const uint64_t nnc_embedded_cuda_source_size; without the NUL
#include "runtime/cuda/cuda_executor.h"

#define NNC_EMBEDDED extern __attribute__((visibility("hidden")))
extern "C" {
NNC_EMBEDDED const uint8_t nnc_embedded_plan[];
NNC_EMBEDDED const uint64_t nnc_embedded_plan_size;
NNC_EMBEDDED const uint8_t nnc_embedded_weights[];
NNC_EMBEDDED const uint64_t nnc_embedded_weights_size;
NNC_EMBEDDED const uint8_t nnc_embedded_cubin[];
NNC_EMBEDDED const uint64_t nnc_embedded_cubin_size;
NNC_EMBEDDED const char nnc_embedded_ptx[];
NNC_EMBEDDED const uint64_t nnc_embedded_ptx_size;
NNC_EMBEDDED const char nnc_embedded_cuda_source[];
NNC_EMBEDDED const uint64_t nnc_embedded_cuda_source_size;
}

namespace {

nnc_status fail(nnc_status status, const std::string& message) {
  // A missing device is not a broken model: its message is the one users see, unprefixed.
  nnc::rt::setThreadLastError(status == NNC_ERROR_NO_DEVICE ? message : "nnc_model_create: " + message);
  return status;
}

}  // namespace

extern "C" nnc_status nnc_model_create(nnc_model** m, const nnc_options* opts) {
  if (!m) return fail(NNC_ERROR_INVALID_ARGUMENT, "m is null");
  *m = nullptr;

  nnc::rt::Plan plan;
  std::string error;
  if (!nnc::rt::deserializePlan(nnc_embedded_plan, static_cast<size_t>(nnc_embedded_plan_size), &plan, &error))
    return fail(NNC_ERROR_INTERNAL, "corrupt embedded plan: " + error);
  if (plan.target != nnc::rt::Target::Cuda)
    return fail(NNC_ERROR_INTERNAL, "the embedded plan is not for the cuda target");
  if (nnc_embedded_weights_size < plan.weightsSize)
    return fail(NNC_ERROR_INTERNAL, "embedded weights have " + std::to_string(nnc_embedded_weights_size) +
                                        " bytes, the plan needs " + std::to_string(plan.weightsSize));

  nnc::rt::cuda::ModuleImages images;
  images.cubin = nnc_embedded_cubin;
  images.cubinSize = static_cast<size_t>(nnc_embedded_cubin_size);
  images.ptx = nnc_embedded_ptx;
  images.ptxSize = static_cast<size_t>(nnc_embedded_ptx_size);
  images.source = nnc_embedded_cuda_source;
  images.sourceSize = static_cast<size_t>(nnc_embedded_cuda_source_size);

  nnc_status status = NNC_OK;
  // The embedded weights live as long as the library: nothing to keep alive.
  nnc_model* model = nnc::rt::cuda::createCudaModelHandle(std::move(plan), nnc_embedded_weights, nullptr, images, opts,
                                                          &error, &status);
  if (!model) return fail(status, error);
  *m = model;
  return NNC_OK;
}
