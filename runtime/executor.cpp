// The CPU executor: binds plan steps to functions, owns the arena, checks caller tensors and runs
// the steps in order (kernels split over the thread pool, builtins called directly).
#include "runtime/executor.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <new>
#include <unordered_map>

#include "builtins/builtins.h"
#include "nnc/aligned_vector.h"

namespace nnc::rt {
namespace {

// The arena starts on a cache line, as the plan builder aligns every buffer in it.
constexpr size_t kArenaAlignment = kCacheLineBytes;
// A parallel chunk should be about this many elements of work: enough to amortise handing it out,
// small enough to balance the load.
constexpr int64_t kChunkWork = 16 * 1024;

bool fail(std::string* error, std::string message) {
  if (error) *error = std::move(message);
  return false;
}

nnc_status failStatus(std::string* error, nnc_status status, std::string message) {
  if (error) *error = std::move(message);
  return status;
}

// Checks one caller tensor against its description.
nnc_status checkTensor(const nnc_tensor& t, const TensorDesc& d, const char* what, size_t index, std::string* error) {
  std::string prefix = std::string(what) + " " + std::to_string(index) + " ('" + d.name + "'): ";
  std::string expectedShape = formatShape(d.shape.data(), d.shape.size());
  if (!t.data && d.byteSize != 0) return failStatus(error, NNC_ERROR_INVALID_ARGUMENT, prefix + "data is null");
  if (t.dtype != d.dtype)
    return failStatus(error, NNC_ERROR_DTYPE_MISMATCH,
                      prefix + "expected dtype " + elementTypeName(d.dtype) + ", got " + elementTypeName(t.dtype));
  if (t.rank < 0 || t.rank > NNC_MAX_RANK)
    return failStatus(error, NNC_ERROR_SHAPE_MISMATCH,
                      prefix + "expected shape " + expectedShape + ", got rank " + std::to_string(t.rank));
  if (t.rank > 0 && !t.shape) return failStatus(error, NNC_ERROR_INVALID_ARGUMENT, prefix + "shape is null");
  bool same = static_cast<size_t>(t.rank) == d.shape.size();
  for (size_t i = 0; same && i < d.shape.size(); ++i) same = t.shape[i] == d.shape[i];
  if (!same)
    return failStatus(
        error, NNC_ERROR_SHAPE_MISMATCH,
        prefix + "expected shape " + expectedShape + ", got " + formatShape(t.shape, static_cast<size_t>(t.rank)));
  if (t.size_bytes < d.byteSize)
    return failStatus(
        error, NNC_ERROR_INVALID_ARGUMENT,
        prefix + "size_bytes is " + std::to_string(t.size_bytes) + ", expected at least " + std::to_string(d.byteSize));
  // Generated kernels load and store whole elements with the element's natural alignment (LLVM
  // `align N`; a misaligned address is undefined behaviour there, and faults on a GPU), so a buffer
  // must be aligned to its element size. Empty tensors are never read: any address will do.
  const uint64_t align = elementSize(d.dtype);
  if (d.byteSize != 0 && align > 1 && reinterpret_cast<uintptr_t>(t.data) % align != 0)
    return failStatus(error, NNC_ERROR_INVALID_ARGUMENT,
                      prefix + "data is misaligned: its address must be a multiple of " + std::to_string(align) +
                          " (the size of one " + elementTypeName(d.dtype) + " element)");
  return NNC_OK;
}

}  // namespace

nnc_status checkRunArguments(const Plan& plan, const nnc_tensor* inputs, size_t numInputs, const nnc_tensor* outputs,
                             size_t numOutputs, std::string* error) {
  if (numInputs != plan.inputs.size())
    return failStatus(error, NNC_ERROR_INVALID_ARGUMENT,
                      "expected " + std::to_string(plan.inputs.size()) + " inputs, got " + std::to_string(numInputs));
  if (numOutputs != plan.outputs.size())
    return failStatus(
        error, NNC_ERROR_INVALID_ARGUMENT,
        "expected " + std::to_string(plan.outputs.size()) + " outputs, got " + std::to_string(numOutputs));
  if (numInputs > 0 && !inputs) return failStatus(error, NNC_ERROR_INVALID_ARGUMENT, "inputs is null");
  if (numOutputs > 0 && !outputs) return failStatus(error, NNC_ERROR_INVALID_ARGUMENT, "outputs is null");
  for (size_t i = 0; i < numInputs; ++i) {
    nnc_status st = checkTensor(inputs[i], plan.inputs[i], "input", i, error);
    if (st != NNC_OK) return st;
  }
  for (size_t i = 0; i < numOutputs; ++i) {
    nnc_status st = checkTensor(outputs[i], plan.outputs[i], "output", i, error);
    if (st != NNC_OK) return st;
  }
  return NNC_OK;
}

void Executor::FreeDeleter::operator()(uint8_t* p) const { std::free(p); }

// A function-try-block: the arena is allocated without exceptions below, but the step tables and
// messages allocate too, and under memory pressure (a small RLIMIT_AS, a huge plan) the resulting
// std::bad_alloc must become an "out of memory" failure, never cross the C ABI.
std::unique_ptr<Executor> Executor::create(Plan plan, const uint8_t* weights, const SymbolTable& symbols,
                                           int numThreads, std::string* error) try {
  std::string message;
  if (!validatePlan(plan, &message)) {
    fail(error, "invalid plan: " + message);
    return nullptr;
  }
  if (plan.target != Target::Cpu) {
    fail(error, "the plan is for the cuda target; the CPU executor runs cpu plans only");
    return nullptr;
  }
  if (plan.weightsSize > 0 && !weights) {
    fail(error, "the plan needs " + std::to_string(plan.weightsSize) + " bytes of weights, but none were given");
    return nullptr;
  }

  std::unique_ptr<Executor> ex(new (std::nothrow) Executor());
  if (!ex) {
    fail(error, "out of memory creating the executor");
    return nullptr;
  }

  std::unordered_map<std::string_view, KernelFn> kernels;
  for (const auto& [name, fn] : symbols.kernels) kernels.emplace(name, fn);

  size_t numSteps = plan.steps.size();
  ex->kernelFns_.assign(numSteps, nullptr);
  ex->builtinFns_.assign(numSteps, nullptr);
  ex->minChunk_.assign(numSteps, 1);
  for (size_t i = 0; i < numSteps; ++i) {
    const Step& s = plan.steps[i];
    std::string prefix = "step " + std::to_string(i) + " (" + s.origin + "): ";
    if (s.kind == StepKind::Kernel) {
      auto it = kernels.find(s.name);
      if (it == kernels.end() || !it->second) {
        fail(error, prefix + "kernel symbol '" + s.name + "' not found");
        return nullptr;
      }
      ex->kernelFns_[i] = it->second;
      int64_t work = std::max<int64_t>(s.workPerPoint, 1);
      ex->minChunk_[i] = std::max<int64_t>(1, (kChunkWork + work - 1) / work);
    } else {
      BuiltinFn fn = findBuiltin(s.name);
      if (!fn) {
        fail(error, prefix + "builtin symbol '" + s.name + "' not found");
        return nullptr;
      }
      ex->builtinFns_[i] = fn;
    }
  }

  // Always allocate at least one aligned block so every arena pointer is non-null.
  size_t arenaBytes = static_cast<size_t>(plan.arenaSize);
  size_t rounded = (arenaBytes + kArenaAlignment - 1) / kArenaAlignment * kArenaAlignment;
  if (rounded == 0) rounded = kArenaAlignment;
  void* mem = std::aligned_alloc(kArenaAlignment, rounded);
  if (!mem) {
    fail(error, "out of memory allocating the " + std::to_string(plan.arenaSize) + "-byte arena");
    return nullptr;
  }
  ex->arenaStorage_.reset(static_cast<uint8_t*>(mem));
  ex->arena_ = ex->arenaStorage_.get();

  ex->stepArgs_.resize(numSteps);
  for (size_t i = 0; i < numSteps; ++i) {
    const Step& s = plan.steps[i];
    std::vector<void*>& args = ex->stepArgs_[i];
    args.assign(s.args.size(), nullptr);
    for (size_t slot = 0; slot < s.args.size(); ++slot) {
      const BufferRef& b = plan.buffers[static_cast<size_t>(s.args[slot])];
      switch (b.kind) {
        case BufferKind::Arena: args[slot] = ex->arena_ + b.offset; break;
        case BufferKind::Weight:
          // Kernels never write weights; the const is dropped only to fit the uniform signature.
          args[slot] = weights ? const_cast<uint8_t*>(weights) + b.offset : nullptr;
          break;
        case BufferKind::Input:
        case BufferKind::Output:
          ex->ioSlots_.push_back({i, slot, b.kind == BufferKind::Output, static_cast<size_t>(b.offset)});
          break;
      }
    }
  }

  ex->pool_.reset(new (std::nothrow) ThreadPool(numThreads));
  if (!ex->pool_) {
    fail(error, "out of memory creating the thread pool");
    return nullptr;
  }
  // Row pipelines: one set of windows per thread (a pipeline's parts never outnumber the threads),
  // as large as the largest pipeline's.
  ex->pipelineAt_.assign(numSteps, -1);
  for (size_t p = 0; p < plan.pipelines.size(); ++p) {
    ex->pipelineAt_[plan.pipelines[p].firstStep] = static_cast<int>(p);
    ex->windowStride_ = std::max(ex->windowStride_, plan.pipelines[p].windowBytes());
  }
  if (ex->windowStride_ > 0) {
    const size_t bytes = static_cast<size_t>(ex->windowStride_) * static_cast<size_t>(ex->pool_->numThreads());
    void* windows = std::aligned_alloc(kArenaAlignment, bytes);
    if (!windows) {
      fail(error, "out of memory allocating " + std::to_string(bytes) + " bytes of pipeline windows");
      return nullptr;
    }
    ex->windowStorage_.reset(static_cast<uint8_t*>(windows));
  }
  ex->weights_ = weights;
  ex->plan_ = std::move(plan);
  return ex;
} catch (const std::bad_alloc&) {
  fail(error, "out of memory creating the executor");
  return nullptr;
}

nnc_status Executor::run(const nnc_tensor* inputs, size_t numInputs, nnc_tensor* outputs, size_t numOutputs,
                         std::string* error, std::vector<double>* stepSeconds) {
  std::lock_guard<std::mutex> lock(runMutex_);
  if (nnc_status st = checkRunArguments(plan_, inputs, numInputs, outputs, numOutputs, error); st != NNC_OK) return st;

  for (const IoSlot& io : ioSlots_)
    stepArgs_[io.step][io.slot] = io.isOutput ? outputs[io.index].data : inputs[io.index].data;

  if (stepSeconds) stepSeconds->assign(plan_.steps.size(), 0.0);
  for (size_t i = 0; i < plan_.steps.size(); ++i) {
    const Step& s = plan_.steps[i];
    void* const* ptrs = stepArgs_[i].data();
    auto start = std::chrono::steady_clock::now();
    if (const int p = pipelineAt_[i]; p >= 0) {
      // Its steps run together: the profile puts their time on the first.
      if (nnc_status st = runPipeline(static_cast<size_t>(p), error); st != NNC_OK) return st;
      if (stepSeconds)
        (*stepSeconds)[i] = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      i += plan_.pipelines[static_cast<size_t>(p)].stages.size() - 1;
      continue;
    }
    if (KernelFn fn = kernelFns_[i]) {
      pool_->parallelFor(s.outerSize, minChunk_[i], s.chunkGranule,
                         [fn, ptrs](int64_t begin, int64_t end) { fn(ptrs, begin, end); });
      if (!s.check.empty()) {
        // A check step: stop before any step reads data that broke the contract.
        const auto* result = static_cast<const int64_t*>(ptrs[s.args.size() - 1]);
        if (result[kCheckViolations] != 0)
          return failStatus(error, NNC_ERROR_RUNTIME, describeCheckFailure(s.check, result));
      }
    } else {
      int rc = builtinFns_[i](s.params.data(), ptrs);
      if (rc != 0)
        return failStatus(error, NNC_ERROR_RUNTIME,
                          "step " + std::to_string(i) + " (" + s.origin + "): builtin '" + s.name +
                              "' failed with code " + std::to_string(rc));
    }
    if (stepSeconds)
      (*stepSeconds)[i] = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  }
  return NNC_OK;
}

nnc_status Executor::runPipeline(size_t p, std::string* error) {
  const Pipeline& pipe = plan_.pipelines[p];
  const int64_t rows = pipe.stages.back().rows;
  const int64_t bands = (rows + pipe.bandRows - 1) / pipe.bandRows;
  const int64_t parts = std::min<int64_t>(pool_->numThreads(), bands);
  std::atomic<bool> ok{true};
  // Part t: bands [t * bands / parts, (t + 1) * bands / parts), with thread slot t's windows.
  pool_->parallelFor(parts, 1, [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t) {
      const int64_t first = t * bands / parts * pipe.bandRows;
      const int64_t last = std::min(rows, (t + 1) * bands / parts * pipe.bandRows);
      uint8_t* windows = windowStorage_.get() + static_cast<size_t>(t) * static_cast<size_t>(windowStride_);
      if (!runPipelinePart(pipe, first, last, windows)) ok = false;
    }
  });
  if (!ok)
    return failStatus(error, NNC_ERROR_RUNTIME,
                      "pipeline at step " + std::to_string(pipe.firstStep) + ": a window is too small for its rows");
  return NNC_OK;
}

