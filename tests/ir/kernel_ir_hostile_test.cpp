// Kernel IR arithmetic on hostile values (fuzz_shape_inference findings): kir::Loop sizes of empty
// tensors whose other dims are huge (the product overflowed int64 before reaching the zero), also
// through the reference evaluator; integer constants made from NaN or out-of-range doubles.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>

#include "ir/builder.h"
#include "ir/reference.h"
#include "kir/kernel_ir.h"

namespace nnc {
namespace {

constexpr int64_t kHuge = int64_t(1) << 40;  // the largest dim a Shape accepts

TEST(KernelIrLoop, ZeroExtentMakesAnEmptyLoopWhateverTheOthers) {
  EXPECT_EQ((kir::Loop{{kHuge, kHuge, 0}, {}}).size(), 0);
  EXPECT_EQ((kir::Loop{{0, kHuge, kHuge}, {}}).size(), 0);
  EXPECT_EQ((kir::Loop{{}, {}}).size(), 1);
  EXPECT_EQ((kir::Loop{{3, 5}, {}}).size(), 15);
  EXPECT_EQ((kir::Loop{{kHuge, kHuge}, {}}).size(), INT64_MAX) << "saturates rather than overflowing";
}

// Integer constants from doubles follow the one float-to-integer rule: truncate, saturate, NaN -> 0.
TEST(KernelIrConstant, IntegerConstantsFromDoublesSaturate) {
  kir::KernelBuilder kb("k");
  const kir::ExprId nan = kb.constant(DType::I32, NAN), big = kb.constant(DType::U8, 300.0),
                    neg = kb.constant(DType::I64, -1e300), cut = kb.constant(DType::I16, -7.9);
  const kir::Kernel k = kb.finish();
  EXPECT_EQ(k.exprs[static_cast<size_t>(nan)].ival, 0);
  EXPECT_EQ(k.exprs[static_cast<size_t>(big)].ival, 255);
  EXPECT_EQ(k.exprs[static_cast<size_t>(neg)].ival, INT64_MIN);
  EXPECT_EQ(k.exprs[static_cast<size_t>(cut)].ival, -7);
}

TEST(KernelIrLoop, ReducingAnEmptyTensorWithHugeDimsIsEmpty) {
  Graph g;
  GraphBuilder b(g);
  Value* x = b.input("x", DType::F32, Shape{0, kHuge, kHuge});
  Attributes axes;
  axes.set("axes", std::vector<int64_t>{1, 2});
  b.output(b.op(OpKind::ReduceSum, {x}, axes, "sum"));
  ASSERT_TRUE(b.status().isOk()) << b.status().message();
  // No output point, so the 2^80-element reduction loop never runs (and its size never overflows).
  auto out = evaluateGraph(g, {Tensor(DType::F32, Shape{0, kHuge, kHuge})});
  ASSERT_TRUE(out.isOk()) << out.status().message();
  EXPECT_EQ((*out)[0].shape(), Shape({0, 1, 1}));
}

// Softmax of f32[2^40 x 2^40 x 0]: the rows loop has 2^80 points but every store lands in the
// empty output, so the kernel does nothing and must not loop (it hung the fuzzer for 30 s+).
TEST(KernelIrEmpty, KernelsThatWriteOnlyEmptyTensorsAreSkipped) {
  Graph g;
  GraphBuilder b(g);
  Value* x = b.input("x", DType::F32, Shape{kHuge, kHuge, 0});
  b.output(b.op(OpKind::Softmax, {x}, {}, "softmax"));
  ASSERT_TRUE(b.status().isOk()) << b.status().message();
  auto out = evaluateGraph(g, {Tensor(DType::F32, Shape{kHuge, kHuge, 0})});
  ASSERT_TRUE(out.isOk()) << out.status().message();
  EXPECT_EQ((*out)[0].shape(), Shape({kHuge, kHuge, 0}));

  for (bool alsoFull : {false, true}) {
    kir::KernelBuilder kb("k");
    const int empty = kb.addParam("y", DType::F32, 0, true), full = kb.addParam("z", DType::F32, 1, true);
    kb.addStore(empty, kb.i64(0), kb.constant(DType::F32, 1), false);
    if (alsoFull) kb.addStore(full, kb.i64(0), kb.constant(DType::F32, 1), false);
    const kir::Kernel k = kb.finish();
    EXPECT_EQ(k.writesNothing(), !alsoFull);
    EXPECT_EQ(k.work(), alsoFull ? 1 : 0);
  }
}

TEST(KernelIrWork, OuterPointsTimesInnerAndReductionPoints) {
  // out[i, j] = sum over r < 7 of 1: 15 points of 1 + 7 each.
  kir::KernelBuilder kb("k");
  const int out = kb.addParam("y", DType::F32, 15, true);
  std::vector<kir::ExprId> ij = kb.setOuter({3, 5});
  std::vector<kir::ExprId> r = kb.reductionVars({7});
  kir::ExprId sum = kb.reduce(kir::ReduceOp::Sum, r, kb.constant(DType::F32, 1));
  kb.addStore(out, kb.flatIndex(ij, Shape{3, 5}), sum, false);
  EXPECT_EQ(kb.finish().work(), 15 * 8);

  // A reduction of 2^40 x 2^40 points per output saturates.
  kir::KernelBuilder huge("h");
  const int one = huge.addParam("y", DType::F32, 1, true);
  huge.setOuter({1});
  std::vector<kir::ExprId> rr = huge.reductionVars({kHuge, kHuge});
  huge.addStore(one, huge.i64(0), huge.reduce(kir::ReduceOp::Sum, rr, huge.constant(DType::F32, 1)), false);
  EXPECT_EQ(huge.finish().work(), INT64_MAX);
}

}  // namespace
}  // namespace nnc
