// Twelve independent chains of vector FMAs (GCC vector extensions, contracted to vfmadd on an FMA
// host): enough chains to cover a 4-cycle latency at two FMAs per cycle, so the loop is
// throughput-bound. Run at 8 and, where the CPU has AVX-512, at 16 lanes, and the faster counts:
// Zen 4 splits 512-bit FMAs (the same FLOP rate), Intel's server cores have a second 512-bit port
// (twice the rate; nnc's GEMMs use 16 lanes there).
#include "targets/cpu/codegen/fma_probe.h"

#include <algorithm>
#include <chrono>

namespace nnc::codegen {

namespace {

constexpr int kChains = 12;
constexpr long kInner = 1 << 14;

// Inlined into the target-attributed callers below, so that it compiles to their vector width.
template <typename Vec>
__attribute__((always_inline)) inline float fmaChainsOf(long rounds) {
  Vec acc[kChains];
  for (int c = 0; c < kChains; ++c) acc[c] = Vec{} + static_cast<float>(c);
  const Vec a = Vec{} + 0.999999f, b = Vec{} + 1e-7f;
  for (long r = 0; r < rounds; ++r)
    for (long i = 0; i < kInner; ++i)
      for (int c = 0; c < kChains; ++c) acc[c] = acc[c] * a + b;
  float sum = 0;
  for (int c = 0; c < kChains; ++c)
    for (size_t l = 0; l < sizeof(Vec) / sizeof(float); ++l) sum += acc[c][l];
  return sum;
}

typedef float Vec8 __attribute__((vector_size(32)));
typedef float Vec16 __attribute__((vector_size(64)));

#if defined(__x86_64__)
__attribute__((target("avx2,fma")))
#endif
float fmaChains8(long rounds) {
  return fmaChainsOf<Vec8>(rounds);
}

#if defined(__x86_64__)
__attribute__((target("avx512f")))
#endif
float fmaChains16(long rounds) {
  return fmaChainsOf<Vec16>(rounds);
}

// GFLOP/s of `chains` (lanes wide), best of three runs of about seconds / 3.
double bestRate(float (*chains)(long), int lanes, double seconds) {
  double best = 0;
  volatile float sink = 0;
  for (int trial = 0; trial < 3; ++trial) {
    long rounds = 1;
    for (;;) {
      const auto start = std::chrono::steady_clock::now();
      sink = sink + chains(rounds);
      const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      if (s >= seconds / 3 || rounds > (1L << 30)) {
        const double flops = 2.0 * lanes * kChains * static_cast<double>(kInner) * static_cast<double>(rounds);
        best = std::max(best, flops / s / 1e9);
        break;
      }
      rounds *= 2;
    }
  }
  return best;
}

}  // namespace

FmaRates measureFmaRates(double seconds) {
  FmaRates r;
#if defined(__x86_64__)
  if (!__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma")) return r;
  r.narrow = bestRate(fmaChains8, 8, seconds);
  if (__builtin_cpu_supports("avx512f")) r.wide = bestRate(fmaChains16, 16, seconds);
#else
  r.narrow = bestRate(fmaChains8, 8, seconds);
#endif
  return r;
}

double measureFmaPeakGflops(double seconds) {
  const FmaRates r = measureFmaRates(seconds);
  return std::max(r.narrow, r.wide);
}

}  // namespace nnc::codegen
