// ThreadPool: sleeping workers, chunks claimed from atomic counters, the caller participating.
//
// Protocol for one parallelFor (all fields below the mutex are guarded by it):
//   caller: publish the job, open it with `slots` worker places, bump the generation, wake workers,
//           run chunks itself, then close the job and wait until every worker that joined has left.
//   worker: sleep until the generation changes; if the job is still open and has a free slot, join
//           (active++, taking the next participant number), run chunks until every span is claimed,
//           leave (active--).
// The chunks are cut into one contiguous span per participant (the caller and each worker place);
// a participant claims the chunks of its own span front to back, then steals what is left of the
// others' spans from their backs. So neighbouring chunks run on one thread (their output cache lines
// are not shared between cores, their input streams stay sequential) even while a thief and the
// owner share a span, and a descheduled or late thread's span is taken by the others: it never
// holds up the caller unless it had already claimed a chunk — and when one keeps doing that for
// milliseconds (another process took its core), the next jobs run on the caller alone.
#include "runtime/thread_pool.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <mutex>
#include <thread>
#include <vector>

#if defined(__cpp_exceptions)
#include <system_error>
#endif

#if defined(__linux__)
#include <sched.h>
#endif

namespace nnc::rt {
namespace {

// Set while a thread runs chunks of some pool's job: a parallelFor from inside runs inline, which
// keeps nested loops correct and avoids deadlocking on the pool's own workers.
thread_local bool tlsInsideParallel = false;
// Marks the thread as running a job's work for its lifetime: a parallelFor from that work runs inline.
struct InsideParallel {
  bool was = tlsInsideParallel;
  InsideParallel() { tlsInsideParallel = true; }
  ~InsideParallel() { tlsInsideParallel = was; }
  InsideParallel(const InsideParallel&) = delete;
  InsideParallel& operator=(const InsideParallel&) = delete;
};

constexpr int kMaxThreads = 512;
// A caller that waited this long for a worker, and four times what its own share took, saw a straggler
// that lost its core; the pool then runs this many jobs on the caller alone (a few model runs), twice
// as many after each straggler in a row, up to kMaxSoloJobs.
constexpr std::chrono::microseconds kStragglerWait(500);
constexpr int kSoloJobs = 256, kMaxSoloJobs = 1 << 16;

int resolveNumThreads(int requested) {
  if (requested > 0) return std::min(requested, kMaxThreads);
  if (const char* env = std::getenv("NNC_NUM_THREADS")) {
    char* end = nullptr;
    long n = std::strtol(env, &end, 10);
    if (end != env && *end == '\0' && n > 0) return static_cast<int>(std::min<long>(n, kMaxThreads));
  }
  unsigned hw = std::thread::hardware_concurrency();
  return hw == 0 ? 1 : static_cast<int>(std::min<unsigned>(hw, kMaxThreads));
}

// Where a new worker starts: the scheduler puts a thread created while every CPU is busy (a model
// is created right after its compile, which uses them all) on its creator's CPU, and a woken thread
// goes back to the CPU it slept on — so the worker and the caller could share one CPU for many
// milliseconds until load balancing parts them, the worker running only when the caller waits (the
// batch-1 MLP at 2 threads ran several times slower for its first ~250 runs, in most process
// starts; bench/NOTES.md). Worker `index` (1, 2, ...) moves once to the index-th allowed
// CPU after its creator's, then gets its whole affinity back: a starting place, not a pin.
void startAwayFromCreator(int creatorCpu, int index) {
#if defined(__linux__)
  cpu_set_t allowed;
  if (creatorCpu < 0 || sched_getaffinity(0, sizeof allowed, &allowed) != 0) return;
  const int count = CPU_COUNT(&allowed);
  if (count < 2 || !CPU_ISSET(creatorCpu, &allowed)) return;
  std::vector<int> cpus;
  for (int c = 0; c < CPU_SETSIZE; ++c)
    if (CPU_ISSET(c, &allowed)) cpus.push_back(c);
  const auto at = std::find(cpus.begin(), cpus.end(), creatorCpu) - cpus.begin();
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(cpus[static_cast<size_t>((at + index) % count)], &one);
  if (sched_setaffinity(0, sizeof one, &one) == 0) sched_setaffinity(0, sizeof allowed, &allowed);
#else
  (void)creatorCpu;
  (void)index;
#endif
}

}  // namespace

struct ThreadPool::Impl {
  struct Job {
    const std::function<void(int64_t, int64_t)>* fn = nullptr;
    int64_t total = 0;
    int64_t chunk = 1;
    int64_t numChunks = 0;
    int participants = 1;
  };
  // One participant's span of chunks [front, back), both in one word: the owner claims the front,
  // thieves the back, each with a compare-and-swap. A cache line each: owners claim without
  // contention. (Chunk numbers fit 32 bits: a job has at most 16 per thread.)
  struct alignas(64) Span {
    std::atomic<uint64_t> bounds{0};
    static uint64_t pack(int64_t front, int64_t back) {
      return static_cast<uint64_t>(front) << 32 | static_cast<uint64_t>(back);
    }
    // The chunk claimed from the front (or the back), or -1 when the span is empty.
    int64_t claim(bool fromBack) {
      uint64_t v = bounds.load(std::memory_order_relaxed);
      for (;;) {
        const int64_t front = static_cast<int64_t>(v >> 32), back = static_cast<int64_t>(v & 0xffffffffu);
        if (front >= back) return -1;
        const uint64_t next = fromBack ? pack(front, back - 1) : pack(front + 1, back);
        if (bounds.compare_exchange_weak(v, next, std::memory_order_relaxed)) return fromBack ? back - 1 : front;
      }
    }
  };

