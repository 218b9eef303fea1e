// Hand-built plans and C++ kernels for the runtime tests (no compiler involved).
#pragma once

#include <cstring>
#include <vector>

#include "runtime/plan.h"

namespace nnc::rt::testing {

// Kernels over rows of `cols` f32 elements; loads and stores go through memcpy because callers may
// pass misaligned buffers.
inline float loadF32(const void* base, int64_t i) {
  float v;
  std::memcpy(&v, static_cast<const char*>(base) + i * 4, 4);
  return v;
}
inline void storeF32(void* base, int64_t i, float v) { std::memcpy(static_cast<char*>(base) + i * 4, &v, 4); }

// buffers: a, b, out; out = a + b over rows [begin, end).
template <int64_t Cols>
void addRows(void* const* buffers, int64_t begin, int64_t end) {
  for (int64_t i = begin * Cols; i < end * Cols; ++i)
    storeF32(buffers[2], i, loadF32(buffers[0], i) + loadF32(buffers[1], i));
}
// buffers: in, out; out = 2 * in.
template <int64_t Cols>
void doubleRows(void* const* buffers, int64_t begin, int64_t end) {
  for (int64_t i = begin * Cols; i < end * Cols; ++i) storeF32(buffers[1], i, 2.0f * loadF32(buffers[0], i));
}

// y = 2 * (x + w): input x [rows x cols] f32, weight w (same shape) at weight offset 0, a temporary
// t in the arena at offset 64, output y. Steps: "add_rows" (x, w, t), "double_rows" (t, y).
inline Plan makeAddDoublePlan(int64_t rows, int64_t cols) {
  uint64_t bytes = static_cast<uint64_t>(rows * cols * 4);
  Plan p;
  p.inputs.push_back({"x", /*dtype=*/1, {rows, cols}, bytes});
  p.outputs.push_back({"y", /*dtype=*/1, {rows, cols}, bytes});
  p.buffers = {
      {BufferKind::Input, 0, bytes},
      {BufferKind::Weight, 0, bytes},
      {BufferKind::Arena, 64, bytes},
      {BufferKind::Output, 0, bytes},
  };
  Step add;
  add.kind = StepKind::Kernel;
  add.name = "add_rows";
  add.args = {0, 1, 2};
  add.outerSize = rows;
  add.workPerPoint = cols;
  add.origin = "add_node";
  Step dbl;
  dbl.kind = StepKind::Kernel;
  dbl.name = "double_rows";
  dbl.args = {2, 3};
  dbl.outerSize = rows;
  dbl.workPerPoint = cols;
  dbl.origin = "double_node";
  p.steps = {add, dbl};
  p.arenaSize = 64 + bytes;
  p.weightsSize = bytes;
  return p;
}

}  // namespace nnc::rt::testing
