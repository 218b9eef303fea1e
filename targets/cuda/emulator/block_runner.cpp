// Running a grid (see emulator.h): its blocks in turn, a cooperative block's threads as fibres or OS threads.
#include <pthread.h>
#include <sys/mman.h>
#include <ucontext.h>

#include <algorithm>
#include <bit>
#include <condition_variable>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "targets/cuda/emulator/emulator_internal.h"

#ifdef NNC_EMU_ASAN
#include <sanitizer/common_interface_defs.h>
#endif

#if defined(__SANITIZE_THREAD__)
// ThreadSanitizer's dynamic annotations (libtsan).
extern "C" {
void AnnotateIgnoreReadsBegin(const char* file, int line);
void AnnotateIgnoreReadsEnd(const char* file, int line);
void AnnotateIgnoreWritesBegin(const char* file, int line);
void AnnotateIgnoreWritesEnd(const char* file, int line);
void AnnotateIgnoreSyncBegin(const char* file, int line);
void AnnotateIgnoreSyncEnd(const char* file, int line);
void AnnotateHappensBefore(const char* file, int line, const volatile void* token);
void AnnotateHappensAfter(const char* file, int line, const volatile void* token);
}
#endif

namespace nnc::rt::cuda::emu::detail {
namespace {

// Running a grid. A block of a cooperative kernel runs its threads as OS threads from a pool (a
// barrier really waits; ThreadSanitizer sees real threads), the others run thread after thread.

struct BlockFailure {};  // thrown out of a hook: the block failed, unwind the thread

// Under ThreadSanitizer the emulator's own locks must not order the emulated threads' memory
// accesses (a GPU's threads synchronise only at __syncthreads): its bookkeeping runs inside an
// IgnoreTsan scope (neither its accesses nor its locks are seen), and the orderings a GPU does give —
// a barrier, the launch before its threads, the threads before what follows the launch — are
// annotated explicitly (happensBefore/After on a token). No-ops in other builds.
#if defined(__SANITIZE_THREAD__)
struct IgnoreTsan {
  IgnoreTsan() {
    AnnotateIgnoreReadsBegin(__FILE__, __LINE__);
    AnnotateIgnoreWritesBegin(__FILE__, __LINE__);
    AnnotateIgnoreSyncBegin(__FILE__, __LINE__);
  }
  ~IgnoreTsan() {
    AnnotateIgnoreSyncEnd(__FILE__, __LINE__);
    AnnotateIgnoreWritesEnd(__FILE__, __LINE__);
    AnnotateIgnoreReadsEnd(__FILE__, __LINE__);
  }
  IgnoreTsan(const IgnoreTsan&) = delete;
  IgnoreTsan& operator=(const IgnoreTsan&) = delete;
};
void happensBefore(const void* token) { AnnotateHappensBefore(__FILE__, __LINE__, token); }
void happensAfter(const void* token) { AnnotateHappensAfter(__FILE__, __LINE__, token); }
#else
struct IgnoreTsan {
  IgnoreTsan() {}  // user-provided: a scope variable of this type is not "unused"
  ~IgnoreTsan() {}
};
void happensBefore(const void*) {}
void happensAfter(const void*) {}
#endif

struct WarpState {
  std::condition_variable cv;
  unsigned arrived = 0;  // lanes that entered the current shuffle
  unsigned mask = 0;     // the mask of the current shuffle (every lane must pass the same)
  bool draining = false;
  int readers = 0;
  uint64_t generation = 0;
  unsigned long long values[32] = {};
  int waitingLaneMask = 0;
};

struct BlockState;
void yieldFiber();  // the fiber runner's: back to its scheduler until this fiber is resumed

struct BlockState {
  bool fibers = false;    // the threads are fibers of one OS thread (else OS threads)
  uint64_t progress = 0;  // waits that ended and threads that returned (the fiber scheduler's check)
  std::mutex mutex;
  std::condition_variable barrier;
  std::string kernel;
  int threads = 0;
  int arrived = 0;  // at the current __syncthreads
  uint64_t barrierGeneration = 0;
  char barrierTokens[2] = {};  // ThreadSanitizer: the barrier's ordering, by generation parity
  int blocked = 0;             // waiting at a barrier or shuffle
  int exited = 0;
  bool failed = false;
  std::string failure;
  std::vector<std::unique_ptr<WarpState>> warps;

