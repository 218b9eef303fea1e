// The CPU executor: binds a Plan to kernel/builtin function pointers, owns the arena and the
// thread pool, checks caller tensors, and runs steps in order. The C ABI (model_abi.cpp) wraps it.
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "nnc/model.h"
#include "runtime/plan.h"
#include "runtime/thread_pool.h"

namespace nnc::rt {

// Resolves a step's symbol to its function: generated kernels (from the JIT or the model.so's own
// table) and builtins (runtime/builtins.h).
struct SymbolTable {
  std::vector<std::pair<std::string, KernelFn>> kernels;
};

class Executor {
 public:
  // weights must outlive the executor. Fails with a message when a symbol is missing or the plan
  // is inconsistent.
  static std::unique_ptr<Executor> create(Plan plan, const uint8_t* weights, const SymbolTable& symbols,
                                          int numThreads, std::string* error);
  const Plan& plan() const { return plan_; }
  // Checks every tensor (count, null data, dtype, rank, shape, size) before running anything.
  nnc_status run(const nnc_tensor* inputs, size_t numInputs, nnc_tensor* outputs, size_t numOutputs,
                 std::string* error);
  // Runs one step at a time: for per-step timings (nnc bench --profile).
  int numThreads() const { return pool_ ? pool_->numThreads() : 1; }

 private:
  Executor() = default;
  Plan plan_;
  const uint8_t* weights_ = nullptr;
  std::vector<uint8_t> arenaStorage_;
  uint8_t* arena_ = nullptr;
  std::vector<KernelFn> kernelFns_;   // per step (null for builtins)
  std::vector<BuiltinFn> builtinFns_; // per step (null for kernels)
  std::unique_ptr<ThreadPool> pool_;
  std::mutex runMutex_;
};

}  // namespace nnc::rt
