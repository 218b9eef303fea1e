// The CPU executor: binds a Plan to kernel/builtin function pointers, owns the arena and the
// thread pool, checks caller tensors, and runs steps in order. The C ABI (model_abi.cpp) wraps it.
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "builtins/builtins.h"
#include "nnc/model.h"
#include "runtime/plan.h"
#include "runtime/thread_pool.h"

namespace nnc::rt {

// Resolves a step's symbol to its function: generated kernels (from the JIT or the model.so's own
// table) and builtins (builtins/builtins.h).
struct SymbolTable {
  std::vector<std::pair<std::string, KernelFn>> kernels;
};

// The checks every executor applies to a run's caller tensors before running anything: counts, null
// pointers, dtype, rank, shape, size. NNC_OK, or the status and a message naming the tensor.
nnc_status checkRunArguments(const Plan& plan, const nnc_tensor* inputs, size_t numInputs, const nnc_tensor* outputs,
                             size_t numOutputs, std::string* error);

class Executor {
 public:
  // weights must outlive the executor. Fails with a message when a symbol is missing or the plan
  // is inconsistent.
  static std::unique_ptr<Executor> create(Plan plan, const uint8_t* weights, const SymbolTable& symbols, int numThreads,
                                          std::string* error);
  const Plan& plan() const { return plan_; }
  // Checks every tensor (count, null data, dtype, rank, shape, size) before running anything.
  // Runs are serialised (one at a time per executor). When stepSeconds is non-null it receives each
  // step's wall time (nnc bench --profile).
  nnc_status run(const nnc_tensor* inputs, size_t numInputs, nnc_tensor* outputs, size_t numOutputs, std::string* error,
                 std::vector<double>* stepSeconds = nullptr);
  int numThreads() const { return pool_ ? pool_->numThreads() : 1; }

 private:
  struct FreeDeleter {
    void operator()(uint8_t* p) const;
  };
  // A step argument bound to a caller tensor: patched into stepArgs_ at each run.
  struct IoSlot {
    size_t step;
    size_t slot;
    bool isOutput;
    size_t index;
  };

  Executor() = default;
  // Runs plan_.pipelines[p] (its steps), each thread over its part of the last stage's rows.
  nnc_status runPipeline(size_t p, std::string* error);
  // One part: the last stage's rows [first, end), in bands, with windows at `windows`.
  bool runPipelinePart(const Pipeline& pipe, int64_t first, int64_t end, uint8_t* windows);
  Plan plan_;
  const uint8_t* weights_ = nullptr;
  std::unique_ptr<uint8_t, FreeDeleter> arenaStorage_;  // 64-byte aligned
  uint8_t* arena_ = nullptr;
  std::vector<KernelFn> kernelFns_;           // per step (null for builtins)
  std::vector<BuiltinFn> builtinFns_;         // per step (null for kernels)
  std::vector<std::vector<void*>> stepArgs_;  // per step: buffer base pointers in param-slot order
  std::vector<int64_t> minChunk_;             // per step: outer points per parallel chunk
  std::vector<IoSlot> ioSlots_;
  std::vector<int> pipelineAt_;                          // per step: the pipeline starting there, or -1
  std::unique_ptr<uint8_t, FreeDeleter> windowStorage_;  // per thread: every pipeline's windows
  uint64_t windowStride_ = 0;                            // bytes of one thread's windows
  std::unique_ptr<ThreadPool> pool_;
  std::mutex runMutex_;
};

}  // namespace nnc::rt