  void reset(const std::string& name, int n, bool asFibers) {
    fibers = asFibers;
    kernel = name;
    threads = n;
    arrived = blocked = exited = 0;
    failed = false;
    failure.clear();
    const size_t warpCount = static_cast<size_t>((n + 31) / 32);
    while (warps.size() < warpCount) warps.push_back(std::make_unique<WarpState>());
    for (auto& w : warps) {
      w->arrived = w->mask = 0;
      w->draining = false;
      w->readers = 0;
    }
  }
  // Under `lock` (of mutex): returns when `ready()`; an OS thread sleeps on `cv`, a fiber yields.
  template <class Ready>
  void waitUntil(std::unique_lock<std::mutex>& lock, std::condition_variable& cv, Ready ready) {
    if (fibers) {
      while (!ready()) {
        lock.unlock();
        yieldFiber();
        lock.lock();
      }
    } else {
      cv.wait(lock, ready);
    }
    ++progress;
  }
  // Under mutex.
  void fail(const std::string& why) {
    if (!failed) failure = why;
    failed = true;
    barrier.notify_all();
    for (auto& w : warps) w->cv.notify_all();
  }
  void threadReturned() {
    IgnoreTsan ignore;
    std::lock_guard<std::mutex> lock(mutex);
    ++exited;
    ++progress;
    checkDeadlock();
  }
  // Under mutex: every thread is waiting or gone, and some wait: nothing can ever wake them.
  void checkDeadlock() {
    if (blocked == 0 || blocked + exited < threads) return;
    std::string why = "the block can never finish: ";
    why += std::to_string(arrived) + " of " + std::to_string(threads) + " threads wait at __syncthreads";
    for (size_t w = 0; w < warps.size(); ++w)
      if (warps[w]->arrived)
        why += "; lanes " + hex(warps[w]->arrived) + " of warp " + std::to_string(w) + " wait at a shuffle with mask " +
               hex(warps[w]->mask);
    why += "; " + std::to_string(exited) + " returned";
    fail(why);
  }
};

thread_local BlockState* tlsBlock = nullptr;  // null: running sequentially
thread_local int tlsThread = 0;               // linear thread index within the block
thread_local const char* tlsKernel = "";

[[noreturn]] void notCooperative(const char* what) {
  throw std::runtime_error(std::string("kernel '") + tlsKernel + "' calls " + what +
                           ", but the emulator found no barrier, shuffle or shared memory in its source");
}

void syncthreads(BlockState* b);

// Everything each thread did before the barrier happens before everything any thread does after it
// (for ThreadSanitizer: a token per generation parity, so a thread already at the next barrier adds
// nothing to this one).
void hookSyncthreads() {
  BlockState* b = tlsBlock;
  if (!b) notCooperative("__syncthreads");
  const void* token;
  {
    IgnoreTsan ignore;
    std::lock_guard<std::mutex> lock(b->mutex);
    token = &b->barrierTokens[b->barrierGeneration & 1];
  }
  happensBefore(token);
  syncthreads(b);
  happensAfter(token);
}

void syncthreads(BlockState* b) {
  IgnoreTsan ignore;
  std::unique_lock<std::mutex> lock(b->mutex);
  if (b->failed) throw BlockFailure();
  if (++b->arrived == b->threads) {
    b->arrived = 0;
    ++b->barrierGeneration;
    b->blocked -= b->threads - 1;
    b->barrier.notify_all();
    return;
  }
  const uint64_t generation = b->barrierGeneration;
  ++b->blocked;
  b->checkDeadlock();
  b->waitUntil(lock, b->barrier, [&] { return b->failed || b->barrierGeneration != generation; });
  if (b->barrierGeneration == generation) throw BlockFailure();
}

// A shuffle exchanges registers; it orders no memory accesses (ThreadSanitizer sees none).
unsigned long long hookShflXor(unsigned mask, unsigned long long bits, int laneMask, int width) {
  BlockState* b = tlsBlock;
  if (!b) notCooperative("a warp shuffle");
  IgnoreTsan ignore;
  const int lane = tlsThread % 32;
  const size_t warp = static_cast<size_t>(tlsThread / 32);
  const int lanesInWarp = std::min(32, b->threads - static_cast<int>(warp) * 32);
  const unsigned present = lanesInWarp == 32 ? 0xffffffffu : ((1u << lanesInWarp) - 1u);
  std::unique_lock<std::mutex> lock(b->mutex);
  if (b->failed) throw BlockFailure();
  auto where = [&] { return "thread " + std::to_string(tlsThread) + ": __shfl_xor_sync"; };
  if (width < 1 || width > 32 || (width & (width - 1)) != 0) {
    b->fail(where() + " with width " + std::to_string(width) + " (must be a power of two up to 32)");
    throw BlockFailure();
  }
  if (!((mask >> lane) & 1u)) {
    b->fail(where() + " with mask " + hex(mask) + ", which does not name the calling lane " + std::to_string(lane));
    throw BlockFailure();
  }
  if (mask & ~present) {
    b->fail(where() + " with mask " + hex(mask) + " names lanes the block does not have (its last warp has " +
            std::to_string(lanesInWarp) + " lanes)");
    throw BlockFailure();
  }
  WarpState& w = *b->warps[warp];
  b->waitUntil(lock, w.cv, [&] { return b->failed || !w.draining; });
  if (b->failed) throw BlockFailure();
  if (w.arrived != 0 && w.mask != mask) {
    b->fail(where() + ": the lanes of warp " + std::to_string(warp) + " disagree on the mask (" + hex(w.mask) +
            " and " + hex(mask) + ")");
    throw BlockFailure();
  }
  w.mask = mask;
  w.values[lane] = bits;
  w.arrived |= 1u << lane;
  const uint64_t generation = w.generation;
  if (w.arrived == mask) {
    w.draining = true;
    w.readers = std::popcount(mask);
    b->blocked -= w.readers - 1;
    w.cv.notify_all();
  } else {
    ++b->blocked;
    b->checkDeadlock();
    b->waitUntil(lock, w.cv, [&] { return b->failed || (w.draining && w.generation == generation); });
    if (!(w.draining && w.generation == generation)) throw BlockFailure();
  }
  const int source = (lane & ~(width - 1)) | ((lane ^ laneMask) & (width - 1));
  if (!((mask >> source) & 1u)) {
    b->fail(where() + ": lane " + std::to_string(lane) + " reads lane " + std::to_string(source) + ", which the mask " +
            hex(mask) + " does not name");
    throw BlockFailure();
  }
  const unsigned long long value = w.values[source];
  if (--w.readers == 0) {
    w.draining = false;
    w.arrived = 0;
    ++w.generation;
    w.cv.notify_all();
  }
  return value;
}

}  // namespace

const nnc_emu_hooks kHooks = {NNC_EMU_HOOKS_VERSION, hookSyncthreads, hookShflXor};

namespace {

// Runs one emulated thread; false with *error when it threw.
bool runThread(const Function& f, const nnc_emu_thread& where, void** params, std::string* error) {
  try {
    f.kernel->run(&where, params);
    return true;
  } catch (const BlockFailure&) {
    return false;  // the block's failure says why
  } catch (const std::exception& e) {
    *error = e.what();
    return false;
  }
}

// Runs a cooperative block's threads as OS threads from a pool (grown on demand): what
// ThreadSanitizer needs to see the races a missing __syncthreads leaves. The workers are joined at
// exit, before LeakSanitizer's exit-time check (which cannot stop hundreds of waiting threads). A
// forked child starts a pool of its own (its parent's threads do not exist there; the old pool is
// abandoned, never touched again).
class ThreadBlockRunner {
 public:
  static ThreadBlockRunner& get() {
    static ThreadBlockRunner*& runner = []() -> ThreadBlockRunner*& {
      static ThreadBlockRunner* r = new ThreadBlockRunner();
      std::atexit([] { get().stop(); });
      pthread_atfork(nullptr, nullptr, [] { r = new ThreadBlockRunner(); });
      return r;
    }();
    return *runner;
  }

