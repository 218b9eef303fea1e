// The nnc_model behind the C ABI handle, and how the JIT and a model.so's nnc_model_create make one.
#pragma once

#include <memory>
#include <mutex>
#include <string>

#include "nnc/model.h"
#include "runtime/executor.h"
#include "runtime/plan.h"

namespace nnc::rt {

// An executor for another target (runtime/cuda): what the C ABI needs of it. The CPU Executor is
// used directly; a handle has exactly one of the two.
class DeviceExecutor {
 public:
  virtual ~DeviceExecutor() = default;
  virtual const Plan& plan() const = 0;
  // As Executor::run: checks every caller tensor first; runs are serialised.
  virtual nnc_status run(const nnc_tensor* inputs, size_t numInputs, nnc_tensor* outputs, size_t numOutputs,
                         std::string* error) = 0;
};

}  // namespace nnc::rt

struct nnc_model {
  std::shared_ptr<void> keepAlive;  // declared first: destroyed last (it may own the weights)
  std::unique_ptr<nnc::rt::Executor> executor;
  std::unique_ptr<nnc::rt::DeviceExecutor> device;  // set instead of executor for a cuda plan

  const nnc::rt::Plan& plan() const { return device ? device->plan() : executor->plan(); }
  // The last failure on this handle; guarded by errorMutex (the info functions take a const handle).
  mutable std::mutex errorMutex;
  mutable std::string lastError;
};

namespace nnc::rt {

// Builds an executor for `plan` and wraps it in a handle for the C ABI. `weights` must stay valid
// while keepAlive (which the handle holds) lives. opts may be null. Returns null and sets *error
// (and *status, when given: NNC_ERROR_INVALID_ARGUMENT for bad options, NNC_ERROR_OUT_OF_MEMORY,
// or NNC_ERROR_INTERNAL for an inconsistent plan or a missing symbol) on failure.
nnc_model* createModelHandle(Plan plan, const uint8_t* weights, std::shared_ptr<void> keepAlive,
                             const SymbolTable& symbols, const nnc_options* opts, std::string* error,
                             nnc_status* status = nullptr);

// Sets the message nnc_last_error() returns on this thread.
void setThreadLastError(std::string message);

}  // namespace nnc::rt
