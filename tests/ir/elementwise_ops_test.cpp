// Tests for the elementwise op definitions (ir/ops/elementwise.cpp): type/shape inference,
// diagnostics, and values through the reference evaluator against numpy results or float64 formulas.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <numbers>
#include <string>
#include <vector>

#include "ir/builder.h"
#include "ir/reference.h"

namespace nnc {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

Tensor tensorOf(DType t, Shape s, const std::vector<double>& values) {
  Tensor x(t, std::move(s));
  EXPECT_EQ(x.numel(), static_cast<int64_t>(values.size()));
  for (size_t i = 0; i < values.size(); ++i) x.setDouble(static_cast<int64_t>(i), values[i]);
  return x;
}

Attributes attrs(std::vector<std::pair<std::string, AttrValue>> list) {
  Attributes a;
  for (auto& [name, value] : list) a.set(name, std::move(value));
  return a;
}

// Builds a one-node graph whose inputs have the given tensors' types and runs it. Returns a null
// tensor (after a test failure) when building or evaluating fails.
Tensor runOp(OpKind op, const std::vector<Tensor>& inputs, Attributes a = {}) {
  Graph g;
  GraphBuilder b(g);
  b.setFolding(false);
  std::vector<Value*> ins;
  for (size_t i = 0; i < inputs.size(); ++i)
    ins.push_back(b.input("in" + std::to_string(i), inputs[i].dtype(), inputs[i].shape()));
  b.output(b.op(op, ins, std::move(a), "n"));
  EXPECT_TRUE(b.status().isOk()) << b.status().message();
  if (!b.status().isOk()) return Tensor();
  auto result = evaluateGraph(g, inputs);
  EXPECT_TRUE(result.isOk()) << result.status().message();
  if (!result.isOk()) return Tensor();
  return result.value().at(0);
}

// The builder's diagnostic for creating `op` on inputs of these types (empty when it succeeds).
std::string buildError(OpKind op, const std::vector<std::pair<DType, Shape>>& inputs, Attributes a = {}) {
  Graph g;
  GraphBuilder b(g);
  b.setFolding(false);
  std::vector<Value*> ins;
  for (size_t i = 0; i < inputs.size(); ++i)
    ins.push_back(b.input("in" + std::to_string(i), inputs[i].first, inputs[i].second));
  b.op(op, ins, std::move(a), "n");
  return b.status().message();
}

// Equal up to `tol` relative to max(1, |expected|); NaN matches NaN, infinities match exactly.
void expectValues(const Tensor& t, DType dtype, const Shape& shape, const std::vector<double>& expected,
                  double tol = 0) {
  ASSERT_FALSE(t.isNull());
  EXPECT_EQ(t.dtype(), dtype);
  ASSERT_EQ(t.shape(), shape);
  std::vector<double> got = t.toDoubles();
  ASSERT_EQ(got.size(), expected.size());
  for (size_t i = 0; i < got.size(); ++i) {
    double e = expected[i];
    if (std::isnan(e)) {
      EXPECT_TRUE(std::isnan(got[i])) << "at " << i << ": got " << got[i];
    } else if (std::isinf(e)) {
      EXPECT_EQ(got[i], e) << "at " << i;
    } else {
      EXPECT_NEAR(got[i], e, tol * std::max(1.0, std::abs(e))) << "at " << i;
    }
  }
}

TEST(ElementwiseOps, AddBroadcastsRowAcrossMatrix) {
  Tensor a = tensorOf(DType::F32, {2, 3}, {1, 2, 3, 4, 5, 6});
  Tensor b = tensorOf(DType::F32, {3}, {10, 20, 30});
  expectValues(runOp(OpKind::Add, {a, b}), DType::F32, {2, 3}, {11, 22, 33, 14, 25, 36});
}

TEST(ElementwiseOps, SubMulBroadcastColumn) {
  Tensor a = tensorOf(DType::I64, {2, 2}, {1, 2, 3, 4});
  Tensor b = tensorOf(DType::I64, {2, 1}, {10, -1});
  expectValues(runOp(OpKind::Sub, {a, b}), DType::I64, {2, 2}, {-9, -8, 4, 5});
  expectValues(runOp(OpKind::Mul, {a, b}), DType::I64, {2, 2}, {10, 20, -3, -4});
}

TEST(ElementwiseOps, IntegerDivTruncatesTowardZero) {
  Tensor a = tensorOf(DType::I32, {5}, {7, -7, 7, -7, 0});
  Tensor b = tensorOf(DType::I32, {5}, {2, 2, -2, -2, 3});
  expectValues(runOp(OpKind::Div, {a, b}), DType::I32, {5}, {3, -3, -3, 3, 0});
}

TEST(ElementwiseOps, ModIntegerBothModes) {
  Tensor a = tensorOf(DType::I64, {5}, {5, -5, 5, -5, 7});
  Tensor b = tensorOf(DType::I64, {5}, {3, 3, -3, -3, 7});
  // numpy: np.mod and np.fmod
  expectValues(runOp(OpKind::Mod, {a, b}), DType::I64, {5}, {2, 1, -1, -2, 0});
  expectValues(runOp(OpKind::Mod, {a, b}, attrs({{"fmod", int64_t{1}}})), DType::I64, {5}, {2, -2, 2, -2, 0});
}

TEST(ElementwiseOps, ModFloatBothModes) {
  Tensor a = tensorOf(DType::F32, {4}, {5.5, -5.5, 5.5, -5.5});
  Tensor b = tensorOf(DType::F32, {4}, {2, 2, -2, -2});
  expectValues(runOp(OpKind::Mod, {a, b}, attrs({{"fmod", int64_t{1}}})), DType::F32, {4}, {1.5, -1.5, 1.5, -1.5});
  expectValues(runOp(OpKind::Mod, {a, b}), DType::F32, {4}, {1.5, 0.5, -0.5, -1.5});
}

TEST(ElementwiseOps, PowIntegerBaseFloatExponentKeepsBaseType) {
  Tensor base = tensorOf(DType::I64, {4}, {2, 3, 4, -2});
  Tensor exponent = tensorOf(DType::F32, {4}, {3, 0.5, -1, 2});
  // numpy: (base ** exponent).astype(np.int64)
  expectValues(runOp(OpKind::Pow, {base, exponent}), DType::I64, {4}, {8, 1, 0, 4});
}

TEST(ElementwiseOps, PowFloatBaseIntegerExponent) {
  Tensor base = tensorOf(DType::F32, {3}, {1.5, 2, -3});
  Tensor exponent = tensorOf(DType::I32, {}, {3});
  expectValues(runOp(OpKind::Pow, {base, exponent}), DType::F32, {3}, {3.375, 8, -27});
}

TEST(ElementwiseOps, CastF32ToF16RoundsToNearestEven) {
  Tensor x = tensorOf(DType::F32, {8}, {1 + 0x1p-11, 1 + 3 * 0x1p-11, 0.1, 65520, 65519, -70000, 1e-8, 3e-5});
  Tensor h = runOp(OpKind::Cast, {x}, attrs({{"to", int64_t{10}}}));
  ASSERT_FALSE(h.isNull());
  EXPECT_EQ(h.dtype(), DType::F16);
  // numpy: x.astype(np.float16).astype(np.float32)
  expectValues(runOp(OpKind::Cast, {h}, attrs({{"to", int64_t{1}}})), DType::F32, {8},
               {1.0, 1.001953125, 0.0999755859375, kInf, 65504.0, -kInf, 0.0, 2.9981136322021484e-05});
}

TEST(ElementwiseOps, CastFloatToIntTruncatesAndToBoolTestsNonZero) {
  Tensor x = tensorOf(DType::F32, {5}, {2.7, -2.7, 0.5, -0.5, -1.9});
  expectValues(runOp(OpKind::Cast, {x}, attrs({{"to", int64_t{6}}})), DType::I32, {5}, {2, -2, 0, 0, -1});
  Tensor y = tensorOf(DType::F32, {4}, {0, -0.0, 0.5, kNaN});
  expectValues(runOp(OpKind::Cast, {y}, attrs({{"to", int64_t{9}}})), DType::Bool, {4}, {0, 0, 1, 1});
  Tensor z = tensorOf(DType::Bool, {2}, {1, 0});
  expectValues(runOp(OpKind::Cast, {z}, attrs({{"to", int64_t{11}}})), DType::F64, {2}, {1, 0});
}

TEST(ElementwiseOps, HalfInputsComputeInF32AndRoundOnStore) {
  Tensor x = tensorOf(DType::F16, {2}, {1, 0});
  // numpy: np.float16(np.exp(np.float32(1))) == 2.71875
  expectValues(runOp(OpKind::Exp, {x}), DType::F16, {2}, {2.71875, 1});
}

TEST(ElementwiseOps, WhereBroadcastsAllThreeInputs) {
  Tensor cond = tensorOf(DType::Bool, {2, 1}, {1, 0});
  Tensor x = tensorOf(DType::F32, {3}, {1, 2, 3});
  Tensor y = tensorOf(DType::F32, {}, {9});
  expectValues(runOp(OpKind::Where, {cond, x, y}), DType::F32, {2, 3}, {1, 2, 3, 9, 9, 9});
}

// Runs Clip with the bounds given (nullopt omits that input).
Tensor runClip(const Tensor& x, std::optional<double> lo, std::optional<double> hi) {
  Graph g;
  Value* in = g.addInput("x", x.dtype(), x.shape());
  Value* min = lo ? g.addConstant("min", tensorOf(x.dtype(), {}, {*lo})) : nullptr;
  Value* max = hi ? g.addConstant("max", tensorOf(x.dtype(), {}, {*hi})) : nullptr;
  Node* n = g.addNode(OpKind::Clip, "clip", {in, min, max}, 1);
  Status s = inferNode(*n);
  EXPECT_TRUE(s.isOk()) << s.message();
  g.addOutput(n->output(0));
  auto result = evaluateGraph(g, {x});
  EXPECT_TRUE(result.isOk()) << result.status().message();
  return result.isOk() ? result.value().at(0) : Tensor();
}

TEST(ElementwiseOps, ClipWithOnlyMax) {
  Tensor x = tensorOf(DType::F32, {4}, {-5, 0, 5, kNaN});
  expectValues(runClip(x, std::nullopt, 2.0), DType::F32, {4}, {-5, 0, 2, kNaN});
}

TEST(ElementwiseOps, ClipIntegersBothBoundsAndMinOnly) {
  Tensor x = tensorOf(DType::I32, {4}, {-5, 0, 3, 9});
  expectValues(runClip(x, -1.0, 4.0), DType::I32, {4}, {-1, 0, 3, 4});
  expectValues(runClip(x, 1.0, std::nullopt), DType::I32, {4}, {1, 1, 3, 9});
  // ONNX: min > max sets every element to max.
  expectValues(runClip(x, 5.0, 2.0), DType::I32, {4}, {2, 2, 2, 2});
}

TEST(ElementwiseOps, GeluExactAndTanhApproximation) {
  std::vector<double> xs = {-3, -1, -0.5, 0, 0.5, 1, 3};
  Tensor x = tensorOf(DType::F64, {7}, xs);
  std::vector<double> exact, approx;
  for (double v : xs) {
    exact.push_back(0.5 * v * (1 + std::erf(v / std::sqrt(2.0))));
    approx.push_back(0.5 * v * (1 + std::tanh(std::sqrt(2 / std::numbers::pi) * (v + 0.044715 * v * v * v))));
  }
  expectValues(runOp(OpKind::Gelu, {x}), DType::F64, {7}, exact, 1e-14);
  expectValues(runOp(OpKind::Gelu, {x}, attrs({{"approximate", std::string("tanh")}})), DType::F64, {7}, approx, 1e-14);
  // The two differ noticeably at -1 (-0.15865525 vs -0.15880801), so the attribute is honoured.
  EXPECT_GT(std::abs(exact[1] - approx[1]), 1e-4);
}

TEST(ElementwiseOps, IsInfDetectFlagsAndIsNaN) {
  Tensor x = tensorOf(DType::F32, {4}, {kInf, -kInf, kNaN, 1});
  expectValues(runOp(OpKind::IsInf, {x}), DType::Bool, {4}, {1, 1, 0, 0});
  expectValues(runOp(OpKind::IsInf, {x}, attrs({{"detect_negative", int64_t{0}}})), DType::Bool, {4}, {1, 0, 0, 0});
  expectValues(runOp(OpKind::IsInf, {x}, attrs({{"detect_positive", int64_t{0}}})), DType::Bool, {4}, {0, 1, 0, 0});
  expectValues(runOp(OpKind::IsNaN, {x}), DType::Bool, {4}, {0, 0, 1, 0});
}

TEST(ElementwiseOps, SumMeanOfThreeBroadcastInputs) {
  Tensor a = tensorOf(DType::F32, {2, 2}, {1, 2, 3, 4});
  Tensor b = tensorOf(DType::F32, {2}, {10, 20});
  Tensor c = tensorOf(DType::F32, {}, {100});
  expectValues(runOp(OpKind::Sum, {a, b, c}), DType::F32, {2, 2}, {111, 122, 113, 124});
  expectValues(runOp(OpKind::Mean, {a, b, c}), DType::F32, {2, 2}, {37, 122.0 / 3, 113.0 / 3, 124.0 / 3}, 1e-6);
  expectValues(runOp(OpKind::Sum, {a}), DType::F32, {2, 2}, {1, 2, 3, 4});
}

TEST(ElementwiseOps, MaxMinPropagateNaNAndWorkOnInts) {
  Tensor a = tensorOf(DType::F32, {3}, {1, kNaN, 3});
  Tensor b = tensorOf(DType::F32, {3}, {2, 2, kNaN});
  expectValues(runOp(OpKind::Max, {a, b}), DType::F32, {3}, {2, kNaN, kNaN});
  Tensor c = tensorOf(DType::I8, {3}, {-3, 4, 0});
  Tensor d = tensorOf(DType::I8, {}, {1});
  expectValues(runOp(OpKind::Min, {c, d}), DType::I8, {3}, {-3, 1, 0});
}

TEST(ElementwiseOps, ComparisonsAndLogic) {
  Tensor a = tensorOf(DType::I32, {2, 2}, {1, 2, 3, 4});
  Tensor b = tensorOf(DType::I32, {2}, {2, 3});
  expectValues(runOp(OpKind::Less, {a, b}), DType::Bool, {2, 2}, {1, 1, 0, 0});
  expectValues(runOp(OpKind::LessOrEqual, {a, b}), DType::Bool, {2, 2}, {1, 1, 0, 0});
  expectValues(runOp(OpKind::Greater, {a, b}), DType::Bool, {2, 2}, {0, 0, 1, 1});
  expectValues(runOp(OpKind::GreaterOrEqual, {a, b}), DType::Bool, {2, 2}, {0, 0, 1, 1});
  expectValues(runOp(OpKind::Equal, {a, b}), DType::Bool, {2, 2}, {0, 0, 0, 0});
  Tensor p = tensorOf(DType::Bool, {4}, {0, 0, 1, 1});
  Tensor q = tensorOf(DType::Bool, {4}, {0, 1, 0, 1});
  expectValues(runOp(OpKind::Equal, {p, q}), DType::Bool, {4}, {1, 0, 0, 1});
  expectValues(runOp(OpKind::And, {p, q}), DType::Bool, {4}, {0, 0, 0, 1});
  expectValues(runOp(OpKind::Or, {p, q}), DType::Bool, {4}, {0, 1, 1, 1});
  expectValues(runOp(OpKind::Xor, {p, q}), DType::Bool, {4}, {0, 1, 1, 0});
  expectValues(runOp(OpKind::Not, {p}), DType::Bool, {4}, {1, 1, 0, 0});
}

TEST(ElementwiseOps, BitwiseOpsAndShifts) {
  Tensor a = tensorOf(DType::I32, {3}, {0, 5, -1});
  expectValues(runOp(OpKind::BitwiseNot, {a}), DType::I32, {3}, {-1, -6, 0});
  Tensor b = tensorOf(DType::I32, {3}, {6, 3, 12});
  expectValues(runOp(OpKind::BitwiseAnd, {a, b}), DType::I32, {3}, {0, 1, 12});
  expectValues(runOp(OpKind::BitwiseOr, {a, b}), DType::I32, {3}, {6, 7, -1});
  expectValues(runOp(OpKind::BitwiseXor, {a, b}), DType::I32, {3}, {6, 6, -13});
  // numpy: np.left_shift / np.right_shift on uint8
  Tensor x = tensorOf(DType::U8, {3}, {1, 2, 255});
  Tensor s = tensorOf(DType::U8, {3}, {1, 7, 1});
  expectValues(runOp(OpKind::BitShift, {x, s}, attrs({{"direction", std::string("LEFT")}})), DType::U8, {3},
               {2, 0, 254});
  Tensor y = tensorOf(DType::U8, {3}, {16, 255, 1});
  Tensor t = tensorOf(DType::U8, {3}, {2, 7, 1});
  expectValues(runOp(OpKind::BitShift, {y, t}, attrs({{"direction", std::string("RIGHT")}})), DType::U8, {3},
               {4, 1, 0});
}

TEST(ElementwiseOps, PReluSlopeBroadcastsOntoInput) {
  Tensor x = tensorOf(DType::F32, {2, 3}, {-1, 2, -3, 4, -5, 0});
  Tensor slope = tensorOf(DType::F32, {3}, {0.5, 2, 0.25});
  expectValues(runOp(OpKind::PRelu, {x, slope}), DType::F32, {2, 3}, {-0.5, 2, -0.75, 4, -10, 0});
}

TEST(ElementwiseOps, IntegerAbsNegSignRelu) {
  Tensor x = tensorOf(DType::I64, {4}, {-7, 0, 3, -1});
  expectValues(runOp(OpKind::Abs, {x}), DType::I64, {4}, {7, 0, 3, 1});
  expectValues(runOp(OpKind::Neg, {x}), DType::I64, {4}, {7, 0, -3, 1});
  expectValues(runOp(OpKind::Sign, {x}), DType::I64, {4}, {-1, 0, 1, -1});
  expectValues(runOp(OpKind::Relu, {x}), DType::I64, {4}, {0, 0, 3, 0});
  Tensor u = tensorOf(DType::U8, {2}, {200, 0});
  expectValues(runOp(OpKind::Abs, {u}), DType::U8, {2}, {200, 0});
  expectValues(runOp(OpKind::Sign, {u}), DType::U8, {2}, {1, 0});
}

TEST(ElementwiseOps, IdentityKeepsEveryType) {
  Tensor b = tensorOf(DType::Bool, {2}, {1, 0});
  expectValues(runOp(OpKind::Identity, {b}), DType::Bool, {2}, {1, 0});
  Tensor h = tensorOf(DType::BF16, {2}, {1.5, -2});
  expectValues(runOp(OpKind::Identity, {h}), DType::BF16, {2}, {1.5, -2});
}

TEST(ElementwiseOps, RoundIsHalfToEven) {
  Tensor x = tensorOf(DType::F32, {6}, {0.5, 1.5, 2.5, -0.5, -1.5, 2.4});
  // numpy: np.round
  expectValues(runOp(OpKind::Round, {x}), DType::F32, {6}, {0, 2, 2, -0.0, -2, 2});
}

// Every float unary op against its float64 formula.
struct UnaryCase {
  OpKind op;
  Attributes attrs;
  std::function<double(double)> f;
};

TEST(ElementwiseOps, UnaryFloatOpsMatchFloat64Formulas) {
  auto sigmoid = [](double x) { return 1 / (1 + std::exp(-x)); };
  auto softplus = [](double x) { return std::log1p(std::exp(x)); };
  const double seluAlpha = 1.67326319217681884765625, seluGamma = 1.05070102214813232421875;
  std::vector<UnaryCase> cases = {
      {OpKind::Abs, {}, [](double x) { return std::abs(x); }},
      {OpKind::Neg, {}, [](double x) { return -x; }},
      {OpKind::Exp, {}, [](double x) { return std::exp(x); }},
      {OpKind::Reciprocal, {}, [](double x) { return 1 / x; }},
      {OpKind::Floor, {}, [](double x) { return std::floor(x); }},
      {OpKind::Ceil, {}, [](double x) { return std::ceil(x); }},
      {OpKind::Sign, {}, [](double x) { return x > 0   ? 1.0
                                               : x < 0 ? -1.0
                                                       : 0.0; }},
      {OpKind::Sin, {}, [](double x) { return std::sin(x); }},
      {OpKind::Cos, {}, [](double x) { return std::cos(x); }},
      {OpKind::Tan, {}, [](double x) { return std::tan(x); }},
      {OpKind::Atan, {}, [](double x) { return std::atan(x); }},
      {OpKind::Sinh, {}, [](double x) { return std::sinh(x); }},
      {OpKind::Cosh, {}, [](double x) { return std::cosh(x); }},
      {OpKind::Tanh, {}, [](double x) { return std::tanh(x); }},
      {OpKind::Asinh, {}, [](double x) { return std::asinh(x); }},
      {OpKind::Erf, {}, [](double x) { return std::erf(x); }},
      {OpKind::Relu, {}, [](double x) { return std::max(x, 0.0); }},
      {OpKind::LeakyRelu, {}, [](double x) { return x < 0 ? 0.01 * x : x; }},
      {OpKind::LeakyRelu, attrs({{"alpha", 0.3}}), [](double x) { return x < 0 ? 0.3 * x : x; }},
      {OpKind::Elu, {}, [](double x) { return x < 0 ? std::exp(x) - 1 : x; }},
      {OpKind::Elu, attrs({{"alpha", 2.0}}), [](double x) { return x < 0 ? 2 * (std::exp(x) - 1) : x; }},
      {OpKind::Selu,
       {},
       [=](double x) { return x <= 0 ? seluGamma * (seluAlpha * std::exp(x) - seluAlpha) : seluGamma * x; }},
      {OpKind::Celu, attrs({{"alpha", 2.0}}),
       [](double x) { return std::max(0.0, x) + std::min(0.0, 2 * (std::exp(x / 2) - 1)); }},
      {OpKind::ThresholdedRelu, {}, [](double x) { return x > 1 ? x : 0; }},
      {OpKind::Sigmoid, {}, sigmoid},
      {OpKind::HardSigmoid, {}, [](double x) { return std::clamp(0.2 * x + 0.5, 0.0, 1.0); }},
      {OpKind::HardSigmoid, attrs({{"alpha", 0.5}, {"beta", 0.25}}),
       [](double x) { return std::clamp(0.5 * x + 0.25, 0.0, 1.0); }},
      {OpKind::HardSwish, {}, [](double x) { return x * std::clamp(x / 6 + 0.5, 0.0, 1.0); }},
      {OpKind::Softplus, {}, softplus},
      {OpKind::Softsign, {}, [](double x) { return x / (1 + std::abs(x)); }},
      {OpKind::Mish, {}, [=](double x) { return x * std::tanh(softplus(x)); }},
      {OpKind::Shrink, {}, [](double x) { return x < -0.5  ? x
                                                 : x > 0.5 ? x
                                                           : 0; }},
      {OpKind::Shrink, attrs({{"bias", 1.5}, {"lambd", 1.0}}),
       [](double x) { return x < -1  ? x + 1.5
                             : x > 1 ? x - 1.5
                                     : 0; }},
  };
  const std::vector<double> xs = {-4, -1.5, -0.5, -0.25, 0.25, 0.75, 1.5, 3};
  for (const UnaryCase& c : cases) {
    SCOPED_TRACE(std::string(opName(c.op)));
    std::vector<double> expected;
    for (double x : xs) expected.push_back(c.f(x));
    expectValues(runOp(c.op, {tensorOf(DType::F64, {8}, xs)}, c.attrs), DType::F64, {8}, expected, 1e-12);
    // f32: same formulas, f32 precision.
    expectValues(runOp(c.op, {tensorOf(DType::F32, {8}, xs)}, c.attrs), DType::F32, {8}, expected, 2e-6);
  }
  // Domain-restricted ops on their domains.
  std::vector<UnaryCase> restricted = {
      {OpKind::Log, {}, [](double x) { return std::log(x); }},
      {OpKind::Sqrt, {}, [](double x) { return std::sqrt(x); }},
      {OpKind::Asin, {}, [](double x) { return std::asin(x / 4); }},
      {OpKind::Acos, {}, [](double x) { return std::acos(x / 4); }},
      {OpKind::Atanh, {}, [](double x) { return std::atanh(x / 4); }},
  };
  const std::vector<double> positive = {0.25, 0.5, 1, 2, 3.5};
  for (const UnaryCase& c : restricted) {
    SCOPED_TRACE(std::string(opName(c.op)));
    bool quarter = c.op == OpKind::Asin || c.op == OpKind::Acos || c.op == OpKind::Atanh;
    std::vector<double> in, expected;
    for (double x : positive) {
      in.push_back(quarter ? x / 4 : x);
      expected.push_back(c.f(x));
    }
    expectValues(runOp(c.op, {tensorOf(DType::F64, {5}, in)}), DType::F64, {5}, expected, 1e-12);
  }
  std::vector<double> big = {1, 1.5, 2, 10};
  std::vector<double> acosh;
  for (double x : big) acosh.push_back(std::acosh(x));
  expectValues(runOp(OpKind::Acosh, {tensorOf(DType::F64, {4}, big)}), DType::F64, {4}, acosh, 1e-12);
}

TEST(ElementwiseOps, SoftplusDoesNotOverflowForLargeInputs) {
  Tensor x = tensorOf(DType::F32, {3}, {100, -100, 0});
  expectValues(runOp(OpKind::Softplus, {x}), DType::F32, {3}, {100, 3.720075976020836e-44, std::log(2.0)}, 1e-6);
}

TEST(ElementwiseOps, OutputTypesAndShapes) {
  Graph g;
  GraphBuilder b(g);
  b.setFolding(false);
  Value* x = b.input("x", DType::F16, {4, 1, 3});
  Value* y = b.input("y", DType::F16, {5, 1});
  Value* sum = b.add(x, y);
  Value* eq = b.op(OpKind::Equal, {x, y});
  Value* cast = b.op(OpKind::Cast, {x}, attrs({{"to", int64_t{7}}}));
  ASSERT_TRUE(b.status().isOk()) << b.status().message();
  EXPECT_EQ(sum->dtype(), DType::F16);
  EXPECT_EQ(sum->shape(), Shape({4, 5, 3}));
  EXPECT_EQ(eq->dtype(), DType::Bool);
  EXPECT_EQ(eq->shape(), Shape({4, 5, 3}));
  EXPECT_EQ(cast->dtype(), DType::I64);
  EXPECT_EQ(cast->shape(), Shape({4, 1, 3}));
}

TEST(ElementwiseOps, TypeErrorsNameTheInput) {
  EXPECT_EQ(buildError(OpKind::Add, {{DType::F32, {2}}, {DType::I64, {2}}}),
            "node 'n' (Add): input 1 has type i64, expected f32 like input 0");
  EXPECT_EQ(buildError(OpKind::Sqrt, {{DType::I32, {2}}}),
            "node 'n' (Sqrt): input 0 has type i32, expected a float type");
  EXPECT_EQ(buildError(OpKind::And, {{DType::F32, {2}}, {DType::F32, {2}}}),
            "node 'n' (And): input 0 has type f32, expected bool");
  EXPECT_EQ(
      buildError(OpKind::BitShift, {{DType::I32, {2}}, {DType::I32, {2}}}, attrs({{"direction", std::string("LEFT")}})),
      "node 'n' (BitShift): input 0 has type i32, expected an unsigned integer type");
  EXPECT_EQ(buildError(OpKind::Where, {{DType::Bool, {2}}, {DType::F32, {2}}, {DType::I64, {2}}}),
            "node 'n' (Where): input 2 has type i64, expected f32 like input 1");
  EXPECT_EQ(buildError(OpKind::Where, {{DType::I32, {2}}, {DType::F32, {2}}, {DType::F32, {2}}}),
            "node 'n' (Where): input 0 has type i32, expected bool");
  EXPECT_EQ(buildError(OpKind::Mean, {{DType::I32, {2}}}),
            "node 'n' (Mean): input 0 has type i32, expected a float type");
}

TEST(ElementwiseOps, AttributeErrors) {
  EXPECT_EQ(buildError(OpKind::Gelu, {{DType::F32, {2}}}, attrs({{"approximate", std::string("fast")}})),
            "node 'n' (Gelu): attribute 'approximate' is \"fast\", expected \"none\" or \"tanh\"");
  EXPECT_EQ(
      buildError(OpKind::BitShift, {{DType::U8, {2}}, {DType::U8, {2}}}, attrs({{"direction", std::string("UP")}})),
      "node 'n' (BitShift): attribute 'direction' is \"UP\", expected \"LEFT\" or \"RIGHT\"");
  EXPECT_EQ(buildError(OpKind::Cast, {{DType::F32, {2}}}, attrs({{"to", int64_t{8}}})),
            "node 'n' (Cast): attribute 'to' is 8, which is not a supported dtype");
}

TEST(ElementwiseOps, BroadcastErrors) {
  EXPECT_EQ(buildError(OpKind::Add, {{DType::F32, {2, 3}}, {DType::F32, {4}}}),
            "node 'n' (Add): cannot broadcast shapes [2x3] and [4]");
  EXPECT_EQ(buildError(OpKind::Where, {{DType::Bool, {2, 1}}, {DType::F32, {3}}, {DType::F32, {2}}}),
            "node 'n' (Where): cannot broadcast shapes [2x3] and [2]");
  // PRelu's slope must broadcast onto X without growing it.
  EXPECT_EQ(buildError(OpKind::PRelu, {{DType::F32, {3}}, {DType::F32, {2, 3}}}),
            "node 'n' (PRelu): input 1 of shape [2x3] does not broadcast to input 0's shape [3]");
}

}  // namespace
}  // namespace nnc
