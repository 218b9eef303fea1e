// Hand-built plans and C++ kernels for the runtime tests (no compiler involved).
#pragma once

#include <algorithm>
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

inline constexpr int64_t kPipelineCols = 12;

// A row pipeline's plan (runtime/pipeline_test.cpp has its kernels): x [rows x 12] -> "scale" (two
// rows per outer point) -> t1 -> "window3" (rows r - 1 to r + 1) -> t2 -> "stride2" (rows 2r, 2r + 1;
// its first argument a weight it does not read) -> y [ceil(rows / 2) x 12]; pipelined or not.
inline Plan makeRowPipelinePlan(int64_t rows, bool pipelined) {
  const uint64_t row = kPipelineCols * 4, bytes = static_cast<uint64_t>(rows) * row;
  const int64_t outRows = (rows + 1) / 2;
  Plan p;
  p.inputs.push_back({"x", 1, {rows, kPipelineCols}, bytes});
  p.outputs.push_back({"y", 1, {outRows, kPipelineCols}, static_cast<uint64_t>(outRows) * row});
  p.buffers = {{BufferKind::Input, 0, bytes},
               {BufferKind::Arena, 0, bytes},
               {BufferKind::Arena, (bytes + 63) / 64 * 64, bytes},
               {BufferKind::Output, 0, static_cast<uint64_t>(outRows) * row},
               {BufferKind::Weight, 0, 4}};
  p.arenaSize = 2 * ((bytes + 63) / 64 * 64);
  p.weightsSize = 4;
  auto kernel = [](const char* name, std::vector<int32_t> args, int64_t outer) {
    Step s;
    s.kind = StepKind::Kernel;
    s.name = name;
    s.args = std::move(args);
    s.outerSize = outer;
    s.origin = name;
    return s;
  };
  p.steps = {kernel("scale", {0, 1}, (rows + 1) / 2), kernel("window3", {1, 2}, rows),
             kernel("stride2", {4, 2, 3}, outRows)};
  if (pipelined) {
    Pipeline pipe;
    pipe.firstStep = 0;
    pipe.bandRows = std::min<int64_t>(2, outRows);
    const auto rowBytes = static_cast<int64_t>(row);
    // Windows as targets/cpu/row_pipelines.cpp sizes them: the reader's rows, plus a unit at either end.
    const int64_t winRows = std::min(rows, (pipe.bandRows - 1) * 2 + 2);
    const int64_t scaleRows = std::min(rows, (winRows - 1) + 3 + 2);
    const PipelineStage scale{.rows = rows, .unitRows = 2, .outSlot = 1, .rowBytes = rowBytes, .windowRows = scaleRows};
    const PipelineStage win{.rows = rows,
                            .padBegin = 1,
                            .extent = 3,
                            .inSlot = 0,
                            .outSlot = 1,
                            .rowBytes = rowBytes,
                            .windowRows = winRows};
    const PipelineStage down{.rows = outRows, .stride = 2, .extent = 2, .inSlot = 1};
    pipe.stages = {scale, win, down};
    p.pipelines.push_back(pipe);
  }
  return p;
}

}  // namespace nnc::rt::testing
