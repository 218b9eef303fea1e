// CPU backend f32 vector math (libmvec; exp as inline arithmetic, ScalarOps::inlineExpF32): accuracy
// over dense ranges against float64 std:: functions, special values, subnormal results, bitwise
// independence of how the range is split, and that the loops really call the vector variants.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "cpu_test_util.h"

namespace nnc::codegen {
namespace {

using kir::ExprId;
using kir::ExprOp;
using kir::KernelBuilder;

struct MathCase {
  ExprOp op;
  double (*ref)(double);
  double lo, hi;  // dense sample range (inside the domain)
};

const MathCase kCases[] = {
    {ExprOp::Exp, std::exp, -87, 88},    {ExprOp::Log, std::log, 1e-30, 1e30},
    {ExprOp::Sin, std::sin, -100, 100},  {ExprOp::Cos, std::cos, -100, 100},
    {ExprOp::Tan, std::tan, -1.5, 1.5},  {ExprOp::Asin, std::asin, -1, 1},
    {ExprOp::Acos, std::acos, -1, 1},    {ExprOp::Atan, std::atan, -100, 100},
    {ExprOp::Sinh, std::sinh, -80, 80},  {ExprOp::Cosh, std::cosh, -80, 80},
    {ExprOp::Tanh, std::tanh, -20, 20},  {ExprOp::Asinh, std::asinh, -1e4, 1e4},
    {ExprOp::Acosh, std::acosh, 1, 1e4}, {ExprOp::Atanh, std::atanh, -0.999, 0.999},
    {ExprOp::Erf, std::erf, -6, 6},
};

// out[i] = f(in[i]) (or pow(in[i], in2[i])) through the JIT; runChecked also compares whole, halved
// and uneven-piece runs bitwise and the interpreter within 1e-6.
Tensor runUnary(ExprOp op, const Tensor& in, const Tensor* in2 = nullptr) {
  KernelBuilder kb(std::string("vm_") + std::string(kir::exprOpName(op)));
  const int64_t n = in.numel();
  int a = kb.addParam("a", DType::F32, n, false);
  int b = in2 ? kb.addParam("b", DType::F32, n, false) : -1;
  int out = kb.addParam("out", DType::F32, n, true);
  auto v = kb.setOuter({n});
  ExprId x = kb.load(a, v[0]);
  ExprId r = in2 ? kb.binary(op, x, kb.load(b, v[0])) : kb.unary(op, x);
  kb.addStore(out, v[0], r, false);
  std::vector<Tensor> init = {in};
  if (in2) init.push_back(*in2);
  init.emplace_back(DType::F32, Shape{n});
  auto bufs = testing::runChecked(kb.finish(), init, 1e-6, 1e-37);
  return bufs.empty() ? Tensor() : bufs.back();
}

Tensor f32s(const std::vector<double>& xs) {
  Tensor t(DType::F32, Shape{static_cast<int64_t>(xs.size())});
  for (size_t i = 0; i < xs.size(); ++i) t.setDouble(static_cast<int64_t>(i), xs[i]);
  return t;
}

TEST(CpuVectorMath, DenseRangesWithin1e6OfFloat64) {
  const int n = 1 << 16;
  for (const MathCase& c : kCases) {
    std::vector<double> xs;
    for (int i = 0; i < n; ++i) xs.push_back(c.lo + (c.hi - c.lo) * i / (n - 1));
    for (double s : {0.0, -0.0, 1e-8, -1e-8, 1e-30, 0.5, -0.5, 1.0, -1.0}) xs.push_back(s);
    Tensor in = f32s(xs);
    Tensor out = runUnary(c.op, in);
    ASSERT_EQ(out.numel(), in.numel()) << kir::exprOpName(c.op);
    int bad = 0;
    for (int64_t i = 0; i < in.numel() && bad < 5; ++i) {
      const double x = in.getDouble(i);
      const double want = c.ref(x);
      if (std::isnan(want) || std::fabs(want) > std::numeric_limits<float>::max()) continue;  // outside f32
      // Absolute slack only where the function crosses zero away from x = 0 (sin, cos, tan).
      const double absTol = 1e-7 * std::max(1.0, std::fabs(x)) * (std::fabs(x) > 1 ? 1 : 1e-30);
      if (!testing::nearlyEqual(out.getDouble(i), want, 1e-6, absTol)) {
        ++bad;
        ADD_FAILURE() << kir::exprOpName(c.op) << "(" << x << "): got " << out.getDouble(i) << ", want " << want;
      }
    }
  }
}

TEST(CpuVectorMath, SpecialValues) {
  const double inf = std::numeric_limits<double>::infinity();
  const double nan = std::numeric_limits<double>::quiet_NaN();
  struct Special {
    ExprOp op;
    double x, want;
  };
  const Special cases[] = {
      {ExprOp::Exp, inf, inf},    {ExprOp::Exp, -inf, 0},    {ExprOp::Exp, 100, inf}, {ExprOp::Exp, -110, 0},
      {ExprOp::Exp, nan, nan},    {ExprOp::Log, 0, -inf},    {ExprOp::Log, -1, nan},  {ExprOp::Log, inf, inf},
      {ExprOp::Tanh, inf, 1},     {ExprOp::Tanh, -inf, -1},  {ExprOp::Tanh, 50, 1},   {ExprOp::Tanh, nan, nan},
      {ExprOp::Erf, inf, 1},      {ExprOp::Erf, -inf, -1},   {ExprOp::Erf, 10, 1},    {ExprOp::Erf, nan, nan},
      {ExprOp::Sin, inf, nan},    {ExprOp::Cos, nan, nan},   {ExprOp::Atanh, 1, inf}, {ExprOp::Atanh, 2, nan},
      {ExprOp::Sinh, -100, -inf}, {ExprOp::Cosh, -100, inf}, {ExprOp::Asin, 2, nan},  {ExprOp::Acosh, 0.5, nan},
  };
  for (const Special& s : cases) {
    // Padded to 37 elements so the value goes through both the vector body and the remainder.
    std::vector<double> xs(37, s.x);
    Tensor out = runUnary(s.op, f32s(xs));
    ASSERT_EQ(out.numel(), 37);
    for (int64_t i = 0; i < 37; ++i)
      EXPECT_TRUE(testing::nearlyEqual(out.getDouble(i), s.want, 1e-6, 1e-30))
          << kir::exprOpName(s.op) << "(" << s.x << ") element " << i << ": got " << out.getDouble(i);
  }
}

// exp down into the subnormals (e^-88 .. e^-103.9) and up to the edge of overflow: within one unit
// of the last place of the smallest subnormal below FLT_MIN, within 2e-7 relative above it.
TEST(CpuVectorMath, ExpSubnormalAndLargestResults) {
  std::vector<double> xs;
  for (int i = 0; i < 4096; ++i) xs.push_back(-103.9 + 16.0 * i / 4095);
  for (int i = 0; i < 256; ++i) xs.push_back(88.0 + 0.72 * i / 255);
  Tensor out = runUnary(ExprOp::Exp, f32s(xs));
  ASSERT_EQ(out.numel(), static_cast<int64_t>(xs.size()));
  const double smallest = std::numeric_limits<float>::denorm_min(), normal = std::numeric_limits<float>::min();
  for (int64_t i = 0; i < out.numel(); ++i) {
    const double x = static_cast<float>(xs[static_cast<size_t>(i)]), want = std::exp(x), got = out.getDouble(i);
    ASSERT_TRUE(std::isfinite(got)) << "exp(" << x << ") = " << got;
    if (want < normal)
      ASSERT_LE(std::fabs(got - want), smallest) << "exp(" << x << "): got " << got << ", want " << want;
    else
      ASSERT_LE(std::fabs(got - want), 2e-7 * want) << "exp(" << x << "): got " << got << ", want " << want;
  }
}

// The exp of a value known <= 0 (a softmax's x - max: KernelBuilder::expOfNonPositive): within 2e-7
// relative from 0 down to -87.3 (results from 1 down to FLT_MIN), exactly 0 below -87.34 and for
// -inf (never a subnormal: see KernelBuilder::expOfNonPositive), NaN for NaN; in the vector body
// and the remainder alike.
TEST(CpuVectorMath, ExpOfNonPositiveValues) {
  std::vector<double> xs;
  for (int i = 0; i < 8192; ++i) xs.push_back(-87.3 * i / 8191);
  const size_t normalEnd = xs.size();
  for (int i = 0; i < 512; ++i) xs.push_back(-87.34 - 40.0 * i / 511);
  const double inf = std::numeric_limits<double>::infinity(), nan = std::numeric_limits<double>::quiet_NaN();
  for (double special : {-inf, nan, -0.0, -1e-30}) xs.push_back(special);
  KernelBuilder kb("exp_nonpositive");
  const int64_t n = static_cast<int64_t>(xs.size());
  int a = kb.addParam("a", DType::F32, n, false);
  int out = kb.addParam("out", DType::F32, n, true);
  auto v = kb.setOuter({n});
  kb.addStore(out, v[0], kb.expOfNonPositive(kb.load(a, v[0])), false);
  auto bufs = testing::runChecked(kb.finish(), {f32s(xs), Tensor(DType::F32, Shape{n})}, 1e-6, 1e-37);
  ASSERT_EQ(bufs.size(), 2u);
  const double normal = std::numeric_limits<float>::min();
  for (size_t i = 0; i < xs.size(); ++i) {
    const double x = static_cast<float>(xs[i]), got = bufs[1].getDouble(static_cast<int64_t>(i));
    if (std::isnan(x)) {
      EXPECT_TRUE(std::isnan(got)) << "exp(NaN) = " << got;
    } else if (i < normalEnd || x > -1) {
      EXPECT_LE(std::fabs(got - std::exp(x)), 2e-7 * std::exp(x)) << "exp(" << x << "): got " << got;
    } else if (x < -87.33654) {
      EXPECT_EQ(got, 0.0) << "exp(" << x << ")";
    } else {
      EXPECT_TRUE(got >= 0 && got <= normal * (1 + 1e-5)) << "exp(" << x << "): got " << got;
    }
  }
}

// pow stays scalar libm (see vectorMathFunctions); still checked next to the vectorised ones.
TEST(CpuVectorMath, PowWithTensorExponent) {
  std::vector<double> xs, ys;
  for (int i = 0; i < 4099; ++i) {
    xs.push_back(0.01 + 0.025 * i);
    ys.push_back(-4 + 8.0 * ((i * 37) % 101) / 100);
  }
  Tensor x = f32s(xs), y = f32s(ys);
  Tensor out = runUnary(ExprOp::Pow, x, &y);
  ASSERT_EQ(out.numel(), x.numel());
  for (int64_t i = 0; i < x.numel(); ++i) {
    const double want = std::pow(x.getDouble(i), y.getDouble(i));
    if (want > std::numeric_limits<float>::max()) continue;
    EXPECT_TRUE(testing::nearlyEqual(out.getDouble(i), want, 1e-6, 1e-37))
        << "pow(" << x.getDouble(i) << ", " << y.getDouble(i) << "): got " << out.getDouble(i);
  }
}

// A tanh-GELU-like chain over a loop: with vector math the optimised IR calls the libmvec
// variants; without it, scalar libm.
kir::Kernel geluKernel() {
  KernelBuilder kb("gelu_like");
  const int64_t n = 1024;
  int a = kb.addParam("a", DType::F32, n, false);
  int out = kb.addParam("out", DType::F32, n, true);
  auto v = kb.setOuter({n});
  ExprId x = kb.load(a, v[0]);
  ExprId t = kb.unary(ExprOp::Tanh, kb.binary(ExprOp::Mul, x, kb.constant(DType::F32, 0.79788456)));
  ExprId e = kb.unary(ExprOp::Erf, x);
  kb.addStore(out, v[0], kb.binary(ExprOp::Add, kb.binary(ExprOp::Mul, x, t), e), false);
  return kb.finish();
}

TEST(CpuVectorMath, LoopsCallTheVectorVariants) {
  auto on = CpuModule::build({geluKernel()}, CpuTargetOptions{});
  ASSERT_TRUE(on.isOk()) << on.status().message();
  const std::string ir = on.value()->llvmIr();
  EXPECT_NE(ir.find("_ZGV"), std::string::npos) << ir;
  EXPECT_NE(ir.find("_tanhf("), std::string::npos) << ir;
  EXPECT_NE(ir.find("_erff("), std::string::npos) << ir;

  CpuTargetOptions scalar;
  scalar.vectorMath = false;
  auto off = CpuModule::build({geluKernel()}, scalar);
  ASSERT_TRUE(off.isOk()) << off.status().message();
  const std::string offIr = off.value()->llvmIr();
  EXPECT_EQ(offIr.find("_ZGV"), std::string::npos) << offIr;
  EXPECT_NE(offIr.find("@tanhf("), std::string::npos) << offIr;
}

TEST(CpuVectorMath, AgreesWithScalarLibmWithin1e6) {
  // The same kernel with and without vector math, on a range where GELU-style inputs live.
  std::vector<double> xs;
  for (int i = 0; i < 1024; ++i) xs.push_back(-8 + 16.0 * i / 1023);
  std::vector<Tensor> results;
  for (bool vm : {true, false}) {
    CpuTargetOptions opts;
    opts.vectorMath = vm;
    auto mod = CpuModule::build({geluKernel()}, opts);
    ASSERT_TRUE(mod.isOk()) << mod.status().message();
    auto jit = mod.value()->jit();
    ASSERT_TRUE(jit.isOk()) << jit.status().message();
    auto fn = jit.value()->lookup("gelu_like");
    ASSERT_TRUE(fn.isOk());
    std::vector<Tensor> bufs = {f32s(xs), Tensor(DType::F32, Shape{1024})};
    testing::callInPieces(fn.value(), bufs, {0, 1024});
    results.push_back(bufs[1]);
  }
  // Absolute slack: x * tanh(..) + erf(x) cancels near x = -1.2 (terms of size ~1, sum ~0.007).
  testing::expectTensorsNear(results[0], results[1], 1e-6, 1e-6, "vector vs scalar math");
}

}  // namespace
}  // namespace nnc::codegen
