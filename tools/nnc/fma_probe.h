// This machine's f32 FMA throughput per thread, measured (the clock /proc/cpuinfo reports can be far
// below the one the core runs at): the ceiling `nnc bench --per-kernel` rates contractions against.
#pragma once

namespace nnc::cli {

// GFLOP/s of one thread running independent vector FMA chains for about `seconds` (best of three).
double measureFmaPeakGflops(double seconds = 0.1);

}  // namespace nnc::cli
