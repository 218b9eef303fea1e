// Measures this machine's peak f32 FMA throughput (GFLOP/s) with 1 and 2 threads, for 256-bit (AVX2 ymm,
// _mm256_fmadd_ps) and, where the compiler targets AVX-512F, 512-bit (zmm, _mm512_fmadd_ps) vectors.
//
//   g++ -O2 -march=native -pthread bench/fma_peak.cpp -o fma_peak && ./fma_peak [seconds]
//
// bench/contractions.py builds and runs it to express GEMM/conv throughput as a percentage of peak. Each
// thread runs kAcc (12) independent accumulator chains acc = acc * a + b (enough to cover FMA latency times the
// number of FMA pipes), so the loop is throughput-bound. A run is sized to take ~`seconds` (default 0.3) and
// the best of kRepeats (5) runs is reported. The chains are floating point (no -ffast-math), so the compiler can
// neither reassociate nor fold them, and every accumulator feeds a checksum that is printed, so none of
// them is dead. The /proc/cpuinfo clock is not the boost clock, which is why this measures instead of
// computing cores * GHz * FLOPs/cycle; "clock_ghz_1t" is an independent estimate from a chain of dependent
// 1-cycle integer adds, for reference. Prints one JSON object on stdout.
#include <immintrin.h>

#if !defined(__AVX2__) || !defined(__FMA__)
#error "fma_peak needs AVX2 and FMA: compile with -march=native on a machine that has them"
#endif

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <vector>

namespace {

constexpr int kAcc = 12;     // independent accumulators per thread (ymm: 12 + 2 constants of 16 registers)
constexpr int kRepeats = 5;  // best of
constexpr int kUnroll = 4;   // inner repetitions of the ACC-wide block per loop iteration

// Keeps results alive: every kernel adds its accumulators' lanes here, and main prints it.
std::atomic<double> gChecksum{0.0};

void addChecksum(double v) {  // std::atomic<double>::fetch_add is C++20
  double old = gChecksum.load();
  while (!gChecksum.compare_exchange_weak(old, old + v)) {
  }
}

double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

#define NNC_FMA12(F)  \
  c0 = F(c0, a, b);   \
  c1 = F(c1, a, b);   \
  c2 = F(c2, a, b);   \
  c3 = F(c3, a, b);   \
  c4 = F(c4, a, b);   \
  c5 = F(c5, a, b);   \
  c6 = F(c6, a, b);   \
  c7 = F(c7, a, b);   \
  c8 = F(c8, a, b);   \
  c9 = F(c9, a, b);   \
  c10 = F(c10, a, b); \
  c11 = F(c11, a, b);

// acc -> acc * a + b with a = 1 - 2^-20, b = 2^-20 converges to 1: no overflow, no denormals.
__attribute__((noinline)) void ymmKernel(int64_t iters, float seed) {
  const __m256 a = _mm256_set1_ps(1.0f - 1.0f / (1 << 20));
  const __m256 b = _mm256_set1_ps(1.0f / (1 << 20));
  __m256 c0 = _mm256_set1_ps(seed + 0), c1 = _mm256_set1_ps(seed + 1), c2 = _mm256_set1_ps(seed + 2),
         c3 = _mm256_set1_ps(seed + 3), c4 = _mm256_set1_ps(seed + 4), c5 = _mm256_set1_ps(seed + 5),
         c6 = _mm256_set1_ps(seed + 6), c7 = _mm256_set1_ps(seed + 7), c8 = _mm256_set1_ps(seed + 8),
         c9 = _mm256_set1_ps(seed + 9), c10 = _mm256_set1_ps(seed + 10), c11 = _mm256_set1_ps(seed + 11);
  for (int64_t i = 0; i < iters; ++i) {
    NNC_FMA12(_mm256_fmadd_ps) NNC_FMA12(_mm256_fmadd_ps) NNC_FMA12(_mm256_fmadd_ps) NNC_FMA12(_mm256_fmadd_ps)
  }
  __m256 s = _mm256_add_ps(_mm256_add_ps(_mm256_add_ps(c0, c1), _mm256_add_ps(c2, c3)),
                           _mm256_add_ps(_mm256_add_ps(c4, c5), _mm256_add_ps(c6, c7)));
  s = _mm256_add_ps(s, _mm256_add_ps(_mm256_add_ps(c8, c9), _mm256_add_ps(c10, c11)));
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, s);
  double sum = 0;
  for (float v : lanes) sum += v;
  addChecksum(sum);
}
constexpr int kYmmFlopsPerIter = 2 * 8 * kAcc * kUnroll;

