// Index simplification in the kernel builder: floor division and modulo by a constant fold away
// exactly when the loop variables' extents prove the remainder part in range, and re-flattening an
// unflattened index gives the flat index back. Each rewrite is checked both ways: the simplified form
// where it is valid, the division kept where a variable's range could cross the divisor; and the
// kernels built from them agree with a brute-force evaluation over every loop point.
#include <gtest/gtest.h>

#include "kir/affine.h"
#include "kir/interpreter.h"
#include "kir/kernel_ir.h"
#include "nnc/tensor.h"

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
  // The exact multiple splits off; the division stays on the part that can cross:
  // (9 v0 + v1) / 9 = v0 + v1 / 9 and (9 v0 + v1) % 9 = v1 % 9.
  const kir::ExprId v1Div = kb.binary(ExprOp::FloorDiv, v[1], kb.i64(9));
  EXPECT_EQ(kb.node(v1Div).op, ExprOp::FloorDiv);
  EXPECT_EQ(kb.binary(ExprOp::FloorDiv, flat, kb.i64(9)), kb.add(v[0], v1Div));
  const kir::ExprId v1Mod = kb.binary(ExprOp::FloorMod, v[1], kb.i64(9));
  EXPECT_EQ(kb.node(v1Mod).op, ExprOp::FloorMod);
  EXPECT_EQ(kb.binary(ExprOp::FloorMod, flat, kb.i64(9)), v1Mod);
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

namespace nnc {
namespace {

int64_t floorDivRef(int64_t a, int64_t b) { return a / b - ((a % b != 0) && ((a < 0) != (b < 0))); }

// Splitting an exact multiple off a div/mod ((d q + r) / d = q + r / d) holds for every value, also
// where the rest crosses the divisor or is negative: brute force over the loop domain.
TEST(KernelIrIndex, PartialDivModSplitsAreExactForEveryValue) {
  const int64_t d = 6;
  kir::KernelBuilder kb("k");
  const int divSlot = kb.addParam("div", DType::I64, 5 * 13, true);
  const int modSlot = kb.addParam("mod", DType::I64, 5 * 13, true);
  std::vector<kir::ExprId> v = kb.setOuter({5, 13});  // v1 < 13 crosses 6 twice
  // 12 v0 + 2 v1 - 7 (-7 has a multiple -12 and a rest 5), 18 v0 + v1 (the multiple part only v0).
  const kir::ExprId e = kb.add(kb.add(kb.mul(v[0], kb.i64(12)), kb.mul(v[1], kb.i64(2))), kb.i64(-7));
  const kir::ExprId f = kb.add(kb.mul(v[0], kb.i64(18)), v[1]);
  const kir::ExprId flat = kb.add(kb.mul(v[0], kb.i64(13)), v[1]);
  kb.addStore(
      divSlot, flat,
      kb.add(kb.mul(kb.binary(ExprOp::FloorDiv, e, kb.i64(d)), kb.i64(100)), kb.binary(ExprOp::FloorDiv, f, kb.i64(d))),
      false);
  kb.addStore(
      modSlot, flat,
      kb.add(kb.mul(kb.binary(ExprOp::FloorMod, e, kb.i64(d)), kb.i64(100)), kb.binary(ExprOp::FloorMod, f, kb.i64(d))),
      false);
  kir::Kernel k = kb.finish();
  Tensor div(DType::I64, Shape({5 * 13})), mod(DType::I64, Shape({5 * 13}));
  ASSERT_TRUE(kir::interpret(k, {&div, &mod}).isOk());
  for (int64_t a = 0; a < 5; ++a)
    for (int64_t b = 0; b < 13; ++b) {
      const int64_t x = 12 * a + 2 * b - 7, y = 18 * a + b;
      EXPECT_EQ(div.getInt(a * 13 + b), floorDivRef(x, d) * 100 + floorDivRef(y, d)) << a << "," << b;
      EXPECT_EQ(mod.getInt(a * 13 + b), (x - floorDivRef(x, d) * d) * 100 + (y - floorDivRef(y, d) * d))
          << a << "," << b;
    }
}

}  // namespace
}  // namespace nnc

