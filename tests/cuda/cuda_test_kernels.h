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

inline std::vector<kir::Kernel> representativeKernels() {
  return {broadcastAdd(), rowSum(), softmaxRows(), argMaxMin(), halfScale(), intSemantics()};
}

}  // namespace nnc::codegen::cuda::testing
