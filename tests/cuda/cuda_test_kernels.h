// Representative kernels for the CUDA backend's tests (the shapes the fused pipeline produces):
// pointwise with broadcast, a row reduction, a softmax row kernel, argmax/argmin with ties, f16
// storage, and integer semantics (division by zero, floor-div/mod, shifts, saturating casts).
#pragma once

#include <string>
#include <vector>

#include "kir/kernel_ir.h"

namespace nnc::codegen::cuda::testing {

using kir::ExprId;
using kir::ExprOp;
using kir::KernelBuilder;
using kir::ReduceOp;

// out[i, j] = a[i, j] + b[j] over a rows x cols outer domain.
inline kir::Kernel broadcastAdd(int rows = 5, int cols = 7) {
  KernelBuilder kb("bcast_add");
  int a = kb.addParam("a", DType::F32, rows * cols, false);
  int b = kb.addParam("b", DType::F32, cols, false);
  int out = kb.addParam("out", DType::F32, rows * cols, true);
  auto v = kb.setOuter({rows, cols});
  ExprId flat = kb.add(kb.mul(v[0], kb.i64(cols)), v[1]);
  kb.addStore(out, flat, kb.add(kb.load(a, flat), kb.load(b, v[1])), false);
  return kb.finish();
}

// out[i] = sum_j x[i, j].
inline kir::Kernel rowSum(int rows = 6, int cols = 100) {
  KernelBuilder kb("row_sum");
  int x = kb.addParam("x", DType::F32, rows * cols, false);
  int out = kb.addParam("out", DType::F32, rows, true);
  auto v = kb.setOuter({rows});
  auto r = kb.reductionVars({cols});
  kb.addStore(out, v[0], kb.reduce(ReduceOp::Sum, r, kb.load(x, kb.add(kb.mul(v[0], kb.i64(cols)), r[0]))), false);
  return kb.finish();
}

// out[i] = max_j x[i, j] over `dtype` (integers and bool: a ?: or || in the combine step).
inline kir::Kernel rowMax(DType dtype, int rows = 6, int cols = 100) {
  KernelBuilder kb("row_max");
  int x = kb.addParam("x", dtype, rows * cols, false);
  int out = kb.addParam("out", dtype, rows, true);
  auto v = kb.setOuter({rows});
  auto r = kb.reductionVars({cols});
  kb.addStore(out, v[0], kb.reduce(ReduceOp::Max, r, kb.load(x, kb.add(kb.mul(v[0], kb.i64(cols)), r[0]))), false);
  return kb.finish();
}

// out[i, :] = softmax(x[i, :]): two reductions (max, sum of exp) and a per-inner store.
inline kir::Kernel softmaxRows(int rows = 4, int cols = 70) {
  KernelBuilder kb("softmax_rows");
  int x = kb.addParam("x", DType::F32, rows * cols, false);
  int out = kb.addParam("out", DType::F32, rows * cols, true);
  auto v = kb.setOuter({rows});
  auto rowBase = kb.mul(v[0], kb.i64(cols));
  auto r1 = kb.reductionVars({cols});
  ExprId mx = kb.reduce(ReduceOp::Max, r1, kb.load(x, kb.add(rowBase, r1[0])));
  auto r2 = kb.reductionVars({cols});
  ExprId sum = kb.reduce(ReduceOp::Sum, r2, kb.unary(ExprOp::Exp, kb.sub(kb.load(x, kb.add(rowBase, r2[0])), mx)));
  auto in = kb.setInner({cols});
  ExprId at = kb.add(rowBase, in[0]);
  kb.addStore(out, at, kb.div(kb.unary(ExprOp::Exp, kb.sub(kb.load(x, at), mx)), sum), true);
  return kb.finish();
}

// Rows of x (rows x cols): argmax, argmax (last index), argmin, argmin (last index).
inline kir::Kernel argMaxMin(int rows = 4, int cols = 5) {
  KernelBuilder kb("argmax_ties");
  int x = kb.addParam("x", DType::F32, rows * cols, false);
  int outs[4];
  for (int i = 0; i < 4; ++i) outs[i] = kb.addParam("o" + std::to_string(i), DType::I64, rows, true);
  auto v = kb.setOuter({rows});
  const ReduceOp ops[4] = {ReduceOp::ArgMax, ReduceOp::ArgMax, ReduceOp::ArgMin, ReduceOp::ArgMin};
  const bool last[4] = {false, true, false, true};
  for (int i = 0; i < 4; ++i) {
    auto r = kb.reductionVars({cols});
    ExprId body = kb.load(x, kb.add(kb.mul(v[0], kb.i64(cols)), r[0]));
    kb.addStore(outs[i], v[0], kb.reduce(ops[i], r, body, last[i]), false);
  }
  return kb.finish();
}

// out[i] = f16(x[i] * 2 + 1) with x stored as f16.
inline kir::Kernel halfScale(int n = 300) {
  KernelBuilder kb("half_scale");
  int x = kb.addParam("x", DType::F16, n, false);
  int out = kb.addParam("out", DType::F16, n, true);
  auto v = kb.setOuter({n});
  ExprId y = kb.add(kb.mul(kb.load(x, v[0]), kb.constant(DType::F32, 2)), kb.constant(DType::F32, 1));
  kb.addStore(out, v[0], y, false);
  return kb.finish();
}

// Integer corner cases over pairs (a[i], b[i]) of i32: div, floordiv, rem, floormod, min, and a
// saturating f32 -> i32 cast of c[i]; u32 shifts of a by b.
inline kir::Kernel intSemantics(int n = 64) {
  KernelBuilder kb("int_semantics");
  int a = kb.addParam("a", DType::I32, n, false);
  int b = kb.addParam("b", DType::I32, n, false);
  int c = kb.addParam("c", DType::F32, n, false);
  int out[7];
  for (int i = 0; i < 7; ++i) out[i] = kb.addParam("o" + std::to_string(i), DType::I32, n, true);
  auto v = kb.setOuter({n});
  ExprId x = kb.load(a, v[0]), y = kb.load(b, v[0]);
  kb.addStore(out[0], v[0], kb.binary(ExprOp::Div, x, y), false);
  kb.addStore(out[1], v[0], kb.binary(ExprOp::FloorDiv, x, y), false);
  kb.addStore(out[2], v[0], kb.binary(ExprOp::Rem, x, y), false);
  kb.addStore(out[3], v[0], kb.binary(ExprOp::FloorMod, x, y), false);
  kb.addStore(out[4], v[0], kb.cast(DType::I32, kb.load(c, v[0])), false);
  ExprId ux = kb.cast(DType::U32, x), uy = kb.cast(DType::U32, y);
  kb.addStore(out[5], v[0], kb.binary(ExprOp::Shl, ux, uy), false);
  kb.addStore(out[6], v[0], kb.binary(ExprOp::Shr, ux, uy), false);
  return kb.finish();
}

// out[i, j] = a[i, j] + c[i]: the per-row value is invariant along the row (a broadcast splat in the
// vectorised kernel).
inline kir::Kernel rowBiasAdd(int rows, int cols) {
  KernelBuilder kb("row_bias_add");
  int a = kb.addParam("a", DType::F32, int64_t{rows} * cols, false);
  int c = kb.addParam("c", DType::F32, rows, false);
  int out = kb.addParam("out", DType::F32, int64_t{rows} * cols, true);
  auto v = kb.setOuter({rows, cols});
  ExprId flat = kb.add(kb.mul(v[0], kb.i64(cols)), v[1]);
  kb.addStore(out, flat, kb.add(kb.load(a, flat), kb.load(c, v[0])), false);
  return kb.finish();
}

// out[i, j] = a[i, j + shift] over a rows x cols outer domain, a having rows x (cols + shift)
// elements: unit-stride loads whose base is a multiple of 4 only when shift is.
inline kir::Kernel shiftedCopy(int rows, int cols, int shift) {
  KernelBuilder kb("shifted_copy");
  int a = kb.addParam("a", DType::F32, int64_t{rows} * (cols + shift), false);
  int out = kb.addParam("out", DType::F32, int64_t{rows} * cols, true);
  auto v = kb.setOuter({rows, cols});
  ExprId src = kb.add(kb.add(kb.mul(v[0], kb.i64(cols + shift)), v[1]), kb.i64(shift));
  kb.addStore(out, kb.add(kb.mul(v[0], kb.i64(cols)), v[1]), kb.load(a, src), false);
  return kb.finish();
}

// out[j, i] = a[i, j]: strided loads, never vectorised.
inline kir::Kernel transpose(int rows, int cols) {
  KernelBuilder kb("transpose");
  int a = kb.addParam("a", DType::F32, int64_t{rows} * cols, false);
  int out = kb.addParam("out", DType::F32, int64_t{rows} * cols, true);
  auto v = kb.setOuter({cols, rows});  // v[0] = j, v[1] = i
  kb.addStore(out, kb.add(kb.mul(v[0], kb.i64(rows)), v[1]), kb.load(a, kb.add(kb.mul(v[1], kb.i64(cols)), v[0])),
              false);
  return kb.finish();
}

// f16 out[i] = (x[i] > 0 ? x[i] : 0.1 * x[i]) and bool mask[i] = x[i] > 0 from f32 x: mixed element
// sizes (vector width 4 from the f32 load; 8-byte f16 and 4-byte bool vectors).
inline kir::Kernel leakyReluToHalf(int n) {
  KernelBuilder kb("leaky_relu_half");
  int x = kb.addParam("x", DType::F32, n, false);
  int out = kb.addParam("out", DType::F16, n, true);
  int mask = kb.addParam("mask", DType::Bool, n, true);
  auto v = kb.setOuter({n});
  ExprId xv = kb.load(x, v[0]);
  ExprId pos = kb.lt(kb.constant(DType::F32, 0), xv);
  kb.addStore(out, v[0], kb.select(pos, xv, kb.mul(xv, kb.constant(DType::F32, 0.1))), false);
  kb.addStore(mask, v[0], pos, false);
  return kb.finish();
}

// out[i] = a[i] * b[i] in dtype t over n points.
inline kir::Kernel mulOf(DType t, int n) {
  KernelBuilder kb(std::string("mul_") + std::string(dtypeName(t)));
  int a = kb.addParam("a", t, n, false);
  int b = kb.addParam("b", t, n, false);
  int out = kb.addParam("out", t, n, true);
  auto v = kb.setOuter({n});
  ExprId prod =
      t == DType::Bool ? kb.logicalAnd(kb.load(a, v[0]), kb.load(b, v[0])) : kb.mul(kb.load(a, v[0]), kb.load(b, v[0]));
  kb.addStore(out, v[0], prod, false);
  return kb.finish();
}

// Per row of x (rows x cols): max, min and sum (NaN-propagating max/min).
inline kir::Kernel rowMaxMinSum(int rows, int cols) {
  KernelBuilder kb("row_max_min_sum");
  int x = kb.addParam("x", DType::F32, int64_t{rows} * cols, false);
  int outs[3];
  for (int i = 0; i < 3; ++i) outs[i] = kb.addParam("o" + std::to_string(i), DType::F32, rows, true);
  auto v = kb.setOuter({rows});
  const ReduceOp ops[3] = {ReduceOp::Max, ReduceOp::Min, ReduceOp::Sum};
  for (int i = 0; i < 3; ++i) {
    auto r = kb.reductionVars({cols});
    ExprId body = kb.load(x, kb.add(kb.mul(v[0], kb.i64(cols)), r[0]));
    kb.addStore(outs[i], v[0], kb.reduce(ops[i], r, body), false);
  }
  return kb.finish();
}

inline std::vector<kir::Kernel> representativeKernels() {
  return {broadcastAdd(), rowSum(), softmaxRows(), argMaxMin(), halfScale(), intSemantics()};
}

inline kir::Kernel renamed(kir::Kernel k, const std::string& name) {
  k.name = name;
  return k;
}

// One or more kernels of each mapping and vector width (names say which).
inline std::vector<kir::Kernel> mappingKernels() {
  return {renamed(broadcastAdd(64, 256), "bcast_add_vec"),   renamed(rowBiasAdd(33, 64), "row_bias_vec"),
          renamed(shiftedCopy(16, 64, 1), "shifted1_vec"),   renamed(shiftedCopy(16, 64, 4), "shifted4_vec"),
          renamed(leakyReluToHalf(4096), "leaky_half_vec"),  renamed(halfScale(4096), "half_scale_vec"),
          renamed(mulOf(DType::F64, 4096), "mul_f64_vec"),   renamed(mulOf(DType::BF16, 4096), "mul_bf16_vec"),
          renamed(mulOf(DType::U8, 4096), "mul_u8_vec"),     renamed(mulOf(DType::Bool, 4096), "mul_bool_vec"),
          renamed(mulOf(DType::I64, 4096), "mul_i64_vec"),   renamed(rowSum(8, 8192), "row_sum_block"),
          renamed(softmaxRows(3, 5000), "softmax_block"),    renamed(argMaxMin(6, 5000), "argmax_block"),
          renamed(rowMaxMinSum(5, 6000), "row_stats_block"), renamed(rowSum(8192, 4), "row_sum_tiny"),
          renamed(argMaxMin(5000, 5), "argmax_tiny"),        renamed(softmaxRows(8192, 16), "softmax_tiny"),
          renamed(rowMaxMinSum(4096, 8), "row_stats_tiny")};
}

}  // namespace nnc::codegen::cuda::testing
