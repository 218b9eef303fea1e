// KernelBuilder's folding of float operations with constant operands, and of flat reduction loops
// back into row-major indices.
#include <gtest/gtest.h>

#include "kir/affine.h"
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

// A global pool over N x C x 13 x 13: one loop of 169 points, read at unit stride (no div/mod left
// in the index); the loop vectorises along the row instead of across channels.
TEST(KernelBuilderFlatReduction, AdjacentDimsAreOneUnitStrideLoop) {
  kir::KernelBuilder kb("gap");
  const Shape x({2, 8, 13, 13});
  const int in = kb.addParam("x", DType::F32, x.numel(), false);
  const int out = kb.addParam("y", DType::F32, 16, true);
  std::vector<kir::ExprId> o = kb.setOuter({2, 8});
  std::vector<kir::ExprId> rv = kb.flatReductionVars({13, 13});
  ASSERT_EQ(rv.size(), 2u);
  const kir::ExprId index = kb.flatIndex(std::vector<kir::ExprId>{o[0], o[1], rv[0], rv[1]}, x);
  const kir::ExprId sum = kb.reduce(kir::ReduceOp::Sum, rv, kb.load(in, index));
  kb.addStore(out, kb.flatIndex(o, Shape({2, 8})), sum, false);
  const kir::Kernel k = kb.finish();
  ASSERT_EQ(k.reductions.size(), 1u);
  const kir::Loop& loop = k.reductions[0].loop;
  ASSERT_EQ(loop.extents, std::vector<int64_t>{169});
  std::optional<kir::AffineForm> form = kir::affineForm(k.exprs, index);
  ASSERT_TRUE(form.has_value());
  ASSERT_TRUE(form->overVars(k.exprs));
  EXPECT_EQ(form->coefficient(loop.vars[0]), 1);
  EXPECT_EQ(form->coefficient(o[1]), 169);
  EXPECT_EQ(form->coefficient(o[0]), 8 * 169);
  // The unflattened index still means (row, column): a value of other dims sees them separately.
  EXPECT_EQ(k.expr(rv[0]).op, ExprOp::FloorDiv);
  EXPECT_EQ(k.expr(rv[1]).op, ExprOp::FloorMod);
}

// Inside a larger index the run must be the same dims in the same order: transposed, or over other
// dims, it is not folded (each dim keeps its own stride).
TEST(KernelBuilderFlatReduction, OnlyTheSameRunOfDimsFolds) {
  kir::KernelBuilder kb("k");
  kb.setOuter({3});
  std::vector<kir::ExprId> rv = kb.flatReductionVars({4, 5});
  const kir::ExprId flat = kb.flatIndex(rv, Shape({4, 5}));
  const kir::ExprId transposed = kb.flatIndex(std::vector<kir::ExprId>{rv[1], rv[0]}, Shape({5, 4}));
  const kir::ExprId wider = kb.flatIndex(std::vector<kir::ExprId>{rv[0], rv[1]}, Shape({4, 6}));
  const kir::Kernel& k = kb.peek();
  EXPECT_EQ(k.expr(flat).op, ExprOp::Var);
  for (kir::ExprId e : {transposed, wider}) {
    std::optional<kir::AffineForm> form = kir::affineForm(k.exprs, e);
    ASSERT_TRUE(form.has_value());
    EXPECT_FALSE(form->overVars(k.exprs)) << "folded an index that is not the unflattened run";
  }
  // Closed by reduce() with the index it returned.
  kb.reduce(kir::ReduceOp::Sum, rv, kb.constant(DType::F32, 1.0));
  EXPECT_EQ(kb.peek().reductions.back().loop.extents, std::vector<int64_t>{20});
}

// The row counts a target emits microkernels for: whole tiles and each block's last tile.
TEST(TileRowCounts, WholeTilesAndTheLastTileOfEachBlockSize) {
  auto counts = [](int64_t rows, int64_t blockRows, int64_t mr) {
    std::vector<int64_t> out;
    const std::vector<bool> used = kir::tileRowCounts(rows, blockRows, mr);
    EXPECT_EQ(used.size(), static_cast<size_t>(mr) + 1);
    for (size_t n = 0; n < used.size(); ++n)
      if (used[n]) out.push_back(static_cast<int64_t>(n));
    return out;
  };
  EXPECT_EQ(counts(50, 56, 14), (std::vector<int64_t>{8, 14}));       // 3 whole tiles and 8 rows, one block
  EXPECT_EQ(counts(56, 56, 14), (std::vector<int64_t>{14}));          // whole tiles only
  EXPECT_EQ(counts(5, 14, 14), (std::vector<int64_t>{5}));            // fewer rows than a tile
  EXPECT_EQ(counts(100, 30, 14), (std::vector<int64_t>{2, 10, 14}));  // blocks of 30 = 14 + 14 + 2; last 10
  EXPECT_EQ(counts(90, 30, 14), (std::vector<int64_t>{2, 14}));       // the last block as the others
  EXPECT_EQ(counts(0, 14, 14), (std::vector<int64_t>{}));
}

}  // namespace
}  // namespace nnc
