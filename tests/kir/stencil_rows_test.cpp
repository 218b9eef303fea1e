// Register blocking of stencil rows (targets/cpu/stencil_rows.h): a channels-last 3 x 3 window kernel is
// rewritten to S pixels per point with the copies' shared loads merged, and computes bit for bit
// what the original computes (both run by the kernel-IR interpreter on random data); kernels whose
// copies would share nothing, that read what they write, or whose rows have no divisor in [2, 8] are
// left alone.
#include "targets/cpu/stencil_rows.h"

#include <gtest/gtest.h>

#include <functional>
#include <random>
#include <set>

#include "kir/interpreter.h"
#include "kir/kernel_ir.h"
#include "nnc/tensor.h"

namespace nnc {
namespace {

using kir::ExprId;

struct Stencil {
  int64_t h = 5, w = 14, c = 16, stride = 1;
  int64_t inH() const { return (h - 1) * stride + 3; }
  int64_t inW() const { return (w - 1) * stride + 3; }
};

// out[y, x, c] = bias[c] + sum over 3 x 3 taps of in[y*s + kh, x*s + kw, c] * wt[kh, kw, c] (a padded
// input, as the explicit-padding pass gives a depthwise conv), the taps in row-major order.
kir::Kernel depthwise(const Stencil& s) {
  kir::KernelBuilder kb("dw");
  const int in = kb.addParam("in", DType::F32, s.inH() * s.inW() * s.c, false);
  const int wt = kb.addParam("wt", DType::F32, 9 * s.c, false);
  const int bias = kb.addParam("bias", DType::F32, s.c, false);
  const int out = kb.addParam("out", DType::F32, s.h * s.w * s.c, true);
  const std::vector<ExprId> v = kb.setOuter({s.h, s.w, s.c});
  ExprId sum = kb.load(bias, v[2]);
  for (int64_t kh = 0; kh < 3; ++kh)
    for (int64_t kw = 0; kw < 3; ++kw) {
      const ExprId y = kb.add(kb.mul(v[0], kb.i64(s.stride)), kb.i64(kh));
      const ExprId x = kb.add(kb.mul(v[1], kb.i64(s.stride)), kb.i64(kw));
      const ExprId xi = kb.flatIndex(std::vector<ExprId>{y, x, v[2]}, Shape({s.inH(), s.inW(), s.c}));
      const ExprId wi = kb.add(kb.mul(kb.i64(kh * 3 + kw), kb.i64(s.c)), v[2]);
      sum = kb.add(sum, kb.mul(kb.load(in, xi), kb.load(wt, wi)));
    }
  kb.addStore(out, kb.flatIndex(v, Shape({s.h, s.w, s.c})), sum, /*perInner=*/false);
  return kb.finish();
}

Tensor randomTensor(int64_t n, std::mt19937& rng) {
  std::uniform_real_distribution<float> dist(-1.f, 1.f);
  std::vector<float> values(static_cast<size_t>(n));
  for (float& f : values) f = dist(rng);
  return Tensor::fromFloats(values, Shape({n}));
}

// Runs the kernel and its rewrite on the same random inputs: the outputs must be bitwise equal.
void expectSameResults(const kir::Kernel& original, const kir::Kernel& blocked) {
  std::mt19937 rng(7);
  std::vector<Tensor> tensors;
  for (const kir::Param& p : original.params) tensors.push_back(randomTensor(p.numel, rng));
  std::vector<Tensor> copies = tensors;
  for (Tensor& t : copies) t = Tensor::fromBytes(t.dtype(), t.shape(), t.data(), t.byteSize());
  std::vector<Tensor*> a, b;
  for (Tensor& t : tensors) a.push_back(&t);
  for (Tensor& t : copies) b.push_back(&t);
  ASSERT_TRUE(kir::interpret(original, a).isOk());
  ASSERT_TRUE(kir::interpret(blocked, b).isOk());
  const Tensor& x = tensors.back();
  const Tensor& y = copies.back();
  EXPECT_TRUE(x.bitwiseEqual(y));
  int64_t differing = 0;
  for (int64_t i = 0; i < x.numel(); ++i) differing += x.getDouble(i) != y.getDouble(i);
  EXPECT_EQ(differing, 0);
}

int64_t distinctLoads(const kir::Kernel& k) {
  std::set<ExprId> loads, seen;
  std::function<void(ExprId)> walk = [&](ExprId e) {
    if (e == kir::kNoExpr || !seen.insert(e).second) return;
    const kir::ExprNode& n = k.expr(e);
    if (n.op == kir::ExprOp::Load) loads.insert(e);
    walk(n.a);
    walk(n.b);
    walk(n.c);
  };
  for (const kir::Store& s : k.stores) walk(s.value);
  return static_cast<int64_t>(loads.size());
}

TEST(StencilRows, AUnitStrideWindowComputesSevenPixelsPerPointSharingItsLoads) {
  const kir::Kernel original = depthwise({});
  kir::Kernel blocked = original;
  ASSERT_EQ(kir::blockStencilRows(blocked), 7);  // 14 = 2 x 7
  EXPECT_EQ(blocked.outer.extents, (std::vector<int64_t>{5, 2, 16}));
  EXPECT_EQ(blocked.stores.size(), 7u);
  // 9 weights, one bias and 3 rows of 7 + 2 input columns, against 7 x 19 unshared.
  EXPECT_EQ(distinctLoads(blocked), 9 + 1 + 3 * 9);
  expectSameResults(original, blocked);
}

TEST(StencilRows, AStridedWindowSharesTheColumnsItsWindowsOverlapIn) {
  Stencil s;
  s.w = 8;
  s.stride = 2;
  const kir::Kernel original = depthwise(s);
  kir::Kernel blocked = original;
  ASSERT_EQ(kir::blockStencilRows(blocked), 8);
  EXPECT_EQ(blocked.outer.extents, (std::vector<int64_t>{5, 1, 16}));
  EXPECT_EQ(distinctLoads(blocked), 9 + 1 + 3 * (2 * 8 + 1));
  expectSameResults(original, blocked);
}

TEST(StencilRows, RowsWithoutASmallDivisorAndShortChannelRowsStay) {
  Stencil prime;
  prime.w = 11;
  kir::Kernel k = depthwise(prime);
  EXPECT_EQ(kir::blockStencilRows(k), 1);
  EXPECT_EQ(k.outer.extents, (std::vector<int64_t>{5, 11, 16}));
  Stencil narrow;
  narrow.c = 4;  // too short a row to vectorise: blocking would only lengthen the body
  kir::Kernel n = depthwise(narrow);
  EXPECT_EQ(kir::blockStencilRows(n), 1);
}

TEST(StencilRows, AnElementwiseKernelSharesNothingAndStays) {
  kir::KernelBuilder kb("add");
  const int x = kb.addParam("x", DType::F32, 4 * 8 * 16, false);
  const int bias = kb.addParam("bias", DType::F32, 16, false);
  const int out = kb.addParam("out", DType::F32, 4 * 8 * 16, true);
  const std::vector<ExprId> v = kb.setOuter({4, 8, 16});
  const ExprId flat = kb.flatIndex(v, Shape({4, 8, 16}));
  kb.addStore(out, flat, kb.add(kb.load(x, flat), kb.load(bias, v[2])), false);
  kir::Kernel k = kb.finish();
  const size_t exprs = k.exprs.size();
  EXPECT_EQ(kir::blockStencilRows(k), 1);
  EXPECT_EQ(k.outer.extents, (std::vector<int64_t>{4, 8, 16}));
  EXPECT_EQ(k.exprs.size(), exprs) << "a refused rewrite leaves no expressions behind";
}

TEST(StencilRows, AKernelReadingWhatItWritesStays) {
  // out[y, x, c] = out[y, x + 1, c] + 1 over a window-like read: reordering its points would change it.
  kir::KernelBuilder kb("shift");
  const int out = kb.addParam("out", DType::F32, 4 * 9 * 16, true);
  const std::vector<ExprId> v = kb.setOuter({4, 8, 16});
  const ExprId read = kb.flatIndex(std::vector<ExprId>{v[0], kb.add(v[1], kb.i64(1)), v[2]}, Shape({4, 9, 16}));
  const ExprId read2 = kb.flatIndex(std::vector<ExprId>{v[0], v[1], v[2]}, Shape({4, 9, 16}));
  kb.addStore(out, read2, kb.add(kb.load(out, read), kb.load(out, read2)), false);
  kir::Kernel k = kb.finish();
  EXPECT_EQ(kir::blockStencilRows(k), 1);
}

}  // namespace
}  // namespace nnc
