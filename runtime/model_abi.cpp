// The C ABI of include/nnc/model.h (all but nnc_model_create, which the JIT and aot_entry.cpp
// provide) over an Executor. Every entry point checks its pointers and indices: bad arguments give
// NNC_ERROR_INVALID_ARGUMENT and a message, never a crash.
#include <cstddef>
#include <new>

#include "runtime/cpu_features.h"
#include "runtime/model_handle.h"

namespace {

thread_local std::string tlsLastError;

void setModelError(const nnc_model* m, std::string message) {
  std::lock_guard<std::mutex> lock(m->errorMutex);
  m->lastError = std::move(message);
}

nnc_status tensorInfo(const nnc_model* m, size_t index, nnc_tensor_info* info, bool isOutput) {
  const char* what = isOutput ? "output" : "input";
  if (!m) {
    tlsLastError = "model is null";
    return NNC_ERROR_INVALID_ARGUMENT;
  }
  const auto& descs = isOutput ? m->plan().outputs : m->plan().inputs;
  if (index >= descs.size()) {
    setModelError(m, std::string(what) + " index " + std::to_string(index) + " out of range (the model has " +
                         std::to_string(descs.size()) + " " + what + "s)");
    return NNC_ERROR_INVALID_ARGUMENT;
  }
  if (!info) {
    setModelError(m, "info is null");
    return NNC_ERROR_INVALID_ARGUMENT;
  }
  const nnc::rt::TensorDesc& d = descs[index];
  *info = nnc_tensor_info{};
  info->name = d.name.c_str();  // lives as long as the handle (the executor owns the plan)
  info->dtype = static_cast<nnc_dtype>(d.dtype);
  info->rank = static_cast<int32_t>(d.shape.size());
  for (size_t i = 0; i < d.shape.size(); ++i) info->shape[i] = d.shape[i];
  return NNC_OK;
}

}  // namespace

namespace nnc::rt {

// The first nnc_options was {size_t, int32_t} plus padding, which old callers may leave unset: a
// field added later must lie past it, or an old struct_size would make us read that padding.
static_assert(offsetof(nnc_options, device_buffers) >= sizeof(size_t) + 2 * sizeof(int32_t),
              "nnc_options fields added after version 1 must lie past its padding");

void setThreadLastError(std::string message) { tlsLastError = std::move(message); }

nnc_model* createModelHandle(Plan plan, const uint8_t* weights, std::shared_ptr<void> keepAlive,
                             const SymbolTable& symbols, const nnc_options* opts, std::string* error,
                             nnc_status* status) {
  auto failWith = [&](nnc_status st, std::string message) -> nnc_model* {
    if (error) *error = std::move(message);
    if (status) *status = st;
    return nullptr;
  };
  int numThreads = 0;
  if (opts) {
    if (opts->struct_size < sizeof(size_t))
      return failWith(NNC_ERROR_INVALID_ARGUMENT, "nnc_options.struct_size is " + std::to_string(opts->struct_size) +
                                                      ", expected sizeof(nnc_options)");
    // Older callers pass a shorter struct: read only the fields it has.
    if (opts->struct_size >= offsetof(nnc_options, num_threads) + sizeof(opts->num_threads))
      numThreads = opts->num_threads;
    if (opts->struct_size >= offsetof(nnc_options, device_buffers) + sizeof(opts->device_buffers) &&
        opts->device_buffers != 0)
      return failWith(NNC_ERROR_INVALID_ARGUMENT,
                      "nnc_options.device_buffers is " + std::to_string(opts->device_buffers) +
                          ": device buffers exist for cuda models only (this model was compiled for the cpu)");
  }
  std::string unsupported;
  if (!ensureCpuFeatures(plan.cpuFeatures, &unsupported)) return failWith(NNC_ERROR_INVALID_ARGUMENT, unsupported);
  std::unique_ptr<nnc_model> m(new (std::nothrow) nnc_model());
  if (!m) return failWith(NNC_ERROR_OUT_OF_MEMORY, "out of memory creating the model");
  m->keepAlive = std::move(keepAlive);
  std::string message;
  m->executor = Executor::create(std::move(plan), weights, symbols, numThreads, &message);
  if (!m->executor) {
    bool oom = message.rfind("out of memory", 0) == 0;
    return failWith(oom ? NNC_ERROR_OUT_OF_MEMORY : NNC_ERROR_INTERNAL, std::move(message));
  }
  if (status) *status = NNC_OK;
  return m.release();
}

}  // namespace nnc::rt

extern "C" {

size_t nnc_model_num_inputs(const nnc_model* m) { return m ? m->plan().inputs.size() : 0; }

size_t nnc_model_num_outputs(const nnc_model* m) { return m ? m->plan().outputs.size() : 0; }

nnc_status nnc_model_input_info(const nnc_model* m, size_t index, nnc_tensor_info* info) {
  return tensorInfo(m, index, info, /*isOutput=*/false);
}

nnc_status nnc_model_output_info(const nnc_model* m, size_t index, nnc_tensor_info* info) {
  return tensorInfo(m, index, info, /*isOutput=*/true);
}

nnc_status nnc_model_run(nnc_model* m, const nnc_tensor* inputs, size_t num_inputs, nnc_tensor* outputs,
                         size_t num_outputs) {
  if (!m) {
    tlsLastError = "model is null";
    return NNC_ERROR_INVALID_ARGUMENT;
  }
  std::string error;
  nnc_status st = m->device ? m->device->run(inputs, num_inputs, outputs, num_outputs, &error)
                            : m->executor->run(inputs, num_inputs, outputs, num_outputs, &error);
  // Only failures touch lastError, so concurrent successful runs share nothing but the executor.
  if (st != NNC_OK) setModelError(m, std::move(error));
  return st;
}

const char* nnc_model_last_error(const nnc_model* m) {
  if (!m) return "model is null";
  std::lock_guard<std::mutex> lock(m->errorMutex);
  return m->lastError.c_str();
}

const char* nnc_last_error(void) { return tlsLastError.c_str(); }

void nnc_model_destroy(nnc_model* m) { delete m; }

}  // extern "C"