  // Runs every thread of the block described by `where` (its thread field ignored); false with
  // *error when the block failed.
  bool run(const Function& f, const nnc_emu_thread& where, void** params, std::string* error) {
    const int threads = static_cast<int>(where.blockDim.x * where.blockDim.y * where.blockDim.z);
    happensBefore(&startToken_);  // the launch before its threads
    std::string failure;
    {
      IgnoreTsan ignore;  // the pool's handshakes are not the kernel's synchronisation
      std::unique_lock<std::mutex> lock(mutex_);
      while (static_cast<int>(workers_.size()) < threads) {
        const int index = static_cast<int>(workers_.size());
        workers_.emplace_back([this, index] { work(index); });
      }
      block_.reset(f.name, threads, false);
      function_ = &f;
      where_ = where;
      params_ = params;
      threads_ = threads;
      remaining_ = threads;
      threadErrors_.clear();
      ++job_;
      start_.notify_all();
      done_.wait(lock, [&] { return remaining_ == 0; });
      function_ = nullptr;
      failure = threadErrors_;
      std::lock_guard<std::mutex> blockLock(block_.mutex);
      if (failure.empty() && block_.failed) failure = block_.failure;
    }
    happensAfter(&doneToken_);  // the threads before what follows the launch
    if (failure.empty()) return true;
    *error = failure;
    return false;
  }