// Band by band: backwards, the rows each stage must compute (what the next stage's computed rows
// read, whole units, continuing from the rows its window holds); forwards, each intermediate stage
// drops the rows no longer needed (moving the rest to the front of its window) and computes the
// new ones with its output argument pointed at `window - first row * rowBytes`, and the next stage
// reads them there.
bool Executor::runPipelinePart(const Pipeline& pipe, int64_t first, int64_t end, uint8_t* windows) {
  const size_t n = pipe.stages.size();
  struct State {
    uint8_t* window = nullptr;
    int64_t lo = 0, done = 0;  // the window holds rows [lo, done)
    bool empty = true;
    int64_t from = 0, to = 0;  // this band's rows to compute
    int64_t keep = 0;          // the first row this band needs
    std::vector<void*> args;
  };
  std::vector<State> state(n);
  uint8_t* next = windows;
  for (size_t i = 0; i < n; ++i) {
    state[i].args = stepArgs_[pipe.firstStep + i];
    if (i + 1 < n) {
      state[i].window = next;
      next += pipe.stages[i].windowBytes();
    }
  }
  // The step's argument pointed so that row r of the output lands at window + (r - lo) * rowBytes
  // (integer arithmetic: the address itself is never dereferenced outside the window).
  auto rowBase = [&](size_t i) {
    return reinterpret_cast<void*>(reinterpret_cast<uintptr_t>(state[i].window) -
                                   static_cast<uintptr_t>(state[i].lo * pipe.stages[i].rowBytes));
  };
  auto run = [&](size_t i, int64_t from, int64_t to) {
    const PipelineStage& st = pipe.stages[i];
    const int64_t begin = from / st.unitRows * st.units;
    const int64_t stop = (to + st.unitRows - 1) / st.unitRows * st.units;
    kernelFns_[pipe.firstStep + i](state[i].args.data(), begin, stop);
  };
  for (int64_t r0 = first; r0 < end; r0 += pipe.bandRows) {
    State& lastState = state[n - 1];
    lastState.from = r0;
    lastState.to = std::min(end, r0 + pipe.bandRows);
    for (size_t i = n - 1; i-- > 0;) {
      const PipelineStage& reader = pipe.stages[i + 1];
      const PipelineStage& st = pipe.stages[i];
      State& s = state[i];
      const State& r = state[i + 1];
      if (r.from >= r.to) {  // nothing to read this band: nothing to compute, the window as it is
        s.from = s.to = s.empty ? 0 : s.done;
        s.keep = s.empty ? 0 : s.lo;
        continue;
      }
      const int64_t need0 = std::clamp<int64_t>(r.from * reader.stride - reader.padBegin, 0, st.rows);
      const int64_t need1 =
          std::clamp<int64_t>((r.to - 1) * reader.stride - reader.padBegin + reader.extent, 0, st.rows);
      s.keep = need0;
      const bool continues = !s.empty && need0 >= s.lo && need0 <= s.done;
      s.from = continues ? s.done : need0 / st.unitRows * st.unitRows;
      if (!continues) s.keep = s.from;
      s.to = std::max(s.from, std::min(st.rows, (need1 + st.unitRows - 1) / st.unitRows * st.unitRows));
    }
    for (size_t i = 0; i < n; ++i) {
      State& s = state[i];
      const PipelineStage& st = pipe.stages[i];
      if (i + 1 < n) {
        if (s.empty || s.keep < s.lo || s.keep > s.done) {
          s.lo = s.done = s.keep;
          s.empty = false;
        } else if (s.keep > s.lo) {
          std::memmove(s.window, s.window + (s.keep - s.lo) * st.rowBytes,
                       static_cast<size_t>((s.done - s.keep) * st.rowBytes));
          s.lo = s.keep;
        }
        if (s.to - s.lo > st.windowRows || s.from != s.done) return false;
        s.args[static_cast<size_t>(st.outSlot)] = rowBase(i);
      }
      if (i > 0) s.args[static_cast<size_t>(st.inSlot)] = rowBase(i - 1);
      if (s.from < s.to) run(i, s.from, s.to);
      if (i + 1 < n) s.done = std::max(s.done, s.to);
    }
  }
  return true;
}

}  // namespace nnc::rt
