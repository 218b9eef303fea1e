// canonicalize as text: constants second in commutative ops; Pow by the exponents with a cheaper
// form, Div(1, x) and Sub(0, x) rewritten; the other exponents, broadcasts and near misses left alone;
// and the rewritten graphs compute what the originals do, the reference evaluator of the original ops
// (checked against the ONNX backend data) the oracle.
#include <cmath>
#include <random>

#include "ir/reference.h"
#include "tests/passes/pass_test_util.h"

namespace nnc::passes {
namespace {

using testing::PassResult;

// `op` of %x [2x3] and a scalar constant `c` of value `value`, in the given order.
std::string binary(const std::string& op, bool constantFirst, const std::string& xShape = "2x3") {
  const std::string operands = constantFirst ? "%c, %x" : "%x, %c";
  return "graph(%x: f32[" + xShape + "], %c: f32[]) -> (%y: f32[" + xShape + "]) {\n  %y = " + op + "(" + operands +
         ") : f32[" + xShape + "]\n}\n";
}

PassResult run(const std::string& text, double c) {
  return testing::runPassWithConstants(canonicalize, text, {{"c", c}});
}

TEST(Canonicalize, ConstantsGoSecondInCommutativeOps) {
  for (const char* op : {"Add", "Mul", "Max", "Min"}) {
    PassResult r = run(binary(op, /*constantFirst=*/true), 2);
    ASSERT_TRUE(r.ok && r.changed) << op << ": " << r.text;
    EXPECT_NE(r.text.find(std::string("%y = ") + op + "(%x, %c_const)"), std::string::npos) << r.text;
    PassResult second = run(binary(op, /*constantFirst=*/false), 2);
    ASSERT_TRUE(second.ok) << second.text;
    EXPECT_FALSE(second.changed) << op << ": " << second.text;
  }
  // Sub and Div do not commute.
  for (const char* op : {"Sub", "Div"}) {
    PassResult r = run(binary(op, /*constantFirst=*/true), 2);
    ASSERT_TRUE(r.ok) << r.text;
    EXPECT_FALSE(r.changed) << op << ": " << r.text;
  }
}

TEST(Canonicalize, PowByAConstantExponent) {
  const std::vector<std::pair<double, std::vector<std::string>>> cases = {
      {1, {"= Identity(%x)"}}, {2, {"= Mul(%x, %x)"}},     {3, {"= Mul(%x, %x)", "= Mul(%y_1_out0, %x)"}},
      {0.5, {"= Sqrt(%x)"}},   {-1, {"= Reciprocal(%x)"}}, {-0.5, {"= Sqrt(%x)", "= Reciprocal(%y_1_out0)"}},
  };
  for (const auto& [exponent, lines] : cases) {
    PassResult r = run(binary("Pow", false), exponent);
    ASSERT_TRUE(r.ok && r.changed) << exponent << ": " << r.text;
    EXPECT_EQ(r.text.find("Pow("), std::string::npos) << r.text;
    for (const std::string& line : lines) EXPECT_NE(r.text.find(line), std::string::npos) << line << " in\n" << r.text;
  }
  for (double exponent : {2.5, 4.0, 0.0, -2.0}) {
    PassResult r = run(binary("Pow", false), exponent);
    ASSERT_TRUE(r.ok) << r.text;
    EXPECT_FALSE(r.changed) << exponent << ": " << r.text;
  }
}

TEST(Canonicalize, ReciprocalAndNegation) {
  PassResult div = run(binary("Div", true), 1);
  ASSERT_TRUE(div.ok && div.changed) << div.text;
  EXPECT_NE(div.text.find("= Reciprocal(%x)"), std::string::npos) << div.text;
  PassResult sub = run(binary("Sub", true), 0);
  ASSERT_TRUE(sub.ok && sub.changed) << sub.text;
  EXPECT_NE(sub.text.find("= Neg(%x)"), std::string::npos) << sub.text;
  for (const auto& [op, value] : std::vector<std::pair<std::string, double>>{{"Div", 2}, {"Sub", 1}}) {
    PassResult r = run(binary(op, true), value);
    ASSERT_TRUE(r.ok) << r.text;
    EXPECT_FALSE(r.changed) << op << " " << value << ": " << r.text;
  }
}

// A constant that broadcasts x to a larger shape keeps the op (the rewrite would change the shape).
TEST(Canonicalize, LeavesBroadcastsAlone) {
  PassResult r = testing::runPassOn(
      "graph(%x: f32[], %c: f32[3]) -> (%y: f32[3]) {\n  %y = Pow(%x, %c) : f32[3]\n}\n", canonicalize,
      [](Graph& g) {
        Tensor three(DType::F32, Shape({1}));
        three.setDouble(0, 2);
        for (Value* in : std::vector<Value*>(g.inputs().begin(), g.inputs().end()))
          if (in->name() == "c") g.replaceAllUsesWith(in, g.addConstant("c_const", three));
      },
      [](Graph&) {});
  ASSERT_TRUE(r.ok) << r.text;
  EXPECT_TRUE(r.text.find("Pow(") != std::string::npos) << r.text;
}

// Each rewrite computes what the original op does, on values that include zeros, negatives and
// large magnitudes; the reference evaluator of the original graph is the oracle.
TEST(Canonicalize, RewrittenGraphsComputeTheOriginals) {
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> u(-30, 30);
  Tensor x(DType::F32, Shape({2, 3}));
  for (int64_t i = 0; i < x.numel(); ++i) x.setDouble(i, i == 0 ? 0.0 : u(rng));
  Tensor positive(DType::F32, Shape({2, 3}));
  for (int64_t i = 0; i < x.numel(); ++i) positive.setDouble(i, std::fabs(x.getDouble(i)) + (i == 1 ? 0.0 : 0.25));
  struct Case {
    std::string op;
    bool constantFirst;
    double c;
    const Tensor* input;
    double rtol;  // x * x * x rounds twice where pow rounds once
  };
  const std::vector<Case> cases = {
      {"Add", true, 2, &x, 0},
      {"Mul", true, -3, &x, 0},
      {"Pow", false, 2, &x, 0},
      {"Pow", false, 3, &x, 2.5e-7},
      {"Pow", false, 0.5, &positive, 0},
      {"Pow", false, -1, &positive, 0},
      {"Pow", false, -0.5, &positive, 2.5e-7},
      {"Div", true, 1, &positive, 0},
      {"Sub", true, 0, &x, 0},
  };
  for (const Case& c : cases) {
    const std::string text = binary(c.op, c.constantFirst);
    std::vector<std::vector<double>> results;
    for (bool rewrite : {false, true}) {
      PassResult r = testing::runPassOn(
          text, rewrite ? canonicalize : +[](Graph&) -> Expected<bool> { return false; },
          [&](Graph& g) {
            for (Value* in : std::vector<Value*>(g.inputs().begin(), g.inputs().end()))
              if (in->name() == "c")
                g.replaceAllUsesWith(in, g.addConstant("c_const", Tensor::scalar(DType::F32, c.c)));
          },
          [&](Graph& g) {
            eliminateDeadCode(g).value();
            // (%c, now unused, is still a graph input.)
            Expected<std::vector<Tensor>> out = evaluateGraph(g, {*c.input, Tensor::scalar(DType::F32, c.c)});
            ASSERT_TRUE(out.isOk()) << out.status().message();
            results.push_back((*out)[0].toDoubles());
          });
      ASSERT_TRUE(r.ok) << r.text;
    }
    ASSERT_EQ(results.size(), 2u);
    for (size_t i = 0; i < results[0].size(); ++i) {
      const double want = results[0][i], got = results[1][i];
      if (c.rtol == 0)
        EXPECT_EQ(got, want) << c.op << " " << c.c << " at " << i;
      else
        EXPECT_NEAR(got, want, c.rtol * std::fabs(want)) << c.op << " " << c.c << " at " << i;
    }
  }
}

}  // namespace
}  // namespace nnc::passes