 private:
  void stop() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stopping_ = true;
      start_.notify_all();
    }
    for (std::thread& t : workers_) t.join();
    workers_.clear();
  }

  void work(int index) {
    uint64_t seen = 0;
    for (;;) {
      const Function* f = nullptr;
      nnc_emu_thread where{};
      void** params = nullptr;
      {
        IgnoreTsan ignore;
        std::unique_lock<std::mutex> lock(mutex_);
        start_.wait(lock, [&] { return stopping_ || job_ != seen; });
        if (stopping_) return;
        seen = job_;
        if (index >= threads_) continue;
        f = function_;
        where = where_;
        params = params_;
      }
      happensAfter(&startToken_);
      const unsigned bx = where.blockDim.x, by = where.blockDim.y;
      where.thread = {static_cast<unsigned>(index) % bx, static_cast<unsigned>(index) / bx % by,
                      static_cast<unsigned>(index) / (bx * by)};
      tlsBlock = &block_;
      tlsThread = index;
      tlsKernel = f->name.c_str();
      std::string error;
      const bool ok = runThread(*f, where, params, &error);
      tlsBlock = nullptr;
      block_.threadReturned();
      happensBefore(&doneToken_);
      IgnoreTsan ignore;
      std::lock_guard<std::mutex> lock(mutex_);
      if (!ok && !error.empty() && threadErrors_.empty()) threadErrors_ = error;
      if (--remaining_ == 0) done_.notify_all();
    }
  }

  char startToken_ = 0, doneToken_ = 0;  // ThreadSanitizer: the orderings the pool stands for
  std::mutex mutex_;
  std::condition_variable start_, done_;
  std::vector<std::thread> workers_;
  bool stopping_ = false;
  uint64_t job_ = 0;
  BlockState block_;
  const Function* function_ = nullptr;
  nnc_emu_thread where_{};
  void** params_ = nullptr;
  int threads_ = 0;
  int remaining_ = 0;
  std::string threadErrors_;
};

// Runs a cooperative block's threads as fibers (ucontext) on the launching thread, round-robin: a
// thread runs until it waits at a barrier or shuffle or returns. Orders of magnitude cheaper than
// waking OS threads for every shuffle; the default except under ThreadSanitizer.
class FiberBlockRunner {
 public:
  static FiberBlockRunner& get() {
    static FiberBlockRunner* runner = new FiberBlockRunner();
    return *runner;
  }

