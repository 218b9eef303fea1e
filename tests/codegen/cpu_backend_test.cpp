// CPU backend: loop structure (pointwise, reductions, softmax rows, argmax), JIT, IR text and
// object files. Each kernel is also checked against the kernel-IR interpreter (cpu_test_util.h).
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <limits>
#include <memory>
#include <set>
#include <thread>

#include "cpu_test_util.h"
#include "targets/cpu/codegen/microkernel.h"

namespace nnc::codegen {
namespace {

using kir::ExprId;
using kir::ExprOp;
using kir::KernelBuilder;
using kir::ReduceOp;
using testing::runChecked;

kir::Kernel softmaxRows(int rows, int cols);
std::string runCommand(const std::string& cmd);

// out[i, j] = a[i, j] + b[j] over a 5x7 outer domain.
kir::Kernel broadcastAdd() {
  KernelBuilder kb("bcast_add");
  int a = kb.addParam("a", DType::F32, 35, false);
  int b = kb.addParam("b", DType::F32, 7, false);
  int out = kb.addParam("out", DType::F32, 35, true);
  auto v = kb.setOuter({5, 7});
  ExprId flat = kb.add(kb.mul(v[0], kb.i64(7)), v[1]);
  kb.addStore(out, flat, kb.add(kb.load(a, flat), kb.load(b, v[1])), false);
  return kb.finish();
}

TEST(CpuBackend, PointwiseAddWithBroadcast) {
  std::vector<float> a(35), b(7);
  for (int i = 0; i < 35; ++i) a[i] = 0.5f * i - 3;
  for (int j = 0; j < 7; ++j) b[j] = 100.0f * (j + 1);
  auto bufs = runChecked(broadcastAdd(),
                         {Tensor::fromFloats(a, {5, 7}), Tensor::fromFloats(b, {7}), Tensor(DType::F32, Shape{5, 7})});
  ASSERT_EQ(bufs.size(), 3u);
  for (int i = 0; i < 5; ++i)
    for (int j = 0; j < 7; ++j)
      EXPECT_EQ(bufs[2].getDouble(i * 7 + j), (0.5 * (i * 7 + j) - 3) + 100.0 * (j + 1)) << i << "," << j;
}

TEST(CpuBackend, SubrangeWritesOnlyItsPoints) {
  // [8, 20) of a 5x7 domain starts and ends mid-row: nothing outside it may be written.
  std::unique_ptr<JitKernels> holder;
  rt::KernelFn fn = testing::jitKernel(broadcastAdd(), &holder);
  ASSERT_NE(fn, nullptr);
  std::vector<Tensor> bufs = {Tensor::fromFloats(std::vector<float>(35, 1), {5, 7}),
                              Tensor::fromFloats({0, 1, 2, 3, 4, 5, 6}, {7}), Tensor(DType::F32, Shape{5, 7})};
  testing::callInPieces(fn, bufs, {8, 20});
  for (int i = 0; i < 35; ++i) EXPECT_EQ(bufs[2].getDouble(i), (i >= 8 && i < 20) ? 1.0 + i % 7 : 0.0) << i;
  testing::callInPieces(fn, bufs, {20, 20});  // empty range
  EXPECT_EQ(bufs[2].getDouble(20), 0.0);
}

TEST(CpuBackend, ConcurrentCallsOnDisjointRanges) {
  // The runtime calls one kernel from several threads at once on disjoint ranges.
  const int rows = 64, cols = 100;
  std::unique_ptr<JitKernels> holder;
  rt::KernelFn fn = testing::jitKernel(softmaxRows(rows, cols), &holder);
  ASSERT_NE(fn, nullptr);
  std::vector<float> xs(rows * cols);
  for (int i = 0; i < rows * cols; ++i) xs[i] = static_cast<float>((i * 37) % 101) / 10.0f;
  std::vector<float> serial(rows * cols), parallel(rows * cols);
  void* serialBufs[2] = {xs.data(), serial.data()};
  fn(serialBufs, 0, rows);
  void* parallelBufs[2] = {xs.data(), parallel.data()};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) threads.emplace_back([&, t] { fn(parallelBufs, t * rows / 4, (t + 1) * rows / 4); });
  for (std::thread& th : threads) th.join();
  EXPECT_EQ(serial, parallel);
}

TEST(CpuBackend, RankOneAndRankZeroOuter) {
  // Rank 1: out[i] = x[i] * 2 + 1 over 1000 points (long enough to vectorise).
  {
    KernelBuilder kb("axpb");
    int x = kb.addParam("x", DType::F64, 1000, false);
    int out = kb.addParam("out", DType::F64, 1000, true);
    auto v = kb.setOuter({1000});
    kb.addStore(out, v[0], kb.add(kb.mul(kb.load(x, v[0]), kb.constant(DType::F64, 2)), kb.constant(DType::F64, 1)),
                false);
    std::vector<float> xs(1000);
    for (int i = 0; i < 1000; ++i) xs[i] = static_cast<float>(i) - 500;
    auto bufs =
        runChecked(kb.finish(), {Tensor::fromFloats(xs, {1000}).castTo(DType::F64), Tensor(DType::F64, Shape{1000})});
    ASSERT_EQ(bufs.size(), 2u);
    for (int i = 0; i < 1000; ++i) EXPECT_EQ(bufs[1].getDouble(i), (i - 500) * 2.0 + 1) << i;
  }
  // Rank 0: a scalar kernel runs once.
  {
    KernelBuilder kb("scalar");
    int x = kb.addParam("x", DType::I32, 1, false);
    int out = kb.addParam("out", DType::I32, 1, true);
    kb.addStore(out, kb.i64(0), kb.mul(kb.load(x, kb.i64(0)), kb.constantInt(DType::I32, -3)), false);
    auto bufs = runChecked(kb.finish(), {Tensor::fromInt64s({14}).castTo(DType::I32), Tensor(DType::I32, Shape{1})});
    ASSERT_EQ(bufs.size(), 2u);
    EXPECT_EQ(bufs[1].getInt(0), -42);
  }
}

TEST(CpuBackend, ThreeDimensionalOuterWithTranspose) {
  // out[i, j, k] = x[k, j, i] for x of shape 4x3x2 (a transpose through index arithmetic).
  KernelBuilder kb("transpose3");
  int x = kb.addParam("x", DType::I64, 24, false);
  int out = kb.addParam("out", DType::I64, 24, true);
  auto v = kb.setOuter({2, 3, 4});
  std::vector<ExprId> outIdx = {v[0], v[1], v[2]};
  std::vector<ExprId> inIdx = {v[2], v[1], v[0]};
  kb.addStore(out, kb.flatIndex(outIdx, Shape{2, 3, 4}), kb.load(x, kb.flatIndex(inIdx, Shape{4, 3, 2})), false);
  std::vector<int64_t> xs(24);
  for (int i = 0; i < 24; ++i) xs[i] = 1000 + i;
  auto bufs = runChecked(kb.finish(), {Tensor::fromInt64s(xs, {4, 3, 2}), Tensor(DType::I64, Shape{2, 3, 4})});
  ASSERT_EQ(bufs.size(), 2u);
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 3; ++j)
      for (int k = 0; k < 4; ++k) EXPECT_EQ(bufs[1].getInt((i * 3 + j) * 4 + k), 1000 + (k * 3 + j) * 2 + i);
}

