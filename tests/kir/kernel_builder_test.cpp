// KernelBuilder's folding of float operations with constant operands.
#include <gtest/gtest.h>

#include "kir/kernel_ir.h"

namespace nnc {
namespace {

using kir::ExprOp;

TEST(KernelBuilderFolding, PowByTwoIsASquareAndByOneTheBase) {
  kir::KernelBuilder kb("k");
  const int in = kb.addParam("in", DType::F32, 4, false);
  std::vector<kir::ExprId> v = kb.setOuter({4});
  const kir::ExprId x = kb.load(in, v[0]);
  EXPECT_EQ(kb.binary(ExprOp::Pow, x, kb.constant(DType::F32, 2.0)), kb.mul(x, x));
  EXPECT_EQ(kb.binary(ExprOp::Pow, x, kb.constant(DType::F32, 1.0)), x);
  // Other exponents keep pow (x * x * x rounds twice).
  EXPECT_EQ(kb.node(kb.binary(ExprOp::Pow, x, kb.constant(DType::F32, 3.0))).op, ExprOp::Pow);
  EXPECT_EQ(kb.node(kb.binary(ExprOp::Pow, x, kb.constant(DType::F32, 0.5))).op, ExprOp::Pow);
  // A run-time exponent too.
  EXPECT_EQ(kb.node(kb.binary(ExprOp::Pow, x, x)).op, ExprOp::Pow);
}

}  // namespace
}  // namespace nnc
