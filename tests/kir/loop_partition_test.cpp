// Loop partitioning (kir/loop_partition.h) and the affine forms it rests on (kir/affine.h). The
// facts of every piece are checked against a brute-force evaluation of the tests at every loop point
// of the piece (every value of the reduction variables too), on hand-written border tests and on
// random affine ones; tests the partition cannot bound (an outer variable) must not be folded.
#include "kir/loop_partition.h"

#include <gtest/gtest.h>

#include <optional>
#include <random>
#include <unordered_map>

#include "kir/affine.h"
#include "kir/kernel_ir.h"

namespace nnc {
namespace {

using kir::ExprId;
using kir::ExprOp;

// i64/bool value of `e` with the loop variables bound in `vars` (the oracle).
int64_t evaluate(const kir::Kernel& k, ExprId e, const std::unordered_map<ExprId, int64_t>& vars) {
  const kir::ExprNode& n = k.expr(e);
  auto a = [&] { return evaluate(k, n.a, vars); };
  auto b = [&] { return evaluate(k, n.b, vars); };
  switch (n.op) {
    case ExprOp::Const: return n.ival;
    case ExprOp::Var: return vars.at(e);
    case ExprOp::Add: return a() + b();
    case ExprOp::Sub: return a() - b();
    case ExprOp::Mul: return a() * b();
    case ExprOp::Min: return std::min(a(), b());
    case ExprOp::Max: return std::max(a(), b());
    case ExprOp::Lt: return a() < b();
    case ExprOp::Le: return a() <= b();
    case ExprOp::Gt: return a() > b();
    case ExprOp::Ge: return a() >= b();
    case ExprOp::And: return a() && b();
    default: ADD_FAILURE() << "unexpected op " << kir::exprOpName(n.op); return 0;
  }
}

// Every fact of every piece holds at every point of the piece, for every reduction var value, and
// the pieces tile [0, extent) in order.
void expectFactsHold(const kir::Kernel& k, const std::vector<kir::LoopPiece>& pieces) {
  const ExprId j = k.outer.vars.back();
  int64_t next = 0;
  for (const kir::LoopPiece& piece : pieces) {
    EXPECT_EQ(piece.begin, next);
    EXPECT_LT(piece.begin, piece.end);
    next = piece.end;
    for (int64_t x = piece.begin; x < piece.end; ++x) {
      const kir::Loop& red = k.reductions.empty() ? kir::Loop{} : k.reductions[0].loop;
      const int64_t points = red.size();
      for (int64_t r = 0; r < points; ++r) {
        std::unordered_map<ExprId, int64_t> vars = {{j, x}};
        int64_t rest = r;
        for (size_t d = red.vars.size(); d-- > 0;) {
          vars[red.vars[d]] = rest % red.extents[d];
          rest /= red.extents[d];
        }
        for (size_t d = 0; d + 1 < k.outer.vars.size(); ++d) vars[k.outer.vars[d]] = 0;
        for (const auto& [e, holds] : piece.facts) {
          const kir::ExprNode& n = k.expr(e);
          if (n.op == ExprOp::Min || n.op == ExprOp::Max) {
            EXPECT_EQ(evaluate(k, e, vars), evaluate(k, holds ? n.a : n.b, vars)) << "e" << e << " at " << x;
          } else {
            EXPECT_EQ(evaluate(k, e, vars) != 0, holds) << "e" << e << " at " << x;
          }
        }
      }
    }
  }
  EXPECT_EQ(next, k.outer.extents.back());
}

TEST(LoopPartition, PadRowSplitsIntoBorderInteriorBorder) {
  kir::KernelBuilder kb("pad");
  const int in = kb.addParam("in", DType::F32, 36, false);
  const int out = kb.addParam("out", DType::F32, 4 * 40, true);
  std::vector<ExprId> v = kb.setOuter({4, 40});
  const ExprId x = kb.sub(v[1], kb.i64(2));  // out[w] = in[w - 2] for 2 <= w < 38, else 0
  const ExprId inside = kb.logicalAnd(kb.le(kb.i64(0), x), kb.lt(x, kb.i64(36)));
  const ExprId value = kb.select(inside, kb.load(in, kb.clamp(x, 0, 35)), kb.constant(DType::F32, 0));
  kb.addStore(out, kb.add(kb.mul(v[0], kb.i64(40)), v[1]), value, false);
  const kir::Kernel k = kb.finish();
  const std::vector<kir::LoopPiece> pieces = kir::partitionInnermostLoop(k);
  ASSERT_EQ(pieces.size(), 3u);
  EXPECT_EQ(pieces[1].begin, 2);
  EXPECT_EQ(pieces[1].end, 38);
  // In the interior every border test is true and every clamp passes its value through.
  for (const auto& [e, holds] : pieces[1].facts) EXPECT_TRUE(holds) << "e" << e;
  EXPECT_GE(pieces[1].facts.size(), 4u);  // two comparisons, min and max
  expectFactsHold(k, pieces);
}

TEST(LoopPartition, WindowTapsBoundTheInteriorForEveryReductionValue) {
  kir::KernelBuilder kb("window");
  const int in = kb.addParam("in", DType::F32, 40, false);
  const int out = kb.addParam("out", DType::F32, 40, true);
  std::vector<ExprId> v = kb.setOuter({1, 40});
  std::vector<ExprId> kw = kb.reductionVars({3});
  const ExprId x = kb.add(kb.sub(v[1], kb.i64(1)), kw[0]);  // w - 1 + kw, a 3-tap window padded by 1
  const ExprId inside = kb.logicalAnd(kb.le(kb.i64(0), x), kb.lt(x, kb.i64(40)));
  const ExprId tap = kb.select(inside, kb.load(in, kb.clamp(x, 0, 39)), kb.constant(DType::F32, 0));
  const ExprId sum = kb.reduce(kir::ReduceOp::Sum, kw, tap);
  kb.addStore(out, v[1], sum, false);
  const kir::Kernel k = kb.finish();
  const std::vector<kir::LoopPiece> pieces = kir::partitionInnermostLoop(k);
  ASSERT_EQ(pieces.size(), 3u);
  EXPECT_EQ(pieces[1].begin, 1);  // w - 1 + 0 >= 0
  EXPECT_EQ(pieces[1].end, 39);   // w - 1 + 2 < 40
  expectFactsHold(k, pieces);
}

TEST(LoopPartition, RandomAffineTestsHoldWhereFolded) {
  std::mt19937 rng(3);
  std::uniform_int_distribution<int64_t> coef(-2, 2), offset(-40, 40), extent(1, 5);
  int folded = 0;
  for (int trial = 0; trial < 200; ++trial) {
    kir::KernelBuilder kb("random");
    const int out = kb.addParam("out", DType::I64, 60, true);
    std::vector<ExprId> v = kb.setOuter({60});
    std::vector<ExprId> r = kb.reductionVars({extent(rng), extent(rng)});
    ExprId acc = kb.i64(0);
    for (int t = 0; t < 3; ++t) {
      int64_t cj = 0;
      while (cj == 0) cj = coef(rng);
      ExprId lhs = kb.add(kb.mul(v[0], kb.i64(cj)), kb.i64(offset(rng)));
      lhs = kb.add(lhs, kb.mul(r[0], kb.i64(coef(rng))));
      lhs = kb.add(lhs, kb.mul(r[1], kb.i64(coef(rng))));
      const ExprId rhs = kb.i64(offset(rng));
      const ExprOp ops[] = {ExprOp::Lt, ExprOp::Le, ExprOp::Gt, ExprOp::Ge, ExprOp::Min, ExprOp::Max};
      const ExprOp op = ops[trial % 6];
      const ExprId test = kb.binary(op, lhs, rhs);
      acc = kb.add(acc, kb.dtypeOf(test) == DType::Bool ? kb.cast(DType::I64, test) : test);
    }
    kb.addStore(out, v[0], kb.reduce(kir::ReduceOp::Sum, r, acc), false);
    const kir::Kernel k = kb.finish();
    const std::vector<kir::LoopPiece> pieces = kir::partitionInnermostLoop(k, 64);
    if (!pieces.empty()) expectFactsHold(k, pieces);
    folded += !pieces.empty();
  }
  EXPECT_GT(folded, 50);  // many random tests cross the loop with a long piece somewhere
}

TEST(LoopPartition, RowsTooShortToVectoriseAreNotSplit) {
  kir::KernelBuilder kb("short");
  const int in = kb.addParam("in", DType::F32, 3, false);
  const int out = kb.addParam("out", DType::F32, 7, true);
  std::vector<ExprId> v = kb.setOuter({7});
  const ExprId x = kb.sub(v[0], kb.i64(2));  // a 3-point interior: no piece of 4 (the narrowest vector)
  const ExprId inside = kb.logicalAnd(kb.le(kb.i64(0), x), kb.lt(x, kb.i64(3)));
  kb.addStore(out, v[0], kb.select(inside, kb.load(in, kb.clamp(x, 0, 2)), kb.constant(DType::F32, 0)), false);
  EXPECT_TRUE(kir::partitionInnermostLoop(kb.finish()).empty());
}

TEST(LoopPartition, ATestOfAnotherOuterVariableIsNotFolded) {
  kir::KernelBuilder kb("outer");
  const int out = kb.addParam("out", DType::F32, 4 * 10, true);
  std::vector<ExprId> v = kb.setOuter({4, 10});
  const ExprId test = kb.lt(kb.add(v[0], v[1]), kb.i64(7));  // depends on the row: not a fixed point
  kb.addStore(out, kb.add(kb.mul(v[0], kb.i64(10)), v[1]),
              kb.select(test, kb.constant(DType::F32, 1), kb.constant(DType::F32, 0)), false);
  EXPECT_TRUE(kir::partitionInnermostLoop(kb.finish()).empty());
}

// An NHWC 3x3 window padded by 1 on [H, W, C]: the border tests depend on h and w (the row), not on
// the channel (the innermost variable). Every fact holds at every (h, w) inside the box and every
// tap, and each box edge is exact: one step outside it, some fact fails for some tap.
TEST(RowInterior, DepthwiseWindowFactsHoldInTheBoxAndTheBoxIsExact) {
  const int64_t H = 7, W = 9, C = 16;
  kir::KernelBuilder kb("dw");
  const int in = kb.addParam("in", DType::F32, H * W * C, false);
  const int out = kb.addParam("out", DType::F32, H * W * C, true);
  std::vector<ExprId> v = kb.setOuter({H, W, C});
  std::vector<ExprId> r = kb.reductionVars({3, 3});
  const ExprId y = kb.add(kb.sub(v[0], kb.i64(1)), r[0]), x = kb.add(kb.sub(v[1], kb.i64(1)), r[1]);
  const ExprId inside = kb.logicalAnd(kb.logicalAnd(kb.le(kb.i64(0), y), kb.lt(y, kb.i64(H))),
                                      kb.logicalAnd(kb.le(kb.i64(0), x), kb.lt(x, kb.i64(W))));
  const ExprId at =
      kb.add(kb.mul(kb.add(kb.mul(kb.clamp(y, 0, H - 1), kb.i64(W)), kb.clamp(x, 0, W - 1)), kb.i64(C)), v[2]);
  const ExprId tap = kb.select(inside, kb.load(in, at), kb.constant(DType::F32, 0));
  kb.addStore(out, kb.add(kb.mul(kb.add(kb.mul(v[0], kb.i64(W)), v[1]), kb.i64(C)), v[2]),
              kb.reduce(kir::ReduceOp::Sum, r, tap), false);
  const kir::Kernel k = kb.finish();
  const std::optional<kir::RowInterior> interior = kir::rowInterior(k);
  ASSERT_TRUE(interior.has_value());
  ASSERT_EQ(interior->ranges.size(), 2u);
  EXPECT_EQ(interior->ranges[0].dim, 0u);
  EXPECT_EQ(interior->ranges[0].begin, 1);
  EXPECT_EQ(interior->ranges[0].end, H - 1);
  EXPECT_EQ(interior->ranges[1].dim, 1u);
  EXPECT_EQ(interior->ranges[1].begin, 1);
  EXPECT_EQ(interior->ranges[1].end, W - 1);
  EXPECT_GE(interior->facts.size(), 8u);  // four comparisons, two clamps of two each
  // Whether every fact holds at row (h, w) for every tap.
  auto allHold = [&](int64_t h, int64_t w) {
    for (int64_t ky = 0; ky < 3; ++ky)
      for (int64_t kx = 0; kx < 3; ++kx) {
        const std::unordered_map<ExprId, int64_t> vars = {{v[0], h}, {v[1], w}, {v[2], 0}, {r[0], ky}, {r[1], kx}};
        for (const auto& [e, holds] : interior->facts) {
          const kir::ExprNode& n = k.expr(e);
          const bool ok = (n.op == ExprOp::Min || n.op == ExprOp::Max)
                              ? evaluate(k, e, vars) == evaluate(k, holds ? n.a : n.b, vars)
                              : (evaluate(k, e, vars) != 0) == holds;
          if (!ok) return false;
        }
      }
    return true;
  };
  for (int64_t h = 1; h < H - 1; ++h)
    for (int64_t w = 1; w < W - 1; ++w) EXPECT_TRUE(allHold(h, w)) << h << "," << w;
  EXPECT_FALSE(allHold(0, W / 2));
  EXPECT_FALSE(allHold(H - 1, W / 2));
  EXPECT_FALSE(allHold(H / 2, 0));
  EXPECT_FALSE(allHold(H / 2, W - 1));
}

// Tests that hold everywhere need no box (every row takes the folded version); a box under half of
// the rows is not worth a second copy of the row; a test of the innermost variable is not a row fact.
TEST(RowInterior, NoBoxWhenEveryRowIsInteriorAndNoneWhenFewAre) {
  auto kernel = [](int64_t lowest, int64_t highest) {
    kir::KernelBuilder kb("rows");
    const int out = kb.addParam("out", DType::F32, 10 * 8, true);
    std::vector<ExprId> v = kb.setOuter({10, 8});
    const ExprId rows = kb.logicalAnd(kb.le(kb.i64(lowest), v[0]), kb.le(v[0], kb.i64(highest)));
    const ExprId inner = kb.lt(v[1], kb.i64(4));  // the innermost variable's: not a row fact
    kb.addStore(out, kb.add(kb.mul(v[0], kb.i64(8)), v[1]),
                kb.select(kb.logicalAnd(rows, inner), kb.constant(DType::F32, 1), kb.constant(DType::F32, 0)), false);
    return kb.finish();
  };
  std::optional<kir::RowInterior> all = kir::rowInterior(kernel(0, 9));
  ASSERT_TRUE(all.has_value());
  EXPECT_TRUE(all->ranges.empty());
  EXPECT_EQ(all->facts.size(), 2u);
  std::optional<kir::RowInterior> most = kir::rowInterior(kernel(3, 20));
  ASSERT_TRUE(most.has_value());
  ASSERT_EQ(most->ranges.size(), 1u);
  EXPECT_EQ(most->ranges[0].begin, 3);
  EXPECT_EQ(most->ranges[0].end, 10);
  EXPECT_FALSE(kir::rowInterior(kernel(3, 5)).has_value()) << "3 rows of 10 interior";
}

TEST(AffineForm, CollectsTermsSubstitutesAndRejectsOverflow) {
  kir::KernelBuilder kb("affine");
  kb.addParam("out", DType::F32, 1, true);
  std::vector<ExprId> v = kb.setOuter({5, 7});
  const ExprId e = kb.sub(kb.mul(kb.add(v[0], kb.i64(3)), kb.i64(4)), v[1]);  // 4 v0 + 12 - v1
  const kir::Kernel k = kb.peek();
  std::optional<kir::AffineForm> f = kir::affineForm(k.exprs, e);
  ASSERT_TRUE(f.has_value());
  EXPECT_EQ(f->constant, 12);
  EXPECT_EQ(f->coefficient(v[0]), 4);
  EXPECT_EQ(f->coefficient(v[1]), -1);
  EXPECT_TRUE(f->overVars(k.exprs));
  // min(v1, 6) is a term of its own; substituted by v1 it folds into the sum.
  const ExprId clamped = kb.add(kb.min(v[1], kb.i64(6)), v[1]);
  const kir::Kernel k2 = kb.peek();
  EXPECT_FALSE(kir::affineForm(k2.exprs, clamped)->overVars(k2.exprs));
  const std::map<ExprId, ExprId> substitute = {{k2.expr(clamped).a, v[1]}};
  EXPECT_EQ(kir::affineForm(k2.exprs, clamped, &substitute)->coefficient(v[1]), 2);
  const ExprId huge = kb.mul(kb.mul(v[0], kb.i64(int64_t{1} << 40)), kb.i64(int64_t{1} << 40));
  EXPECT_FALSE(kir::affineForm(kb.peek().exprs, huge).has_value());
}

}  // namespace
}  // namespace nnc