#ifdef __AVX512F__
__attribute__((noinline)) void zmmKernel(int64_t iters, float seed) {
  const __m512 a = _mm512_set1_ps(1.0f - 1.0f / (1 << 20));
  const __m512 b = _mm512_set1_ps(1.0f / (1 << 20));
  __m512 c0 = _mm512_set1_ps(seed + 0), c1 = _mm512_set1_ps(seed + 1), c2 = _mm512_set1_ps(seed + 2),
         c3 = _mm512_set1_ps(seed + 3), c4 = _mm512_set1_ps(seed + 4), c5 = _mm512_set1_ps(seed + 5),
         c6 = _mm512_set1_ps(seed + 6), c7 = _mm512_set1_ps(seed + 7), c8 = _mm512_set1_ps(seed + 8),
         c9 = _mm512_set1_ps(seed + 9), c10 = _mm512_set1_ps(seed + 10), c11 = _mm512_set1_ps(seed + 11);
  for (int64_t i = 0; i < iters; ++i) {
    NNC_FMA12(_mm512_fmadd_ps) NNC_FMA12(_mm512_fmadd_ps) NNC_FMA12(_mm512_fmadd_ps) NNC_FMA12(_mm512_fmadd_ps)
  }
  __m512 s = _mm512_add_ps(_mm512_add_ps(_mm512_add_ps(c0, c1), _mm512_add_ps(c2, c3)),
                           _mm512_add_ps(_mm512_add_ps(c4, c5), _mm512_add_ps(c6, c7)));
  s = _mm512_add_ps(s, _mm512_add_ps(_mm512_add_ps(c8, c9), _mm512_add_ps(c10, c11)));
  alignas(64) float lanes[16];  // not _mm512_reduce_add_ps: GCC 12's header trips -Wuninitialized
  _mm512_store_ps(lanes, s);
  double sum = 0;
  for (float v : lanes) sum += v;
  addChecksum(sum);
}
constexpr int kZmmFlopsPerIter = 2 * 16 * kAcc * kUnroll;
#endif

// A dependent chain of 1-cycle integer adds: iterations * 16 adds take iterations * 16 cycles.
__attribute__((noinline)) void addChain(int64_t iters, float seed) {
  uint64_t x = static_cast<uint64_t>(seed);
  for (int64_t i = 0; i < iters; ++i) {
    asm volatile(
        "add $1, %0\n\tadd $1, %0\n\tadd $1, %0\n\tadd $1, %0\n\t"
        "add $1, %0\n\tadd $1, %0\n\tadd $1, %0\n\tadd $1, %0\n\t"
        "add $1, %0\n\tadd $1, %0\n\tadd $1, %0\n\tadd $1, %0\n\t"
        "add $1, %0\n\tadd $1, %0\n\tadd $1, %0\n\tadd $1, %0"
        : "+r"(x));
  }
  addChecksum(static_cast<double>(x & 1));
}
constexpr int kAddsPerIter = 16;

using Kernel = void (*)(int64_t, float);

// Wall time of `threads` threads each running kernel(iters) after a common start signal.
double timeRun(Kernel kernel, int64_t iters, int threads) {
  if (threads == 1) {
    double t0 = now();
    kernel(iters, 0.5f);
    return now() - t0;
  }
  std::atomic<int> ready{0};
  std::atomic<bool> go{false};
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      ready.fetch_add(1);
      while (!go.load(std::memory_order_acquire)) {
      }
      kernel(iters, 0.5f + t);
    });
  }
  while (ready.load() != threads) {
  }
  double t0 = now();
  go.store(true, std::memory_order_release);
  for (auto& th : pool) th.join();
  return now() - t0;
}

// Best rate (operations per second over all threads) of kRepeats runs sized to ~seconds each.
double bestRate(Kernel kernel, int64_t opsPerIter, int threads, double seconds) {
  int64_t iters = 1 << 16;
  // Calibrate: grow until a run takes at least 1/8 of the target, then scale to the target.
  for (;;) {
    double t = timeRun(kernel, iters, threads);
    if (t >= seconds / 8) {
      iters = std::max<int64_t>(1, static_cast<int64_t>(static_cast<double>(iters) * seconds / t));
      break;
    }
    iters *= 4;
  }
  double best = 0;
  for (int r = 0; r < kRepeats; ++r) {
    double t = timeRun(kernel, iters, threads);
    best = std::max(best, static_cast<double>(iters) * opsPerIter * threads / t);
  }
  return best;
}

}  // namespace

int main(int argc, char** argv) {
  double seconds = argc > 1 ? std::atof(argv[1]) : 0.3;
  if (!(seconds > 0)) seconds = 0.3;
  double ymm1 = bestRate(ymmKernel, kYmmFlopsPerIter, 1, seconds) / 1e9;
  double ymm2 = bestRate(ymmKernel, kYmmFlopsPerIter, 2, seconds) / 1e9;
#ifdef __AVX512F__
  double zmm1 = bestRate(zmmKernel, kZmmFlopsPerIter, 1, seconds) / 1e9;
  double zmm2 = bestRate(zmmKernel, kZmmFlopsPerIter, 2, seconds) / 1e9;
  char zmm1s[32], zmm2s[32];
  std::snprintf(zmm1s, sizeof zmm1s, "%.2f", zmm1);
  std::snprintf(zmm2s, sizeof zmm2s, "%.2f", zmm2);
#else
  double zmm1 = 0, zmm2 = 0;
  const char *zmm1s = "null", *zmm2s = "null";
#endif
  double ghz = bestRate(addChain, kAddsPerIter, 1, seconds / 3) / 1e9;
  std::printf(
      "{\"ymm_1t\": %.2f, \"ymm_2t\": %.2f, \"zmm_1t\": %s, \"zmm_2t\": %s, \"peak_1t\": %.2f, \"peak_2t\": %.2f, "
      "\"clock_ghz_1t\": %.3f, \"accumulators\": %d, \"seconds_per_run\": %.3f, \"repeats\": %d, "
      "\"checksum\": %.6g}\n",
      ymm1, ymm2, zmm1s, zmm2s, std::max(ymm1, zmm1), std::max(ymm2, zmm2), ghz, kAcc, seconds, kRepeats,
      gChecksum.load());
  return 0;
}
