// The launch-shape rule for kernels from codegen/cuda, shared by the emitter (which generates
// grid-stride loops assuming it) and the CUDA runtime (which launches them): header-only, so that the
// runtime needs nothing of the code generator.
//
// Every generated kernel is a grid-stride loop (over points, vectors of points, warps or blocks), so
// any grid is correct; this rule only sizes the grid so that each unit of work gets its own thread,
// warp or block.
#pragma once

#include <algorithm>
#include <cstdint>

#include "runtime/plan.h"

namespace nnc::rt::cuda {

constexpr int64_t kWarpSize = 32;
constexpr int64_t kBlockSize = 256;  // a multiple of kWarpSize: warp- and block-per-point kernels rely on it
constexpr int64_t kMaxGrid = 65536;  // grid-stride loops cover the rest

struct LaunchShape {
  uint32_t gridX = 1;
  uint32_t blockX = static_cast<uint32_t>(kBlockSize);
};

// Outer points one thread handles in a ThreadPerVectorN kernel (N); 1 for the other mappings.
inline int64_t pointsPerThread(GpuMapping mapping) {
  switch (mapping) {
    case GpuMapping::ThreadPerVector2: return 2;
    case GpuMapping::ThreadPerVector4: return 4;
    case GpuMapping::ThreadPerVector8: return 8;
    case GpuMapping::ThreadPerVector16: return 16;
    default: return 1;
  }
}

// Outer points one block of kBlockSize threads covers.
inline int64_t pointsPerBlock(GpuMapping mapping) {
  switch (mapping) {
    case GpuMapping::WarpPerPoint: return kBlockSize / kWarpSize;
    case GpuMapping::BlockPerPoint: return 1;
    default: return kBlockSize * pointsPerThread(mapping);  // ThreadPerPoint, ThreadPerVectorN
  }
}

// Blocks of kBlockSize threads; enough blocks to give every outer point (or vector of points) its
// thread, every point its warp (WarpPerPoint) or its block (BlockPerPoint); at least 1 and at most
// kMaxGrid.
inline LaunchShape launchShape(GpuMapping mapping, int64_t points) {
  const int64_t perBlock = pointsPerBlock(mapping);
  LaunchShape s;
  s.gridX = static_cast<uint32_t>(std::clamp<int64_t>((points + perBlock - 1) / perBlock, 1, kMaxGrid));
  return s;
}

}  // namespace nnc::rt::cuda
