// targets/cpu/stash.h on the cpu: a softmax-like row kernel computes exp once (the reduction stores it into
// the output, the inner loop reads it back); the interpreter runs the stashed kernel too. Results are
// compared with the unstashed kernel in the interpreter and with a float64 softmax; kernels where
// the rewrite is unsafe or pointless keep their form.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "cpu_test_util.h"
#include "kir/interpreter.h"
#include "targets/cpu/stash.h"

namespace nnc::codegen {
namespace {

using kir::ExprId;
using kir::ExprOp;
using kir::KernelBuilder;
using kir::ReduceOp;

// out[r, j] = exp(x[r, j] - max_j x[r, j]) / sum_j exp(x[r, j] - max) (+ `epilogue` applied on top).
kir::Kernel softmaxKernel(int64_t rows, int64_t cols, DType outType = DType::F32, bool cheapBody = false) {
  KernelBuilder kb("softmax_like");
  const int x = kb.addParam("x", DType::F32, rows * cols, false);
  const int out = kb.addParam("out", outType, rows * cols, true);
  const std::vector<ExprId> o = kb.setOuter({rows});
  const ExprId base = kb.mul(o[0], kb.i64(cols));
  auto body = [&](ExprId j, ExprId max) {
    const ExprId d = kb.sub(kb.load(x, kb.add(j, base)), max);
    return cheapBody ? kb.mul(d, d) : kb.unary(ExprOp::Exp, d);
  };
  const std::vector<ExprId> rm = kb.reductionVars({cols});
  const ExprId max = kb.reduce(ReduceOp::Max, rm, kb.load(x, kb.add(rm[0], base)));
  const std::vector<ExprId> rs = kb.reductionVars({cols});
  const ExprId sum = kb.reduce(ReduceOp::Sum, rs, body(rs[0], max));
  const std::vector<ExprId> in = kb.setInner({cols});
  kb.addStore(out, kb.add(in[0], base), kb.div(body(in[0], max), sum), /*perInner=*/true);
  return kb.finish();
}

TEST(CpuStash, SoftmaxComputesExpOnceAndMatchesFloat64) {
  const int64_t rows = 7, cols = 1000;
  kir::Kernel stashed = softmaxKernel(rows, cols);
  ASSERT_TRUE(kir::stashReductionBodies(stashed));
  ASSERT_EQ(stashed.reductions[1].stashSlot, 1);
  // The inner loop's value reads the stash: no exp is reachable from it any more.
  std::vector<ExprId> todo = {stashed.stores[0].value};
  for (size_t i = 0; i < todo.size(); ++i) {
    const kir::ExprNode& n = stashed.expr(todo[i]);
    EXPECT_NE(n.op, ExprOp::Exp) << stashed.str();
    for (ExprId c : {n.a, n.b, n.c})
      if (c != kir::kNoExpr) todo.push_back(c);
  }
  std::mt19937 rng(3);
  std::uniform_real_distribution<double> u(-20, 20);
  Tensor x(DType::F32, Shape{rows * cols});
  for (int64_t i = 0; i < x.numel(); ++i) x.setDouble(i, u(rng));
  // JIT (whole, halves, uneven pieces) against the interpreter running the stashed kernel; the sums of
  // 1000 f32 terms differ in order (vector lanes vs one by one), so 1e-5.
  std::vector<Tensor> got = testing::runChecked(stashed, {x, Tensor(DType::F32, Shape{rows * cols})}, 1e-5, 1e-30);
  ASSERT_EQ(got.size(), 2u);
  for (int64_t r = 0; r < rows; ++r) {
    double max = -INFINITY, sum = 0;
    for (int64_t j = 0; j < cols; ++j) max = std::max(max, x.getDouble(r * cols + j));
    for (int64_t j = 0; j < cols; ++j) sum += std::exp(x.getDouble(r * cols + j) - max);
    for (int64_t j = 0; j < cols; ++j) {
      const double want = std::exp(x.getDouble(r * cols + j) - max) / sum;
      ASSERT_NEAR(got[1].getDouble(r * cols + j), want, 1e-5 * want + 1e-30) << r << ", " << j;
    }
  }
}

TEST(CpuStash, LeavesCheapBodiesHalfOutputsAndOtherLoopsAlone) {
  kir::Kernel cheap = softmaxKernel(2, 16, DType::F32, /*cheapBody=*/true);
  EXPECT_FALSE(kir::stashReductionBodies(cheap)) << "a square is cheaper to recompute than to store and load";
  kir::Kernel half = softmaxKernel(2, 16, DType::F16);
  EXPECT_FALSE(kir::stashReductionBodies(half)) << "an f16 output would round the stashed value";
  // Different extents: the reduction's points are not the inner loop's.
  KernelBuilder kb("mismatched");
  const int x = kb.addParam("x", DType::F32, 32, false);
  const int out = kb.addParam("out", DType::F32, 16, true);
  kb.setOuter({1});
  const std::vector<ExprId> r = kb.reductionVars({32});
  const ExprId sum = kb.reduce(ReduceOp::Sum, r, kb.unary(ExprOp::Exp, kb.load(x, r[0])));
  const std::vector<ExprId> in = kb.setInner({16});
  kb.addStore(out, in[0], kb.div(kb.unary(ExprOp::Exp, kb.load(x, in[0])), sum), true);
  kir::Kernel k = kb.finish();
  EXPECT_FALSE(kir::stashReductionBodies(k));
}

}  // namespace
}  // namespace nnc::codegen
