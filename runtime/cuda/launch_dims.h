// The launch-shape rule for kernels from codegen/cuda, shared by the emitter (which generates
// grid-stride loops assuming it) and the CUDA runtime (which launches them): header-only, so that the
// runtime needs nothing of the code generator.
#pragma once

#include <algorithm>
#include <cstdint>

#include "runtime/plan.h"

namespace nnc::rt::cuda {

constexpr int64_t kWarpSize = 32;
constexpr int64_t kBlockSize = 256;  // a multiple of kWarpSize: warp-per-point kernels rely on it
constexpr int64_t kMaxGrid = 65536;  // grid-stride loops cover the rest

struct LaunchShape {
  uint32_t gridX = 1;
  uint32_t blockX = static_cast<uint32_t>(kBlockSize);
};

// Blocks of kBlockSize threads; enough blocks to give every outer point its thread (ThreadPerPoint)
// or warp (WarpPerPoint), at least 1 and at most kMaxGrid.
inline LaunchShape launchShape(GpuMapping mapping, int64_t points) {
  const int64_t perBlock = mapping == GpuMapping::ThreadPerPoint ? kBlockSize : kBlockSize / kWarpSize;
  LaunchShape s;
  s.gridX = static_cast<uint32_t>(std::clamp<int64_t>((points + perBlock - 1) / perBlock, 1, kMaxGrid));
  return s;
}

}  // namespace nnc::rt::cuda