  std::vector<std::thread> workers;
  std::mutex submitMutex;   // one job at a time per pool (callers on other threads queue here)
  std::vector<Span> spans;  // numThreads(), set up by the caller for each job

  std::mutex mutex;
  std::condition_variable workCv;
  std::condition_variable doneCv;
  Job job;
  uint64_t generation = 0;
  std::atomic<uint64_t> published{0};  // generation, readable without the mutex (for spinning)
  std::atomic<int> running{0};         // active, likewise
  bool jobOpen = false;
  int slots = 0;
  int active = 0;
  bool stop = false;
  // Guarded by submitMutex (see parallelFor): jobs left to run on the caller alone, the length of the
  // next such stretch, and the jobs run with workers since the last straggler.
  int soloJobs = 0, soloPeriod = kSoloJobs, cleanJobs = 0;

  // Before blocking on a condition variable, a thread polls for a short while: kernels come back to
  // back (tens of them per model run), and waking a sleeping thread costs tens of microseconds —
  // more than a small kernel's whole work. Bounded, so an idle pool sleeps.
  template <typename Ready>
  static void spinUntil(Ready ready) {
    constexpr auto kSpin = std::chrono::microseconds(50);
    const auto start = std::chrono::steady_clock::now();
    for (int i = 1; !ready(); ++i) {
#if defined(__x86_64__) || defined(__i386__)
      __builtin_ia32_pause();
#endif
      if (i % 64 == 0 && std::chrono::steady_clock::now() - start > kSpin) return;
    }
  }

  void runChunks(const Job& j, int self) {
    const InsideParallel inside;
    for (int k = 0; k < j.participants; ++k) {
      Span& span = spans[static_cast<size_t>((self + k) % j.participants)];
      for (int64_t c; (c = span.claim(/*fromBack=*/k != 0)) >= 0;) {
        int64_t begin = c * j.chunk;
        int64_t end = std::min(j.total, begin + j.chunk);
        (*j.fn)(begin, end);
      }
    }
  }

  void workerLoop() {
    uint64_t seen = 0;
    std::unique_lock<std::mutex> lock(mutex);
    for (;;) {
      lock.unlock();
      spinUntil([&] { return published.load(std::memory_order_acquire) != seen; });
      lock.lock();
      workCv.wait(lock, [&] { return stop || generation != seen; });
      if (stop) return;
      seen = generation;
      if (!jobOpen || slots == 0) continue;
      --slots;
      ++active;
      const int self = job.participants - 1 - slots;  // workers are 1, 2, ... in the order they join
      running.store(active, std::memory_order_release);
      Job j = job;
      lock.unlock();
      runChunks(j, self);
      lock.lock();
      running.store(--active, std::memory_order_release);
      if (active == 0) doneCv.notify_all();
    }
  }
};

ThreadPool::ThreadPool(int numThreads) : impl_(new Impl) {
  int n = resolveNumThreads(numThreads);
  impl_->spans = std::vector<Impl::Span>(static_cast<size_t>(n));
  impl_->workers.reserve(static_cast<size_t>(n - 1));
#if defined(__linux__)
  const int creatorCpu = sched_getcpu();
#else
  const int creatorCpu = -1;
#endif
  for (int i = 1; i < n; ++i) {
    auto work = [this, creatorCpu, i] {
      startAwayFromCreator(creatorCpu, i);
      impl_->workerLoop();
    };
#if defined(__cpp_exceptions)
    // Out of threads: run with the ones we have rather than terminate the host process.
    try {
      impl_->workers.emplace_back(work);
    } catch (const std::system_error&) {
      break;
    }
#else
    impl_->workers.emplace_back(work);
#endif
  }
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(impl_->mutex);
    impl_->stop = true;
  }
  impl_->workCv.notify_all();
  for (std::thread& t : impl_->workers) t.join();
  delete impl_;
}

