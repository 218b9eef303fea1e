// Measures this machine's peak AVX512-BF16 throughput (VDPBF16PS on 512-bit vectors, GFLOP/s) beside
// the f32 FMA's on the same vectors, with 1 and 2 threads: the ceiling of `--precision=bf16`
// contractions on CPUs without AMX (Zen 4), as bench/amx_peak.cpp's is on those with it.
//
//   g++ -O2 -march=native -pthread bench/bf16_dot_peak.cpp -o bf16_dot_peak && ./bf16_dot_peak [seconds]
//
// Each thread runs 16 independent accumulator chains (more than latency x issue rate on any core
// here) from register operands, so no memory traffic: the issue rate alone. One VDPBF16PS is 16 lanes
// x 2 multiply-adds = 64 FLOPs, one 16-lane FMA 32. Best of kRepeats runs of ~`seconds` (default 0.3).
// Prints one JSON object, or {"avx512bf16": false} where the CPU has none.
#include <immintrin.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <vector>

#if !defined(__AVX512BF16__)
int main() {
  std::printf(
      "{\"avx512bf16\": false, \"why\": \"compiled without AVX512-BF16 (-march=native on a CPU without it)\"}\n");
  return 0;
}
#else

namespace {

constexpr int kRepeats = 5, kChains = 16;

template <bool kDot>
double run(int64_t iterations) {
  __m512 acc[kChains];
#pragma GCC unroll 16
  for (int c = 0; c < kChains; ++c) acc[c] = _mm512_set1_ps(static_cast<float>(c) * 1e-3f);
  const __m512 x = _mm512_set1_ps(1e-7f), y = _mm512_set1_ps(1.0f);
  const __m512bh xb = _mm512_cvtne2ps_pbh(x, x), yb = _mm512_cvtne2ps_pbh(y, y);
  const auto start = std::chrono::steady_clock::now();
  for (int64_t i = 0; i < iterations; ++i) {
#pragma GCC unroll 16
    for (int c = 0; c < kChains; ++c) {
      if constexpr (kDot)
        acc[c] = _mm512_dpbf16_ps(acc[c], xb, yb);
      else
        acc[c] = _mm512_fmadd_ps(x, y, acc[c]);
    }
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  float sum = 0;
  for (int c = 0; c < kChains; ++c) sum += _mm512_reduce_add_ps(acc[c]);
  if (sum == 12345.f) std::printf(" ");
  return seconds;
}

template <bool kDot>
double peak(int threads, double seconds) {
  const double flopsPerOp = kDot ? 64 : 32;
  int64_t iterations = 10000;
  while (run<kDot>(iterations) < seconds / 10) iterations *= 4;
  iterations = static_cast<int64_t>(static_cast<double>(iterations) * seconds / run<kDot>(iterations));
  double best = 0;
  for (int r = 0; r < kRepeats; ++r) {
    std::vector<double> times(static_cast<size_t>(threads));
    std::vector<std::thread> pool;
    for (int t = 0; t < threads; ++t)
      pool.emplace_back([&, t] { times[static_cast<size_t>(t)] = run<kDot>(iterations); });
    for (std::thread& t : pool) t.join();
    const double slowest = *std::max_element(times.begin(), times.end());
    best = std::max(best, threads * static_cast<double>(iterations) * kChains * flopsPerOp / slowest / 1e9);
  }
  return best;
}

}  // namespace

int main(int argc, char** argv) {
  const double seconds = argc > 1 ? std::atof(argv[1]) : 0.3;
  if (!__builtin_cpu_supports("avx512bf16")) {
    std::printf("{\"avx512bf16\": false, \"why\": \"this CPU has no AVX512-BF16\"}\n");
    return 0;
  }
  std::printf(
      "{\"avx512bf16\": true, \"peak_dpbf16_gflops_1t\": %.1f, \"peak_dpbf16_gflops_2t\": %.1f, "
      "\"peak_fma512_gflops_1t\": %.1f, \"peak_fma512_gflops_2t\": %.1f}\n",
      peak<true>(1, seconds), peak<true>(2, seconds), peak<false>(1, seconds), peak<false>(2, seconds));
  return 0;
}
#endif
