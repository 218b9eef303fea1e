// Twelve independent chains of 8-lane FMAs (GCC vector extensions, contracted to vfmadd on an FMA
// host): enough chains to cover a 4-cycle latency at two FMAs per cycle, so the loop is
// throughput-bound. 512-bit FMAs give the same FLOP rate on the hosts this runs on (Zen 4 splits them;
// Intel's second 512-bit port would be missed: then this is half of that peak).
#include "tools/nnc/fma_probe.h"

#include <algorithm>
#include <chrono>

namespace nnc::cli {

namespace {

typedef float Vec8 __attribute__((vector_size(32)));
constexpr int kChains = 12;
constexpr long kInner = 1 << 14;

#if defined(__x86_64__)
__attribute__((target("avx2,fma")))
#endif
float fmaChains(long rounds) {
  Vec8 acc[kChains];
  for (int c = 0; c < kChains; ++c) acc[c] = Vec8{} + static_cast<float>(c);
  const Vec8 a = Vec8{} + 0.999999f, b = Vec8{} + 1e-7f;
  for (long r = 0; r < rounds; ++r)
    for (long i = 0; i < kInner; ++i)
      for (int c = 0; c < kChains; ++c) acc[c] = acc[c] * a + b;
  float sum = 0;
  for (int c = 0; c < kChains; ++c)
    for (int l = 0; l < 8; ++l) sum += acc[c][l];
  return sum;
}

}  // namespace

double measureFmaPeakGflops(double seconds) {
#if defined(__x86_64__)
  if (!__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma")) return 0;
#endif
  double best = 0;
  volatile float sink = 0;
  for (int trial = 0; trial < 3; ++trial) {
    long rounds = 1;
    for (;;) {
      const auto start = std::chrono::steady_clock::now();
      sink = sink + fmaChains(rounds);
      const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      if (s >= seconds / 3 || rounds > (1L << 30)) {
        const double flops = 2.0 * 8 * kChains * static_cast<double>(kInner) * static_cast<double>(rounds);
        best = std::max(best, flops / s / 1e9);
        break;
      }
      rounds *= 2;
    }
  }
  return best;
}

}  // namespace nnc::cli
