// This machine's f32 FMA throughput per thread, measured (the clock /proc/cpuinfo reports can be far
// below the one the core runs at, and a virtual machine's CPU name may not be its core's): the
// ceiling `nnc bench --per-kernel` rates contractions against, and whether the GEMM tile's
// narrow-column panels should be half-width (hostTileTarget).
#pragma once

namespace nnc::codegen {

// GFLOP/s of one thread running independent FMA chains of 8-lane and of 16-lane vectors (0 where the
// CPU lacks them), each for about `seconds` (best of three).
struct FmaRates {
  double narrow = 0, wide = 0;
};
FmaRates measureFmaRates(double seconds);

// The faster of the two: this machine's FMA peak per thread.
double measureFmaPeakGflops(double seconds = 0.1);

}  // namespace nnc::codegen
