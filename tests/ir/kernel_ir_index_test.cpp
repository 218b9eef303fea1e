// Index simplification in the kernel builder: floor division and modulo by a constant fold away
// exactly when the loop variables' extents prove the remainder part in range, and re-flattening an
// unflattened index gives the flat index back. Each rewrite is checked both ways: the simplified form
// where it is valid, the division kept where a variable's range could cross the divisor; and the
// kernels built from them agree with a brute-force evaluation over every loop point.
#include <gtest/gtest.h>

#include "ir/tensor.h"
#include "kir/interpreter.h"
#include "kir/kernel_ir.h"

namespace nnc {
namespace {

using kir::ExprOp;

TEST(KernelIrIndex, DivModOfAnAffineIndexFoldWhenTheRangesProveIt) {
  kir::KernelBuilder kb("k");
  std::vector<kir::ExprId> v = kb.setOuter({4, 7, 9});             // v0 < 4, v1 < 7, v2 < 9
  const kir::ExprId flat = kb.add(kb.mul(v[1], kb.i64(9)), v[2]);  // v1 * 9 + v2 < 63
  EXPECT_EQ(kb.binary(ExprOp::FloorDiv, flat, kb.i64(9)), v[1]);
  EXPECT_EQ(kb.binary(ExprOp::FloorMod, flat, kb.i64(9)), v[2]);
  // A constant part splits too: (v1 * 9 + v2 + 18) / 9 = v1 + 2.
  const kir::ExprId shifted = kb.add(flat, kb.i64(18));
  EXPECT_EQ(kb.binary(ExprOp::FloorDiv, shifted, kb.i64(9)), kb.add(kb.i64(2), v[1]));
  // The whole value below the divisor: the quotient is 0.
  EXPECT_EQ(kb.binary(ExprOp::FloorDiv, v[2], kb.i64(9)), kb.i64(0));
}

TEST(KernelIrIndex, DivModStayWhenAVariableCanCrossTheDivisor) {
  kir::KernelBuilder kb("k");
  std::vector<kir::ExprId> v = kb.setOuter({4, 10});  // v1 < 10: v1 / 9 is not always 0
  const kir::ExprId flat = kb.add(kb.mul(v[0], kb.i64(9)), v[1]);
  EXPECT_EQ(kb.node(kb.binary(ExprOp::FloorDiv, flat, kb.i64(9))).op, ExprOp::FloorDiv);
  EXPECT_EQ(kb.node(kb.binary(ExprOp::FloorMod, flat, kb.i64(9))).op, ExprOp::FloorMod);
  // A negative part may leave [0, divisor): (v1 - 1) % 9 with v1 = 0 is 8, not v1 - 1.
  const kir::ExprId below = kb.sub(kb.mul(v[0], kb.i64(0)), kb.i64(1));
  EXPECT_EQ(kb.binary(ExprOp::FloorMod, kb.add(below, v[0]), kb.i64(9)) == kb.add(below, v[0]), false);
  // Truncating division is left alone (it differs from floor division on negative values).
  EXPECT_EQ(kb.node(kb.binary(ExprOp::Div, flat, kb.i64(9))).op, ExprOp::Div);
}

TEST(KernelIrIndex, SimplifiedKernelsComputeWhatTheFormulaSays) {
  // out[v0, v1, v2] = (flat / 35) * 1000 + ((flat % 35) / 5) * 10 + flat % 5 for flat the row-major
  // index: after simplification this is v0 * 1000 + v1 * 10 + v2, checked against that formula.
  kir::KernelBuilder kb("k");
  const int slot = kb.addParam("out", DType::I64, 3 * 7 * 5, /*isOutput=*/true);
  std::vector<kir::ExprId> v = kb.setOuter({3, 7, 5});
  const kir::ExprId flat = kb.flatIndex(v, Shape({3, 7, 5}));
  const std::vector<kir::ExprId> again = kb.unflatten(flat, Shape({3, 7, 5}));
  EXPECT_EQ(again, v) << "unflatten(flatIndex(v)) is v when the ranges prove it";
  EXPECT_EQ(kb.flatIndex(again, Shape({3, 7, 5})), flat);
  const kir::ExprId value = kb.add(kb.add(kb.mul(again[0], kb.i64(1000)), kb.mul(again[1], kb.i64(10))), again[2]);
  kb.addStore(slot, flat, value, /*perInner=*/false);
  kir::Kernel k = kb.finish();
  Tensor out(DType::I64, Shape({3 * 7 * 5}));
  ASSERT_TRUE(kir::interpret(k, {&out}).isOk());
  for (int64_t a = 0; a < 3; ++a)
    for (int64_t b = 0; b < 7; ++b)
      for (int64_t c = 0; c < 5; ++c) EXPECT_EQ(out.getInt((a * 7 + b) * 5 + c), a * 1000 + b * 10 + c);
}

}  // namespace
}  // namespace nnc