TEST(CpuBackend, ReductionSumOverRows) {
  // out[i] = sum_j x[i, j] for a 6x37 input, and sum over a 2-D reduction loop for a 6x(37) view.
  KernelBuilder kb("row_sum");
  int x = kb.addParam("x", DType::F32, 6 * 37, false);
  int out = kb.addParam("out", DType::F32, 6, true);
  auto v = kb.setOuter({6});
  auto r = kb.reductionVars({37});
  ExprId s = kb.reduce(ReduceOp::Sum, r, kb.load(x, kb.add(kb.mul(v[0], kb.i64(37)), r[0])));
  kb.addStore(out, v[0], s, false);
  std::vector<float> xs(6 * 37);
  for (int i = 0; i < 6 * 37; ++i) xs[i] = std::sin(0.37f * i) * (1 + i % 11);
  auto bufs = runChecked(kb.finish(), {Tensor::fromFloats(xs, {6, 37}), Tensor(DType::F32, Shape{6})}, 1e-5, 1e-5);
  ASSERT_EQ(bufs.size(), 2u);
  for (int i = 0; i < 6; ++i) {
    double want = 0;
    for (int j = 0; j < 37; ++j) want += xs[i * 37 + j];
    EXPECT_NEAR(bufs[1].getDouble(i), want, 1e-4) << i;
  }
}

TEST(CpuBackend, IntegerProdMaxMinOverTwoDimensionalReduction) {
  // Over x of shape 2x3x4: per leading index, reduce the trailing 3x4 block.
  KernelBuilder kb("int_reduce");
  int x = kb.addParam("x", DType::I32, 24, false);
  int outMax = kb.addParam("mx", DType::I32, 2, true);
  int outMin = kb.addParam("mn", DType::I32, 2, true);
  int outProd = kb.addParam("pr", DType::I64, 2, true);
  auto v = kb.setOuter({2});
  auto idx = [&](const std::vector<ExprId>& r) {
    std::vector<ExprId> full = {v[0], r[0], r[1]};
    return kb.flatIndex(full, Shape{2, 3, 4});
  };
  auto r1 = kb.reductionVars({3, 4});
  kb.addStore(outMax, v[0], kb.reduce(ReduceOp::Max, r1, kb.load(x, idx(r1))), false);
  auto r2 = kb.reductionVars({3, 4});
  kb.addStore(outMin, v[0], kb.reduce(ReduceOp::Min, r2, kb.load(x, idx(r2))), false);
  auto r3 = kb.reductionVars({3, 4});
  ExprId body = kb.cast(DType::I64, kb.load(x, idx(r3)));
  kb.addStore(outProd, v[0], kb.reduce(ReduceOp::Prod, r3, body), false);
  std::vector<int64_t> xs = {3,  -1, 2,  5,  1,  1,  -2, 1,  1,  2,  1,  1,  // block 0
                             -7, -8, -9, -3, -4, -6, -5, -1, -2, -9, -3, -4};
  auto bufs =
      runChecked(kb.finish(), {Tensor::fromInt64s(xs, {2, 3, 4}).castTo(DType::I32), Tensor(DType::I32, Shape{2}),
                               Tensor(DType::I32, Shape{2}), Tensor(DType::I64, Shape{2})});
  ASSERT_EQ(bufs.size(), 4u);
  EXPECT_EQ(bufs[1].getInt(0), 5);
  EXPECT_EQ(bufs[1].getInt(1), -1);
  EXPECT_EQ(bufs[2].getInt(0), -2);
  EXPECT_EQ(bufs[2].getInt(1), -9);
  EXPECT_EQ(bufs[3].getInt(0), 3 * -1 * 2 * 5 * -2 * 2);
  EXPECT_EQ(bufs[3].getInt(1), 7LL * 8 * 9 * 3 * 4 * 6 * 5 * 1 * 2 * 9 * 3 * 4);
}

