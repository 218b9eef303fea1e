// Measures this machine's peak AMX-BF16 throughput (GFLOP/s) with 1 and 2 threads: the ceiling of
// `--precision=bf16` contractions, as bench/fma_peak.cpp's is of the f32 ones.
//
//   g++ -O2 -march=native -pthread bench/amx_peak.cpp -o amx_peak && ./amx_peak [seconds]
//
// Each thread asks Linux for the tile state (arch_prctl ARCH_REQ_XCOMP_PERM), configures eight 16 x 64-byte
// tiles and runs TDPBF16PS into four independent accumulators from two A and two B tiles, loaded once
// (so no memory traffic: the products' issue rate alone). One TDPBF16PS is 16 x 16 x 32 multiply-adds,
// 16,384 FLOPs. A run is sized to take ~`seconds` (default 0.3); the best of kRepeats (5) is reported,
// with the cycles per product implied by "clock_ghz_1t" (a chain of dependent 1-cycle integer adds).
// Prints one JSON object on stdout, or {"amx": false} where the CPU or OS has no AMX-BF16.
#include <immintrin.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

#if !defined(__AMX_TILE__) || !defined(__AMX_BF16__)
int main() {
  std::printf("{\"amx\": false, \"why\": \"compiled without AMX (-march=native on a CPU without it)\"}\n");
  return 0;
}
#else

namespace {

constexpr int kRepeats = 5;
constexpr int kUnroll = 16;                 // products per loop iteration (4 per accumulator)
constexpr double kFlopsPerProduct = 16384;  // 2 * 16 * 16 * 32

bool requestTiles() {
  constexpr long kArchReqXcompPerm = 0x1023, kXfeatureXtiledata = 18;
  return syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) == 0;
}

void configureTiles() {
  alignas(64) uint8_t config[64] = {};
  config[0] = 1;
  for (int t = 0; t < 8; ++t) {
    config[16 + 2 * t] = 64;
    config[48 + t] = 16;
  }
  _tile_loadconfig(config);
}

// Seconds for `iterations` loops of kUnroll products on this thread.
double runProducts(int64_t iterations) {
  configureTiles();
  alignas(64) static thread_local uint16_t data[16 * 32] = {};
  _tile_loadd(4, data, 64);
  _tile_loadd(5, data, 64);
  _tile_loadd(6, data, 64);
  _tile_loadd(7, data, 64);
  _tile_zero(0);
  _tile_zero(1);
  _tile_zero(2);
  _tile_zero(3);
  const auto start = std::chrono::steady_clock::now();
  for (int64_t i = 0; i < iterations; ++i) {
    for (int u = 0; u < kUnroll / 4; ++u) {
      _tile_dpbf16ps(0, 4, 6);
      _tile_dpbf16ps(1, 4, 7);
      _tile_dpbf16ps(2, 5, 6);
      _tile_dpbf16ps(3, 5, 7);
    }
  }
  alignas(64) static thread_local float out[16 * 16];
  _tile_stored(0, out, 64);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  _tile_release();
  if (out[0] != 0) std::printf("");  // the products are never dead (out is read)
  return seconds;
}

double clockGhz() {
  int64_t x = 0;
  const int64_t n = 200'000'000;
  const auto start = std::chrono::steady_clock::now();
  for (int64_t i = 0; i < n; ++i) __asm__ volatile("add $1, %0" : "+r"(x));
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return static_cast<double>(n) / s / 1e9;
}

// GFLOP/s of `threads` threads, best of kRepeats runs of about `seconds` each.
double peak(int threads, double seconds) {
  int64_t iterations = 1000;
  while (runProducts(iterations) < seconds / 10) iterations *= 4;
  iterations = static_cast<int64_t>(static_cast<double>(iterations) * seconds / runProducts(iterations));
  double best = 0;
  for (int r = 0; r < kRepeats; ++r) {
    std::vector<double> times(static_cast<size_t>(threads));
    std::vector<std::thread> pool;
    for (int t = 0; t < threads; ++t)
      pool.emplace_back([&, t] { times[static_cast<size_t>(t)] = runProducts(iterations); });
    for (std::thread& t : pool) t.join();
    const double slowest = *std::max_element(times.begin(), times.end());
    best = std::max(best, threads * static_cast<double>(iterations) * kUnroll * kFlopsPerProduct / slowest / 1e9);
  }
  return best;
}

}  // namespace

int main(int argc, char** argv) {
  const double seconds = argc > 1 ? std::atof(argv[1]) : 0.3;
  if (!__builtin_cpu_supports("amx-bf16") || !requestTiles()) {
    std::printf("{\"amx\": false, \"why\": \"no AMX-BF16, or Linux refused the tile state\"}\n");
    return 0;
  }
  const double ghz = clockGhz();
  const double p1 = peak(1, seconds), p2 = peak(2, seconds);
  std::printf(
      "{\"amx\": true, \"peak_bf16_gflops_1t\": %.1f, \"peak_bf16_gflops_2t\": %.1f, \"clock_ghz_1t\": %.3f, "
      "\"cycles_per_product_1t\": %.2f}\n",
      p1, p2, ghz, kFlopsPerProduct * ghz / p1);
  return 0;
}
#endif