int ThreadPool::numThreads() const { return static_cast<int>(impl_->workers.size()) + 1; }

void ThreadPool::parallelFor(int64_t total, int64_t minChunk, int64_t granule,
                             const std::function<void(int64_t, int64_t)>& fn) {
  if (total <= 0) return;
  minChunk = std::max<int64_t>(minChunk, 1);
  int threads = numThreads();
  if (threads == 1 || total <= minChunk || tlsInsideParallel) {
    fn(0, total);
    return;
  }
  // Several chunks per thread, so that a slow or descheduled thread's share is picked up by others,
  // and many where the points allow (a contraction's 28 tasks: 4 per thread made 7 chunks of 4 tasks,
  // 16 against 12 tasks on 2 threads; one task per chunk made ResNet-18 and a 3 x 3 conv at 14 x 14
  // faster at 2 threads, bench/NOTES.md). A chunk is at least minChunk points:
  // that much work amortises handing it out.
  constexpr int64_t kChunksPerThread = 16;
  int64_t chunk = std::max(minChunk, (total + threads * kChunksPerThread - 1) / (threads * kChunksPerThread));
  // Whole groups: a conv run column block by column block has granule = its row blocks, which all
  // read one block of weights. Split between threads, both threads fetched every block (whole groups
  // made ResNet-18's 7 x 7 layers faster at 2 threads; bench/NOTES.md). Only with two groups or more
  // per thread, so that the threads stay balanced.
  if (granule > 1 && total / granule >= 2 * threads) chunk = (chunk + granule - 1) / granule * granule;
  int64_t numChunks = (total + chunk - 1) / chunk;
  if (numChunks <= 1) {
    fn(0, total);
    return;
  }

  std::lock_guard<std::mutex> submit(impl_->submitMutex);
  // After a job whose caller waited long on a straggler (below), the next jobs run on the caller
  // alone: one thread beats two when one of them keeps losing its core.
  if (impl_->soloJobs > 0) {
    --impl_->soloJobs;
    // As inside runChunks: a parallelFor from fn runs inline (it would wait on submitMutex, held here).
    const InsideParallel inside;
    fn(0, total);
    return;
  }
  const auto start = std::chrono::steady_clock::now();
  const int participants = static_cast<int>(std::min<int64_t>(numChunks, threads));
  Impl::Job job{&fn, total, chunk, numChunks, participants};
  {
    std::lock_guard<std::mutex> lock(impl_->mutex);
    impl_->job = job;
    for (int p = 0; p < participants; ++p) {
      impl_->spans[static_cast<size_t>(p)].bounds.store(
          Impl::Span::pack(numChunks * p / participants, numChunks * (p + 1) / participants),
          std::memory_order_relaxed);
    }
    impl_->slots = participants - 1;
    impl_->jobOpen = true;
    ++impl_->generation;
    impl_->published.store(impl_->generation, std::memory_order_release);
  }
  impl_->workCv.notify_all();
  impl_->runChunks(job, 0);
  const auto ran = std::chrono::steady_clock::now();
  std::unique_lock<std::mutex> lock(impl_->mutex);
  impl_->jobOpen = false;
  if (impl_->active != 0) {
    lock.unlock();
    Impl::spinUntil([&] { return impl_->running.load(std::memory_order_acquire) == 0; });
    lock.lock();
  }
  impl_->doneCv.wait(lock, [&] { return impl_->active == 0; });
  // A worker that loses its core while it holds a chunk (another process on it) keeps the caller
  // waiting for the rest of that process's time slice, milliseconds, job after job: ResNet-18 at
  // 64 x 64 with `yes` on one core ran slower at 2 threads than at 1 (bench/NOTES.md).
  // A wait that long, and four times the caller's own share, is not a late or larger chunk (ResNet-50's
  // column blocks at 2 threads wait up to about their share: no such fallback in 60 runs): run the
  // next jobs on the caller alone, then try the workers again.
  // Each straggler in a row doubles the next solo stretch (a busy core stays busy: every probe of
  // the workers costs a time slice); a run of kSoloJobs jobs without one resets it.
  const auto waited = std::chrono::steady_clock::now() - ran;
  if (waited >= kStragglerWait && waited > 4 * (ran - start)) {
    impl_->soloJobs = impl_->soloPeriod;
    impl_->soloPeriod = std::min(2 * impl_->soloPeriod, kMaxSoloJobs);
    impl_->cleanJobs = 0;
  } else if (++impl_->cleanJobs >= kSoloJobs) {
    impl_->soloPeriod = kSoloJobs;
  }
}

}  // namespace nnc::rt