// Softmax over rows of a 4x10 input: two reductions (max, sum of exp) and per-inner stores.
kir::Kernel softmaxRows(int rows, int cols) {
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

TEST(CpuBackend, SoftmaxRowKernel) {
  const int rows = 4, cols = 10;
  std::vector<float> xs(rows * cols);
  for (int i = 0; i < rows * cols; ++i) xs[i] = std::cos(1.3f * i) * 4;
  xs[1 * cols + 3] = 80;                                       // large: needs the max shift
  xs[2 * cols + 0] = -std::numeric_limits<float>::infinity();  // exp(-inf) = 0
  auto bufs = runChecked(softmaxRows(rows, cols),
                         {Tensor::fromFloats(xs, {rows, cols}), Tensor(DType::F32, Shape{rows, cols})}, 1e-6, 1e-7);
  ASSERT_EQ(bufs.size(), 2u);
  for (int i = 0; i < rows; ++i) {
    double mx = -INFINITY, sum = 0;
    for (int j = 0; j < cols; ++j) mx = std::max(mx, static_cast<double>(xs[i * cols + j]));
    for (int j = 0; j < cols; ++j) sum += std::exp(xs[i * cols + j] - mx);
    double total = 0;
    for (int j = 0; j < cols; ++j) {
      double want = std::exp(xs[i * cols + j] - mx) / sum;
      EXPECT_NEAR(bufs[1].getDouble(i * cols + j), want, 1e-6 + 1e-5 * want) << i << "," << j;
      total += bufs[1].getDouble(i * cols + j);
    }
    EXPECT_NEAR(total, 1.0, 1e-5);
  }
  EXPECT_EQ(bufs[1].getDouble(2 * cols), 0.0);
}

TEST(CpuBackend, MaxReductionPropagatesNaN) {
  KernelBuilder kb("nan_max");
  int x = kb.addParam("x", DType::F32, 12, false);
  int mx = kb.addParam("mx", DType::F32, 3, true);
  int mn = kb.addParam("mn", DType::F32, 3, true);
  auto v = kb.setOuter({3});
  auto r1 = kb.reductionVars({4});
  kb.addStore(mx, v[0], kb.reduce(ReduceOp::Max, r1, kb.load(x, kb.add(kb.mul(v[0], kb.i64(4)), r1[0]))), false);
  auto r2 = kb.reductionVars({4});
  kb.addStore(mn, v[0], kb.reduce(ReduceOp::Min, r2, kb.load(x, kb.add(kb.mul(v[0], kb.i64(4)), r2[0]))), false);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> xs = {1, nan, 3, 2, nan, 5, 6, -7, -1, -2, 4, 0.5f};
  auto bufs = runChecked(kb.finish(),
                         {Tensor::fromFloats(xs, {3, 4}), Tensor(DType::F32, Shape{3}), Tensor(DType::F32, Shape{3})});
  ASSERT_EQ(bufs.size(), 3u);
  EXPECT_TRUE(std::isnan(bufs[1].getDouble(0)));
  EXPECT_TRUE(std::isnan(bufs[1].getDouble(1)));
  EXPECT_EQ(bufs[1].getDouble(2), 4);
  EXPECT_TRUE(std::isnan(bufs[2].getDouble(0)));
  EXPECT_TRUE(std::isnan(bufs[2].getDouble(1)));
  EXPECT_EQ(bufs[2].getDouble(2), -2);
}

// Rows long enough for the vectorised max/min (maxnum/minnum plus a NaN flag): a NaN in the vector
// body or in the remainder still wins; rows without one give the plain extremum.
TEST(CpuBackend, LongMaxReductionPropagatesNaNFromAnyPosition) {
  constexpr int64_t kRows = 4, kLen = 100;
  KernelBuilder kb("nan_max_long");
  int x = kb.addParam("x", DType::F32, kRows * kLen, false);
  int mx = kb.addParam("mx", DType::F32, kRows, true);
  int mn = kb.addParam("mn", DType::F32, kRows, true);
  auto v = kb.setOuter({kRows});
  auto r1 = kb.reductionVars({kLen});
  kb.addStore(mx, v[0], kb.reduce(ReduceOp::Max, r1, kb.load(x, kb.add(kb.mul(v[0], kb.i64(kLen)), r1[0]))), false);
  auto r2 = kb.reductionVars({kLen});
  kb.addStore(mn, v[0], kb.reduce(ReduceOp::Min, r2, kb.load(x, kb.add(kb.mul(v[0], kb.i64(kLen)), r2[0]))), false);
  std::vector<float> xs(kRows * kLen);
  for (int64_t i = 0; i < kRows * kLen; ++i) xs[i] = static_cast<float>((i * 37) % 101) - 50.0f;
  const float nan = std::numeric_limits<float>::quiet_NaN();
  xs[0 * kLen + 3] = nan;   // early, in the vector body
  xs[1 * kLen + 97] = nan;  // in the remainder
  xs[3 * kLen + 50] = -std::numeric_limits<float>::infinity();
  auto bufs = runChecked(kb.finish(), {Tensor::fromFloats(xs, {kRows, kLen}), Tensor(DType::F32, Shape{kRows}),
                                       Tensor(DType::F32, Shape{kRows})});
  ASSERT_EQ(bufs.size(), 3u);
  for (int64_t row : {0, 1}) {
    EXPECT_TRUE(std::isnan(bufs[1].getDouble(row))) << row;
    EXPECT_TRUE(std::isnan(bufs[2].getDouble(row))) << row;
  }
  for (int64_t row : {2, 3}) {
    float hi = -INFINITY, lo = INFINITY;
    for (int64_t i = 0; i < kLen; ++i) {
      hi = std::max(hi, xs[row * kLen + i]);
      lo = std::min(lo, xs[row * kLen + i]);
    }
    EXPECT_EQ(bufs[1].getDouble(row), hi) << row;
    EXPECT_EQ(bufs[2].getDouble(row), lo) << row;
  }
}

// Min and Max against a number constant, the constant on either side (a Clip's bounds, ReLU6):
// one compare and select each, which must still return a NaN operand; over a row long enough to
// vectorise, NaN at several lanes, signed zeros and infinities as the full form gives them.
TEST(CpuBackend, MinMaxAgainstAConstantPropagateNaN) {
  constexpr int64_t kLen = 67;
  KernelBuilder kb("clip_nan");
  int x = kb.addParam("x", DType::F32, kLen, false);
  int outs[4];
  for (int i = 0; i < 4; ++i) outs[i] = kb.addParam("o" + std::to_string(i), DType::F32, kLen, true);
  auto v = kb.setOuter({kLen});
  const ExprId xv = kb.load(x, v[0]);
  const ExprId zero = kb.constant(DType::F32, 0.0), six = kb.constant(DType::F32, 6.0);
  kb.addStore(outs[0], v[0], kb.binary(ExprOp::Min, kb.binary(ExprOp::Max, xv, zero), six), false);  // x first
  kb.addStore(outs[1], v[0], kb.binary(ExprOp::Min, six, kb.binary(ExprOp::Max, zero, xv)), false);  // x second
  kb.addStore(outs[2], v[0], kb.binary(ExprOp::Max, xv, zero), false);
  kb.addStore(outs[3], v[0], kb.binary(ExprOp::Min, zero, xv), false);
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  std::vector<float> xs(kLen);
  for (int64_t i = 0; i < kLen; ++i) xs[i] = static_cast<float>(i % 17) - 5.5f;
  for (int64_t i : {0, 9, 16, 31, 66}) xs[i] = nan;
  xs[3] = inf, xs[4] = -inf, xs[5] = -0.0f;
  auto bufs = runChecked(
      kb.finish(), {Tensor::fromFloats(xs, {kLen}), Tensor(DType::F32, Shape{kLen}), Tensor(DType::F32, Shape{kLen}),
                    Tensor(DType::F32, Shape{kLen}), Tensor(DType::F32, Shape{kLen})});
  ASSERT_EQ(bufs.size(), 5u);
  for (int64_t i = 0; i < kLen; ++i) {
    const float xi = xs[i];
    for (int o = 1; o <= 4; ++o) {
      const double got = bufs[o].getDouble(i);
      if (std::isnan(xi)) {
        EXPECT_TRUE(std::isnan(got)) << "output " << o << " element " << i;
        continue;
      }
      const float want = o <= 2 ? std::min(std::max(xi, 0.0f), 6.0f) : o == 3 ? std::max(xi, 0.0f) : std::min(0.0f, xi);
      EXPECT_EQ(got, want) << "output " << o << " element " << i;
    }
  }
}

// A product added to a value is one fused multiply-add (one rounding): every element equals
// std::fma's result, and the inputs are chosen so that rounding the product first differs for many.
TEST(CpuBackend, ProductPlusValueIsOneFusedMultiplyAdd) {
  if (!__builtin_cpu_supports("fma")) GTEST_SKIP() << "this CPU has no FMA instructions";
  constexpr int64_t kLen = 61;  // vector body and remainder
  KernelBuilder kb("fma");
  const int x = kb.addParam("x", DType::F32, kLen, false), y = kb.addParam("y", DType::F32, kLen, false),
            z = kb.addParam("z", DType::F32, kLen, false), out = kb.addParam("out", DType::F32, kLen, true);
  auto v = kb.setOuter({kLen});
  kb.addStore(out, v[0], kb.add(kb.mul(kb.load(x, v[0]), kb.load(y, v[0])), kb.load(z, v[0])), false);
  std::vector<float> xs(kLen), ys(kLen), zs(kLen);
  for (int64_t i = 0; i < kLen; ++i) {
    xs[i] = 1.0f + std::ldexp(static_cast<float>(i + 1), -20);
    ys[i] = 1.0f - std::ldexp(static_cast<float>(2 * i + 1), -21);
    zs[i] = -1.0f;
  }
  // (Not against the interpreter, which rounds the product: std::fma is the oracle here.)
  std::unique_ptr<JitKernels> holder;
  rt::KernelFn fn = testing::jitKernel(kb.finish(), &holder);
  ASSERT_NE(fn, nullptr);
  std::vector<Tensor> bufs = {Tensor::fromFloats(xs, {kLen}), Tensor::fromFloats(ys, {kLen}),
                              Tensor::fromFloats(zs, {kLen}), Tensor(DType::F32, Shape{kLen})};
  testing::callInPieces(fn, bufs, {0, kLen});
  int differs = 0;
  for (int64_t i = 0; i < kLen; ++i) {
    const float fused = std::fma(xs[i], ys[i], zs[i]);
    volatile float product = xs[i] * ys[i];  // rounded on its own
    differs += (product + zs[i]) != fused;
    EXPECT_EQ(bufs[3].getDouble(i), fused) << i;
  }
  EXPECT_GT(differs, kLen / 2) << "the inputs must tell the two apart";
}

// Rows of a 3-point innermost axis are merged with the axes above into rows of 27 (an NHWC stem's
// patches): run whole, and in pieces cut inside merged rows (partial rows at a chunk's ends).
TEST(CpuBackend, ShortInnermostAxesRunAsMergedRowsCutAnywhere) {
  const std::vector<int64_t> dims = {4, 5, 3, 3, 3};
  const int64_t n = 4 * 5 * 27;
  KernelBuilder kb("patches");
  const int x = kb.addParam("x", DType::F32, n, false), out = kb.addParam("out", DType::F32, n, true);
  auto v = kb.setOuter(dims);
  ExprId flat = v[0];
  for (size_t d = 1; d < dims.size(); ++d) flat = kb.add(kb.mul(flat, kb.i64(dims[d])), v[d]);
  // out = x * 2 + (c - kw): a value of the point's own coordinates, so a misplaced point shows.
  kb.addStore(out, flat,
              kb.add(kb.mul(kb.load(x, flat), kb.constant(DType::F32, 2.0)), kb.cast(DType::F32, kb.sub(v[2], v[4]))),
              false);
  const kir::Kernel kernel = kb.finish();
  std::vector<float> xs(n);
  for (int64_t i = 0; i < n; ++i) xs[i] = static_cast<float>(i % 13) - 6.0f;
  std::unique_ptr<JitKernels> holder;
  rt::KernelFn fn = testing::jitKernel(kernel, &holder);
  ASSERT_NE(fn, nullptr);
  for (const std::vector<int64_t>& cuts : std::vector<std::vector<int64_t>>{
           {0, n}, {0, 13, 27, 28, 100, 269, 270, 271, n}, {0, 1, 2, 53, 54, 55, n - 1, n}}) {
    std::vector<Tensor> bufs = {Tensor::fromFloats(xs, {n}), Tensor(DType::F32, Shape{n})};
    testing::callInPieces(fn, bufs, cuts);
    for (int64_t i = 0; i < n; ++i) {
      const int64_t c = i / 9 % 3, kw = i % 3;
      EXPECT_EQ(bufs[1].getDouble(i), xs[i] * 2.0f + static_cast<float>(c - kw)) << i << " of " << cuts.size() - 1;
    }
  }
}

TEST(CpuBackend, ArgMaxArgMinWithTies) {
  // Rows of x (4x5); argmax/argmin with first and last tie-breaking (numpy: first).
  KernelBuilder kb("argmax_ties");
  int x = kb.addParam("x", DType::F32, 20, false);
  int outs[4];
  for (int i = 0; i < 4; ++i) outs[i] = kb.addParam("o" + std::to_string(i), DType::I64, 4, true);
  auto v = kb.setOuter({4});
  const ReduceOp ops[4] = {ReduceOp::ArgMax, ReduceOp::ArgMax, ReduceOp::ArgMin, ReduceOp::ArgMin};
  const bool last[4] = {false, true, false, true};
  for (int i = 0; i < 4; ++i) {
    auto r = kb.reductionVars({5});
    kb.addStore(outs[i], v[0], kb.reduce(ops[i], r, kb.load(x, kb.add(kb.mul(v[0], kb.i64(5)), r[0])), last[i]), false);
  }
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> xs = {1,    3,    3,    0,    0,     // max ties at 1,2; min ties at 3,4
                           -inf, -inf, -inf, -inf, -inf,  // all equal
                           7,    2,    7,    2,    5,     // max 0/2, min 1/3
                           -1,   -5,   9,    -5,   9};    // max 2/4, min 1/3
  std::vector<Tensor> init = {Tensor::fromFloats(xs, {4, 5})};
  for (int i = 0; i < 4; ++i) init.emplace_back(DType::I64, Shape{4});
  auto bufs = runChecked(kb.finish(), init);
  ASSERT_EQ(bufs.size(), 5u);
  // np.argmax(x, 1), reversed-row argmax for "last", np.argmin(x, 1), and its "last" variant.
  const int64_t want[4][4] = {{1, 0, 0, 2}, {2, 4, 2, 4}, {3, 0, 1, 1}, {4, 4, 3, 3}};
  for (int i = 0; i < 4; ++i)
    for (int row = 0; row < 4; ++row) EXPECT_EQ(bufs[1 + i].getInt(row), want[i][row]) << "op " << i << " row " << row;
}

TEST(CpuBackend, ReductionUsesEarlierReductionAndBroadcastStore) {
  // Layer-norm-like: mean, then variance using the mean; out[i] = var (non-perInner store).
  KernelBuilder kb("variance");
  int x = kb.addParam("x", DType::F64, 16, false);
  int out = kb.addParam("var", DType::F64, 2, true);
  auto v = kb.setOuter({2});
  auto r1 = kb.reductionVars({8});
  auto at = [&](ExprId j) { return kb.load(x, kb.add(kb.mul(v[0], kb.i64(8)), j)); };
  ExprId mean = kb.div(kb.reduce(ReduceOp::Sum, r1, at(r1[0])), kb.constant(DType::F64, 8));
  auto r2 = kb.reductionVars({8});
  ExprId d = kb.sub(at(r2[0]), mean);
  ExprId var = kb.div(kb.reduce(ReduceOp::Sum, r2, kb.mul(d, d)), kb.constant(DType::F64, 8));
  kb.addStore(out, v[0], var, false);
  std::vector<float> xs = {2, 4, 4, 4, 5, 5, 7, 9, 1, 1, 1, 1, 1, 1, 1, 1};
  auto bufs = runChecked(kb.finish(), {Tensor::fromFloats(xs, {2, 8}).castTo(DType::F64), Tensor(DType::F64, Shape{2})},
                         1e-12, 1e-12);
  ASSERT_EQ(bufs.size(), 2u);
  EXPECT_NEAR(bufs[1].getDouble(0), 4.0, 1e-12);  // np.var([2,4,4,4,5,5,7,9])
  EXPECT_EQ(bufs[1].getDouble(1), 0.0);
}

TEST(CpuBackend, LlvmIrNamesKernelAndIsOptimised) {
  auto mod = CpuModule::build({broadcastAdd(), softmaxRows(2, 3)}, CpuTargetOptions{});
  ASSERT_TRUE(mod.isOk()) << mod.status().message();
  std::string ir = mod.value()->llvmIr();
  EXPECT_NE(ir.find("define void @bcast_add("), std::string::npos) << ir;
  EXPECT_NE(ir.find("@softmax_rows("), std::string::npos);
  EXPECT_EQ(ir.find("alloca"), std::string::npos) << "accumulators should be promoted to registers";
  EXPECT_EQ(mod.value()->kernelNames(), (std::vector<std::string>{"bcast_add", "softmax_rows"}));
  EXPECT_FALSE(mod.value()->targetCpu().empty());
}

TEST(CpuBackend, PointwiseLoopIsVectorised) {
  KernelBuilder kb("vec_add");
  int a = kb.addParam("a", DType::F32, 4096, false);
  int out = kb.addParam("out", DType::F32, 4096, true);
  auto v = kb.setOuter({4096});
  kb.addStore(out, v[0], kb.add(kb.load(a, v[0]), kb.constant(DType::F32, 1)), false);
  auto mod = CpuModule::build({kb.finish()}, CpuTargetOptions{});
  ASSERT_TRUE(mod.isOk()) << mod.status().message();
  std::string ir = mod.value()->llvmIr();
  EXPECT_NE(ir.find("x float>"), std::string::npos) << ir;
}

// out[i] = sum_j x[i, j] * scale over a rows x 9 window, params named after `prefix`; `unroll` marks
// the window for full unrolling (a loop hint, the only difference from the same kernel without it).
kir::Kernel windowSum(const std::string& name, const std::string& prefix, float scale, bool unroll) {
  KernelBuilder kb(name);
  int x = kb.addParam(prefix + "_x", DType::F32, 4 * 9, false);
  int out = kb.addParam(prefix + "_out", DType::F32, 4, true);
  auto v = kb.setOuter({4});
  auto r = kb.reductionVars({9});
  ExprId sum = kb.reduce(ReduceOp::Sum, r, kb.load(x, kb.add(kb.mul(v[0], kb.i64(9)), r[0])));
  if (unroll) kb.unrollWindow(sum);
  kb.addStore(out, v[0], kb.mul(sum, kb.constant(DType::F32, scale)), false);
  return kb.finish();
}

// Identical kernels under other names (and other param names) are compiled once, the others
// aliases of it; kernels differing in a constant or only in a loop hint are not merged. Every name
// still runs its own (equal) code, through the JIT and through an object file's kernel table.
TEST(CpuBackend, IdenticalKernelsAreCompiledOnce) {
  const std::vector<kir::Kernel> kernels = {
      windowSum("a", "conv1", 2, true), windowSum("b", "conv2", 2, true),   // b: alias of a
      windowSum("c", "conv3", 3, true),                                     // another constant
      windowSum("d", "conv4", 2, false), windowSum("e", "conv5", 2, false)  // no unroll hint; e: alias of d
  };
  auto mod = CpuModule::build(kernels, CpuTargetOptions{});
  ASSERT_TRUE(mod.isOk()) << mod.status().message();
  EXPECT_EQ(mod.value()->mergedKernels(), 2);
  const std::string ir = mod.value()->llvmIr();
  EXPECT_NE(ir.find("@b = alias"), std::string::npos) << ir;
  EXPECT_NE(ir.find("@e = alias"), std::string::npos) << ir;
  EXPECT_EQ(ir.find("@c = alias"), std::string::npos) << ir;
  EXPECT_EQ(ir.find("@d = alias"), std::string::npos) << ir;
  EXPECT_EQ(mod.value()->kernelNames(), (std::vector<std::string>{"a", "b", "c", "d", "e"}));

  auto jit = mod.value()->jit();
  ASSERT_TRUE(jit.isOk()) << jit.status().message();
  std::vector<float> x(36);
  for (int i = 0; i < 36; ++i) x[i] = 0.25f * i - 2;
  for (const auto& [name, scale] :
       std::vector<std::pair<std::string, float>>{{"a", 2.f}, {"b", 2.f}, {"c", 3.f}, {"d", 2.f}, {"e", 2.f}}) {
    auto fn = jit.value()->lookup(name);
    ASSERT_TRUE(fn.isOk()) << name;
    std::vector<float> out(4, -1);
    void* bufs[] = {x.data(), out.data()};
    (*fn)(bufs, 0, 4);
    for (int i = 0; i < 4; ++i) {
      double want = 0;
      for (int j = 0; j < 9; ++j) want += x[i * 9 + j];
      EXPECT_NEAR(out[i], want * scale, 1e-5) << name << " " << i;
    }
  }
}

// A kernel owns one function per microkernel shape: asking again returns it, and any field that
// differs (stride, row count, in-place A, its split row) or another kernel gets another.
TEST(CpuBackend, MicrokernelsAreOnePerShapeInAModule) {
  llvm::LLVMContext ctx;
  llvm::Module m("micro", ctx);
  const llvmcpu::MicrokernelShape base{16, 14, 32, 1, 14};
  llvm::Function* first = llvmcpu::emitMicrokernel(m, "k1", base, "", "");
  EXPECT_EQ(llvmcpu::emitMicrokernel(m, "k1", base, "", ""), first);
  EXPECT_EQ(first->getName(), "k1." + llvmcpu::microkernelName(base));
  std::set<llvm::Function*> distinct = {first, llvmcpu::emitMicrokernel(m, "k2", base, "", "")};
  std::vector<llvmcpu::MicrokernelShape> others(5, base);
  others[0].rows = 13;
  others[1].aRowStride = 2;
  others[2].indirectA = true;
  others[3].indirectA = true;
  others[3].splitRow = 7;
  others[4].farPrefetchBytes = 8192;
  for (const llvmcpu::MicrokernelShape& s : others) distinct.insert(llvmcpu::emitMicrokernel(m, "k1", s, "", ""));
  EXPECT_EQ(distinct.size(), others.size() + 2);
  const auto defined = std::count_if(m.begin(), m.end(), [](const llvm::Function& f) { return !f.isDeclaration(); });
  EXPECT_EQ(defined, static_cast<std::ptrdiff_t>(others.size() + 2));
  for (llvm::Function* f : distinct) EXPECT_TRUE(f->getName().contains(".micro.")) << f->getName().str();
}

// Parts compiled on several threads: every kernel runs through the JIT and through the objects'
// table (defined in the first object, naming kernels of the others), and a lowering error is the
// earliest kernel's, as a serial build would report it.
TEST(CpuBackend, PartsCompiledInParallelLinkTogether) {
  CpuTargetOptions opts;
  opts.compileThreads = 3;
  std::vector<kir::Kernel> kernels;
  for (int i = 0; i < 5; ++i) kernels.push_back(windowSum("w" + std::to_string(i), "p", 1.0f + i, i % 2 == 0));
  auto mod = CpuModule::build(kernels, opts);
  ASSERT_TRUE(mod.isOk()) << mod.status().message();
  EXPECT_EQ(mod.value()->numParts(), 3);
  EXPECT_EQ(mod.value()->mergedKernels(), 0);
  std::vector<float> x(36);
  for (int i = 0; i < 36; ++i) x[i] = 0.5f * i - 7;
  auto check = [&](const std::string& name, rt::KernelFn fn, float scale) {
    std::vector<float> out(4, -1);
    void* bufs[] = {x.data(), out.data()};
    fn(bufs, 0, 4);
    for (int i = 0; i < 4; ++i) {
      double want = 0;
      for (int j = 0; j < 9; ++j) want += x[i * 9 + j];
      EXPECT_NEAR(out[i], want * scale, 1e-4) << name << " " << i;
    }
  };
  auto jit = mod.value()->jit();
  ASSERT_TRUE(jit.isOk()) << jit.status().message();
  for (int i = 0; i < 5; ++i) {
    auto fn = jit.value()->lookup("w" + std::to_string(i));
    ASSERT_TRUE(fn.isOk());
    check("jit w" + std::to_string(i), *fn, 1.0f + i);
  }
  auto dir = std::filesystem::temp_directory_path() / ("nnc_cpu_parts_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  auto objs = mod.value()->writeObjects((dir / "k").string(), true);
  ASSERT_TRUE(objs.isOk()) << objs.status().message();
  ASSERT_EQ(objs->size(), 3u);
  std::string cmd = "cc -shared -o " + (dir / "k.so").string();
  for (const std::string& o : *objs) cmd += " " + o;
  ASSERT_EQ(std::system((cmd + " -lm").c_str()), 0);
  void* h = ::dlopen((dir / "k.so").c_str(), RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(h, nullptr) << ::dlerror();
  auto* table = static_cast<const NncKernelEntry*>(::dlsym(h, "nnc_model_kernels"));
  auto* count = static_cast<const int64_t*>(::dlsym(h, "nnc_model_num_kernels"));
  ASSERT_TRUE(table && count);
  ASSERT_EQ(*count, 5);
  for (int i = 0; i < 5; ++i) {
    EXPECT_EQ(std::string(table[i].name), "w" + std::to_string(i));
    check(std::string("so ") + table[i].name, reinterpret_cast<rt::KernelFn>(table[i].fn), 1.0f + i);
  }
  ::dlclose(h);
  std::filesystem::remove_all(dir);

  // Two kernels that cannot be lowered, in different parts: the earlier one is reported.
  auto badKernel = [](const std::string& name) {
    KernelBuilder kb(name);
    int xi = kb.addParam("x", DType::I32, 4, false);
    int out = kb.addParam("out", DType::I32, 4, true);
    auto v = kb.setOuter({4});
    kb.addStore(out, v[0], kb.unary(ExprOp::Exp, kb.load(xi, v[0])), false);
    return kb.finish();
  };
  std::vector<kir::Kernel> withBad = {windowSum("ok0", "p", 1, true), badKernel("bad1"), badKernel("bad2x"),
                                      windowSum("ok3", "p", 2, false)};
  for (int threads : {1, 2, 4}) {
    opts.compileThreads = threads;
    auto failed = CpuModule::build(withBad, opts);
    ASSERT_FALSE(failed.isOk());
    EXPECT_NE(failed.status().message().find("kernel 'bad1'"), std::string::npos)
        << threads << " threads: " << failed.status().message();
  }
}

TEST(CpuBackend, DuplicateKernelNameIsAnError) {
  auto mod = CpuModule::build({broadcastAdd(), broadcastAdd()}, CpuTargetOptions{});
  ASSERT_FALSE(mod.isOk());
  EXPECT_EQ(mod.status().message(), "cpu backend: duplicate kernel name 'bcast_add'");
}

TEST(CpuBackend, UnsupportedOperationIsAnError) {
  KernelBuilder kb("bad_kernel");
  int x = kb.addParam("x", DType::I32, 4, false);
  int out = kb.addParam("out", DType::I32, 4, true);
  auto v = kb.setOuter({4});
  kb.addStore(out, v[0], kb.unary(ExprOp::Exp, kb.load(x, v[0])), false);
  kir::Kernel k = kb.finish();
  auto mod = CpuModule::build({k}, CpuTargetOptions{});
  ASSERT_FALSE(mod.isOk());
  EXPECT_NE(mod.status().message().find("kernel 'bad_kernel': e"), std::string::npos) << mod.status().message();
  EXPECT_NE(mod.status().message().find("exp on i32 is not supported by the cpu backend"), std::string::npos)
      << mod.status().message();
}

TEST(CpuBackend, WriteObjectWithKernelTable) {
  auto mod = CpuModule::build({broadcastAdd(), softmaxRows(2, 3)}, CpuTargetOptions{});
  ASSERT_TRUE(mod.isOk()) << mod.status().message();
  auto dir = std::filesystem::temp_directory_path() / ("nnc_cpu_backend_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  auto paths = mod.value()->writeObjects((dir / "kernels").string(), /*withTable=*/true);
  ASSERT_TRUE(paths.isOk()) << paths.status().message();
  ASSERT_EQ(paths->size(), static_cast<size_t>(mod.value()->numParts()));
  std::string all;
  for (const std::string& path : *paths) {
    ASSERT_TRUE(std::filesystem::exists(path));
    EXPECT_FALSE(std::filesystem::exists(path + ".tmp" + std::to_string(::getpid())));
    all += " " + path;
  }
  std::string cmd = "nm" + all;
  FILE* p = ::popen(cmd.c_str(), "r");
  ASSERT_NE(p, nullptr);
  std::string out;
  char buf[512];
  while (size_t n = std::fread(buf, 1, sizeof buf, p)) out.append(buf, n);
  ASSERT_EQ(::pclose(p), 0) << out;
  EXPECT_NE(out.find(" T bcast_add"), std::string::npos) << out;
  EXPECT_NE(out.find(" T softmax_rows"), std::string::npos) << out;
  EXPECT_NE(out.find(" nnc_model_kernels"), std::string::npos) << out;
  EXPECT_NE(out.find(" R nnc_model_num_kernels"), std::string::npos) << out;

  // The table is defined once, in the first object.
  EXPECT_NE(runCommand("nm " + paths->front()).find(" nnc_model_kernels"), std::string::npos);
  // Without the table; and into a missing directory, which must fail cleanly.
  ASSERT_TRUE(mod.value()->writeObjects((dir / "plain").string(), false).isOk());
  auto bad = mod.value()->writeObjects((dir / "missing" / "x").string(), false);
  ASSERT_FALSE(bad.isOk());
  EXPECT_NE(bad.status().message().find("cannot write"), std::string::npos) << bad.status().message();
  std::filesystem::remove_all(dir);
}

std::string runCommand(const std::string& cmd) {
  FILE* p = ::popen(cmd.c_str(), "r");
  if (!p) return "";
  std::string out;
  char buf[512];
  while (size_t n = std::fread(buf, 1, sizeof buf, p)) out.append(buf, n);
  ::pclose(p);
  return out;
}

TEST(CpuBackend, GenericCpuNeedsNoCompilerRuntimeHelpers) {
  // f16 in and out, round-even, floor and exp on plain x86-64 (no F16C, no SSE4.1): results are
  // right and the object references no __extendhfsf2-style helper, only libm.
  KernelBuilder kb("generic_half");
  int x = kb.addParam("x", DType::F16, 6, false);
  int out = kb.addParam("out", DType::F16, 6, true);
  int out2 = kb.addParam("out2", DType::F32, 6, true);
  auto v = kb.setOuter({6});
  ExprId xv = kb.load(x, v[0]);
  kb.addStore(out, v[0], kb.add(kb.unary(ExprOp::RoundEven, xv), kb.unary(ExprOp::Floor, xv)), false);
  kb.addStore(out2, v[0], kb.unary(ExprOp::Exp, xv), false);
  CpuTargetOptions opts;
  opts.cpu = "x86-64";
  auto mod = CpuModule::build({kb.finish()}, opts);
  ASSERT_TRUE(mod.isOk()) << mod.status().message();
  EXPECT_EQ(mod.value()->targetCpu(), "x86-64");
  auto jit = mod.value()->jit();
  ASSERT_TRUE(jit.isOk()) << jit.status().message();
  auto fn = jit.value()->lookup("generic_half");
  ASSERT_TRUE(fn.isOk());
  // 2.5, -1.5, 0.5, 3.25, 1000, 0 as f16 bits.
  std::vector<uint16_t> in = {0x4100, 0xbe00, 0x3800, 0x4280, 0x63d0, 0x0000}, res(6);
  std::vector<float> res2(6);
  void* bufs[3] = {in.data(), res.data(), res2.data()};
  fn.value()(bufs, 0, 6);
  // roundeven + floor: 2+2, -2-2, 0+0, 3+3, 2000, 0 -> f16 bits
  const uint16_t want[6] = {0x4400, 0xc400, 0x0000, 0x4600, 0x67d0, 0x0000};
  const double xs[6] = {2.5, -1.5, 0.5, 3.25, 1000, 0};
  for (int i = 0; i < 6; ++i) {
    EXPECT_EQ(res[i], want[i]) << i;
    EXPECT_FLOAT_EQ(res2[i], static_cast<float>(std::exp(xs[i]))) << i;
  }
  auto dir = std::filesystem::temp_directory_path() / ("nnc_cpu_generic_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  auto objs = mod.value()->writeObjects((dir / "g").string(), false);
  ASSERT_TRUE(objs.isOk()) << objs.status().message();
  std::string undefined = runCommand("nm -u " + objs->front());
  EXPECT_EQ(undefined.find("__"), std::string::npos) << undefined;
  std::filesystem::remove_all(dir);
}

TEST(CpuBackend, ObjectLinksIntoSharedLibraryAndRuns) {
  // The AOT path end to end: object -> cc -shared -> dlopen -> the table -> call a kernel.
  auto mod = CpuModule::build({broadcastAdd()}, CpuTargetOptions{});
  ASSERT_TRUE(mod.isOk()) << mod.status().message();
  auto dir = std::filesystem::temp_directory_path() / ("nnc_cpu_backend_so_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string so = (dir / "k.so").string();
  auto objs = mod.value()->writeObjects((dir / "k").string(), true);
  ASSERT_TRUE(objs.isOk()) << objs.status().message();
  ASSERT_EQ(objs->size(), 1u);
  ASSERT_EQ(std::system(("cc -shared -o " + so + " " + objs->front() + " -lm").c_str()), 0);
  void* h = ::dlopen(so.c_str(), RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(h, nullptr) << ::dlerror();
  auto* table = static_cast<const NncKernelEntry*>(::dlsym(h, "nnc_model_kernels"));
  auto* count = static_cast<const int64_t*>(::dlsym(h, "nnc_model_num_kernels"));
  ASSERT_NE(table, nullptr);
  ASSERT_NE(count, nullptr);
  ASSERT_EQ(*count, 1);
  EXPECT_STREQ(table[0].name, "bcast_add");
  auto fn = reinterpret_cast<rt::KernelFn>(table[0].fn);
  std::vector<float> a(35, 1.5f), b(7), out(35, 0);
  for (int j = 0; j < 7; ++j) b[j] = static_cast<float>(j);
  void* bufs[3] = {a.data(), b.data(), out.data()};
  fn(bufs, 0, 35);
  for (int i = 0; i < 35; ++i) EXPECT_EQ(out[i], 1.5f + static_cast<float>(i % 7)) << i;
  ::dlclose(h);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace nnc::codegen