namespace nnc {
namespace {

// A transpose read through a reshape: the pixel-major flat index (pixel * 32 + channel) split by
// [112, 112, 32] again. The common factor 32 of the divisor 3584 and pixel's coefficient, with
// channel < 32, folds (pixel * 32 + channel) / 3584 to pixel / 112; the range of that quotient
// (< 112 for pixel < 12544) folds its % 112 away; and 112 * (pixel / 112) + pixel % 112 is affine
// in pixel again — so the operand reads as a strided view.
TEST(KernelIrIndex, ACommonFactorAndQuotientRangesFoldASplitFlatIndex) {
  kir::KernelBuilder kb("k");
  std::vector<kir::ExprId> v = kb.setOuter({12544, 32});  // pixel, channel
  const kir::ExprId flat = kb.add(kb.mul(v[0], kb.i64(32)), v[1]);
  const kir::ExprId rowDiv = kb.binary(ExprOp::FloorDiv, v[0], kb.i64(112));
  EXPECT_EQ(kb.binary(ExprOp::FloorDiv, flat, kb.i64(3584)), rowDiv);
  EXPECT_EQ(kb.binary(ExprOp::FloorMod, rowDiv, kb.i64(112)), rowDiv) << "pixel / 112 < 112";
  // % (32 * 112) keeps the channel: (pixel % 112) * 32 + channel.
  EXPECT_EQ(kb.binary(ExprOp::FloorMod, flat, kb.i64(3584)),
            kb.add(kb.mul(kb.binary(ExprOp::FloorMod, v[0], kb.i64(112)), kb.i64(32)), v[1]));
  const kir::ExprId rejoined = kb.add(kb.mul(rowDiv, kb.i64(112)), kb.binary(ExprOp::FloorMod, v[0], kb.i64(112)));
  kb.addParam("out", DType::F32, 1, true);
  std::optional<kir::AffineForm> form = kir::affineForm(kb.peek().exprs, rejoined);
  ASSERT_TRUE(form.has_value());
  EXPECT_EQ(form->terms.size(), 1u);
  EXPECT_EQ(form->coefficient(v[0]), 1) << "112 * (pixel / 112) + pixel % 112 is pixel";
  // Not when the small part can reach the factor: channel < 33 may carry into the next pixel.
  kir::KernelBuilder kb2("k2");
  std::vector<kir::ExprId> w = kb2.setOuter({12544, 33});
  const kir::ExprId crossing = kb2.binary(ExprOp::FloorDiv, kb2.add(kb2.mul(w[0], kb2.i64(32)), w[1]), kb2.i64(3584));
  EXPECT_EQ(kb2.node(crossing).op, ExprOp::FloorDiv);
  EXPECT_NE(kb2.node(crossing).a, w[0]);
}

// The same rules, brute force: every (a, b) of the domain against floor division done here.
TEST(KernelIrIndex, CommonFactorFoldsAreExactForEveryValue) {
  kir::KernelBuilder kb("k");
  const int divSlot = kb.addParam("div", DType::I64, 40 * 6, true);
  const int modSlot = kb.addParam("mod", DType::I64, 40 * 6, true);
  std::vector<kir::ExprId> v = kb.setOuter({40, 6});
  // 6 a + b + 7 over 12 (g = 6: b + 1 < 6 after moving 6 of the 7 into the multiple), and
  // (a / 5) % 8 with a / 5 < 8.
  const kir::ExprId e = kb.add(kb.add(kb.mul(v[0], kb.i64(6)), v[1]), kb.i64(7));
  const kir::ExprId q = kb.binary(ExprOp::FloorDiv, v[0], kb.i64(5));
  const kir::ExprId flat = kb.add(kb.mul(v[0], kb.i64(6)), v[1]);
  kb.addStore(divSlot, flat,
              kb.add(kb.mul(kb.binary(ExprOp::FloorDiv, e, kb.i64(12)), kb.i64(100)),
                     kb.binary(ExprOp::FloorMod, q, kb.i64(8))),
              false);
  kb.addStore(modSlot, flat, kb.binary(ExprOp::FloorMod, e, kb.i64(12)), false);
  kir::Kernel k = kb.finish();
  Tensor div(DType::I64, Shape({40 * 6})), mod(DType::I64, Shape({40 * 6}));
  ASSERT_TRUE(kir::interpret(k, {&div, &mod}).isOk());
  for (int64_t a = 0; a < 40; ++a)
    for (int64_t b = 0; b < 6; ++b) {
      const int64_t x = 6 * a + b + 7;
      EXPECT_EQ(div.getInt(a * 6 + b), floorDivRef(x, 12) * 100 + (a / 5) % 8) << a << "," << b;
      EXPECT_EQ(mod.getInt(a * 6 + b), x - floorDivRef(x, 12) * 12) << a << "," << b;
    }
}

}  // namespace
}  // namespace nnc