  bool run(const Function& f, const nnc_emu_thread& where, void** params, std::string* error) {
    const int threads = static_cast<int>(where.blockDim.x * where.blockDim.y * where.blockDim.z);
    while (static_cast<int>(fibers_.size()) < threads) {
      auto fiber = std::make_unique<Fiber>();
      // A guard page below each stack turns an overflow into a fault, not corruption.
      void* stack = mmap(nullptr, kStackBytes + kPageBytes, PROT_READ | PROT_WRITE,
                         MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
      if (stack == MAP_FAILED) {
        *error = "cannot map an emulated thread's stack";
        return false;
      }
      mprotect(stack, kPageBytes, PROT_NONE);
      fiber->stack = static_cast<char*>(stack) + kPageBytes;
      fibers_.push_back(std::move(fiber));
    }
    block_.reset(f.name, threads, true);
    function_ = &f;
    params_ = params;
    threadError_.clear();
    const unsigned bx = where.blockDim.x, by = where.blockDim.y;
    for (int i = 0; i < threads; ++i) {
      Fiber& fb = *fibers_[i];
      fb.where = where;
      const unsigned u = static_cast<unsigned>(i);
      fb.where.thread = {u % bx, u / bx % by, u / (bx * by)};
      fb.done = false;
      getcontext(&fb.context);
      fb.context.uc_stack.ss_sp = fb.stack;
      fb.context.uc_stack.ss_size = kStackBytes;
      fb.context.uc_link = nullptr;
      makecontext(&fb.context, &FiberBlockRunner::entry, 0);
    }
    tlsBlock = &block_;
    tlsKernel = f.name.c_str();
    for (int unfinished = threads; unfinished > 0;) {
      const uint64_t before = block_.progress;
      unfinished = 0;
      for (int i = 0; i < threads; ++i) {
        Fiber& fb = *fibers_[i];
        if (fb.done) continue;
        current_ = i;
        tlsThread = i;
        f.kernel->enter(&fb.where);  // the module's threadIdx & co. are per OS thread: this fiber's now
        switchTo(&scheduler_, &fb.context, fb.stack, kStackBytes, false);
        unfinished += fb.done ? 0 : 1;
      }
      if (unfinished > 0 && block_.progress == before) {
        std::lock_guard<std::mutex> lock(block_.mutex);
        block_.fail("no thread can proceed (an emulator bug: its deadlock check missed it)");
      }
    }
    tlsBlock = nullptr;
    function_ = nullptr;
    if (!threadError_.empty()) {
      *error = threadError_;
      return false;
    }
    if (block_.failed) {
      *error = block_.failure;
      return false;
    }
    return true;
  }

  void yield() {
    Fiber& fb = *fibers_[current_];
    switchTo(&fb.context, &scheduler_, schedulerStack_, schedulerStackBytes_, false);
  }

 private:
  static constexpr size_t kStackBytes = size_t{256} << 10;
  static constexpr size_t kPageBytes = 4096;
  struct Fiber {
    ucontext_t context;
    char* stack = nullptr;
    bool done = false;
    nnc_emu_thread where{};
  };

  // AddressSanitizer must know which stack is live (its fiber annotations); `dying`: the fiber we
  // leave never runs again.
  void switchTo(ucontext_t* from, ucontext_t* to, const void* toStack, size_t toBytes, bool dying) {
#ifdef NNC_EMU_ASAN
    void* fakeStack = nullptr;
    __sanitizer_start_switch_fiber(dying ? nullptr : &fakeStack, toStack, toBytes);
#else
    (void)toStack, (void)toBytes, (void)dying;
#endif
    swapcontext(from, to);
#ifdef NNC_EMU_ASAN
    __sanitizer_finish_switch_fiber(fakeStack, nullptr, nullptr);
#endif
  }

  static void entry() {
    FiberBlockRunner& r = get();
#ifdef NNC_EMU_ASAN
    __sanitizer_finish_switch_fiber(nullptr, &r.schedulerStack_, &r.schedulerStackBytes_);
#endif
    Fiber& fb = *r.fibers_[r.current_];
    std::string error;
    if (!runThread(*r.function_, fb.where, r.params_, &error) && !error.empty() && r.threadError_.empty())
      r.threadError_ = error;
    r.block_.threadReturned();
    fb.done = true;
    r.switchTo(&fb.context, &r.scheduler_, r.schedulerStack_, r.schedulerStackBytes_, true);
  }

  std::vector<std::unique_ptr<Fiber>> fibers_;
  ucontext_t scheduler_{};
  const void* schedulerStack_ = nullptr;
  size_t schedulerStackBytes_ = 0;
  BlockState block_;
  const Function* function_ = nullptr;
  void** params_ = nullptr;
  int current_ = 0;
  std::string threadError_;
};

void yieldFiber() { FiberBlockRunner::get().yield(); }

// Fibers, unless NNC_EMULATE_THREADS=os (read at each launch) or this is a ThreadSanitizer build.
bool useOsThreads() {
#if defined(__SANITIZE_THREAD__)
  return true;
#else
  const char* v = std::getenv("NNC_EMULATE_THREADS");
  return v && std::strcmp(v, "os") == 0;
#endif
}

}  // namespace

bool runGrid(const Function& f, const nnc_emu_dim3& grid, const nnc_emu_dim3& block,
             std::vector<std::vector<unsigned char>>& args, std::string* error) {
  void* params[NNC_EMU_MAX_PARAMS];
  for (size_t i = 0; i < args.size(); ++i) params[i] = args[i].data();
  nnc_emu_thread where{};
  where.blockDim = block;
  where.gridDim = grid;
  const std::string context = "kernel '" + f.name + "'";
  const bool osThreads = f.cooperative && useOsThreads();  // once per launch, not per block
  for (unsigned z = 0; z < grid.z; ++z)
    for (unsigned y = 0; y < grid.y; ++y)
      for (unsigned x = 0; x < grid.x; ++x) {
        where.block = {x, y, z};
        std::string why;
        if (f.cooperative) {
          const bool ok = osThreads ? ThreadBlockRunner::get().run(f, where, params, &why)
                                    : FiberBlockRunner::get().run(f, where, params, &why);
          if (!ok) {
            *error = context + " block (" + std::to_string(x) + "," + std::to_string(y) + "," + std::to_string(z) +
                     "): " + why;
            return false;
          }
          continue;
        }
        tlsKernel = f.name.c_str();
        for (unsigned tz = 0; tz < block.z; ++tz)
          for (unsigned ty = 0; ty < block.y; ++ty)
            for (unsigned tx = 0; tx < block.x; ++tx) {
              where.thread = {tx, ty, tz};
              if (!runThread(f, where, params, &why)) {
                *error = context + ": " + why;
                return false;
              }
            }
      }
  return true;
}

}  // namespace nnc::rt::cuda::emu::detail
