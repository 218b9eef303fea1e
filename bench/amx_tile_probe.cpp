// What a 32 x 32 AMX-BF16 register tile (2 x 2 accumulators, two A and two B tiles: all eight tile
// registers) gets around its products, at 1 thread: the ceilings behind codegen/amx.cpp's tile.
//
//   g++ -O2 -march=native bench/amx_tile_probe.cpp -o amx_tile_probe && ./amx_tile_probe
//
// 1. Tile boundaries with both operands in L1 (A: 8 K steps of 2 KiB, B: 8 of 2 KiB): per tile the
//    accumulators are zeroed (or loaded: partial sums), `steps` K steps of 4 TDPBF16PS run, the tile
//    is stored to a scratch tile, and an epilogue adds a scratch tile into a 4 KiB output tile (64
//    vector loads, adds and stores) right after the stores, or for the tile before, at one of several
//    places in this tile's products.
// 2. B streamed from a block of 16 KiB panels (K = 256) of growing size (L1, L2, L3), A's four row
//    tiles (64 KiB) from L2, with the epilogue spread over the K steps.
// Prints GFLOP/s per case (best of 5); compare with bench/amx_peak.cpp's peak.
#include <immintrin.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <initializer_list>

#if !defined(__AMX_TILE__) || !defined(__AMX_BF16__)
int main() {
  std::printf("compiled without AMX (-march=native on a CPU without it)\n");
  return 0;
}
#else
namespace {

constexpr double kFlopsPerStep = 4 * 16384.0;  // four TDPBF16PS
alignas(64) uint16_t smallA[8][32 * 32];
alignas(64) uint16_t smallB[8][16 * 64];
alignas(64) float scratch[64][32 * 32];
alignas(64) float output[64][32 * 32];

__attribute__((noinline)) void configureTiles() {
  alignas(64) static uint8_t config[64] = {};
  config[0] = 1;
  for (int t = 0; t < 8; ++t) {
    config[16 + 2 * t] = 64;
    config[48 + t] = 16;
  }
  _tile_loadconfig(config);
}

inline void step(const uint16_t* a, const uint16_t* b) {
  _tile_loadd(4, a, 64);
  _tile_loadd(6, b, 128);
  _tile_loadd(7, b + 32, 128);
  _tile_dpbf16ps(0, 4, 6);
  _tile_dpbf16ps(1, 4, 7);
  _tile_loadd(5, a + 512, 64);
  _tile_dpbf16ps(2, 5, 6);
  _tile_dpbf16ps(3, 5, 7);
}

inline void storeTile(float* c) {
  _tile_stored(0, c, 128);
  _tile_stored(1, c + 16, 128);
  _tile_stored(2, c + 512, 128);
  _tile_stored(3, c + 528, 128);
}

inline void addRows(const float* from, float* to, int first, int last) {
  for (int i = first; i < last; i += 16)
    _mm512_store_ps(to + i, _mm512_add_ps(_mm512_load_ps(from + i), _mm512_load_ps(to + i)));
}

enum class Epilogue { None, AfterStores, PartialsLoaded, PreviousBeforeSteps, PreviousAfterSteps, PreviousPerStep };

template <Epilogue E>
double boundaries(int steps, long tiles) {
  const auto start = std::chrono::steady_clock::now();
  for (long t = 0; t < tiles; ++t) {
    float* c = scratch[t & 63];
    const float* previous = scratch[(t - 1) & 63];
    float* out = output[(t - 1) & 63];
    if (E == Epilogue::PartialsLoaded) {
      _tile_loadd(0, c, 128);
      _tile_loadd(1, c + 16, 128);
      _tile_loadd(2, c + 512, 128);
      _tile_loadd(3, c + 528, 128);
    } else {
      _tile_zero(0);
      _tile_zero(1);
      _tile_zero(2);
      _tile_zero(3);
    }
    if (E == Epilogue::PreviousBeforeSteps) addRows(previous, out, 0, 1024);
    for (int s = 0; s < steps; ++s) {
      step(smallA[s & 7], smallB[s & 7]);
      if (E == Epilogue::PreviousPerStep) addRows(previous, out, s * 1024 / steps, (s + 1) * 1024 / steps);
    }
    if (E == Epilogue::PreviousAfterSteps) addRows(previous, out, 0, 1024);
    storeTile(c);
    if (E == Epilogue::AfterStores) addRows(c, output[t & 63], 0, 1024);
  }
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

double streamed(const uint16_t* a, const uint16_t* b, int panels, long repeats) {
  const auto start = std::chrono::steady_clock::now();
  for (long r = 0; r < repeats; ++r)
    for (int t = 0; t < 4; ++t)
      for (int p = 0; p < panels; ++p) {
        _tile_zero(0);
        _tile_zero(1);
        _tile_zero(2);
        _tile_zero(3);
        const float* previous = scratch[(p + 1) & 1];
        float* out = output[p & 63];
        for (int s = 0; s < 8; ++s) {
          step(a + t * 8192 + s * 1024, b + static_cast<size_t>(p) * 8192 + s * 1024);
          addRows(previous, out, s * 128, s * 128 + 128);
        }
        storeTile(scratch[p & 1]);
      }
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

template <class F>
double best(F run) {
  double seconds = 1e30;
  for (int r = 0; r < 5; ++r) seconds = std::min(seconds, run());
  return seconds;
}

}  // namespace

int main() {
  constexpr long kArchReqXcompPerm = 0x1023, kXfeatureXtiledata = 18;
  if (syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) != 0) {
    std::printf("the OS refused the AMX tile state\n");
    return 1;
  }
  configureTiles();
  const struct {
    const char* name;
    double (*run)(int, long);
  } cases[] = {{"zero, store", boundaries<Epilogue::None>},
               {"zero, store, epilogue after the stores", boundaries<Epilogue::AfterStores>},
               {"partials loaded, store", boundaries<Epilogue::PartialsLoaded>},
               {"previous tile's epilogue before the steps", boundaries<Epilogue::PreviousBeforeSteps>},
               {"previous tile's epilogue after the steps", boundaries<Epilogue::PreviousAfterSteps>},
               {"previous tile's epilogue spread over the steps", boundaries<Epilogue::PreviousPerStep>}};
  std::printf("1. tile boundaries, operands in L1\n");
  for (const auto& c : cases)
    for (int steps : {4, 8, 16}) {
      const long tiles = 40000000L / (steps * 4);
      const double s = best([&] { return c.run(steps, tiles); });
      std::printf("  %-48s K steps %2d: %5.0f GFLOP/s\n", c.name, steps, tiles * steps * kFlopsPerStep / s / 1e9);
    }
  std::printf("2. B streamed from a block of panels, A from L2\n");
  auto* a = static_cast<uint16_t*>(std::aligned_alloc(4096, 64 << 10));
  auto* b = static_cast<uint16_t*>(std::aligned_alloc(4096, 8 << 20));
  for (size_t i = 0; i < (32u << 10); ++i) a[i] = 0x3f80;
  for (size_t i = 0; i < (4u << 20); ++i) b[i] = 0x3f80;
  for (int panels : {1, 8, 32, 256}) {
    const long repeats = std::max(1L, 20000000L / (panels * 4 * 8 * 4));
    const double s = best([&] { return streamed(a, b, panels, repeats); });
    std::printf("  B block %5d KiB: %5.0f GFLOP/s\n", panels * 16, repeats * 4 * panels * 8 * kFlopsPerStep / s / 1e9);
  }
  std::free(a);
  std::free(b);
  return 0;
}
#endif
