// recognize-gelu as text: the exact GELU of exports (and its orderings: x * p * 0.5, x * 0.5 * p,
// p * 0.5 * x, a multiply by 1 / sqrt 2) becomes one Gelu; near misses stay as they are; the rewritten
// graph computes what the decomposed one does, the decomposed form in the reference evaluator being
// the oracle (its ops are checked against the ONNX backend data).
#include <random>

#include "ir/parser.h"
#include "ir/reference.h"
#include "tests/passes/pass_test_util.h"

namespace nnc::passes {
namespace {

using testing::PassResult;

// GELU of x [4x8] with the `scale` and `product` lines substituted.
std::string decomposed(const std::string& scale, const std::string& product,
                       const std::string& outputs = "%y: f32[4x8]") {
  return "graph(%x: f32[4x8], %c: f32[], %one: f32[], %half: f32[]) -> (" + outputs + ") {\n" + scale +
         "  %e = Erf(%d) : f32[4x8]\n"
         "  %p = Add(%e, %one) : f32[4x8]\n" +
         product + "}\n";
}

const char* kDiv = "  %d = Div(%x, %c) : f32[4x8]\n";
const char* kXTimesP = "  %m = Mul(%x, %p) : f32[4x8]\n  %y = Mul(%m, %half) : f32[4x8]\n";

const std::map<std::string, double> kSqrt2 = {{"c", 1.4142135}, {"one", 1.0}, {"half", 0.5}};

PassResult run(const std::string& text, const std::map<std::string, double>& constants = kSqrt2) {
  return testing::runPassWithConstants(recognizeGelu, text, constants);
}

TEST(RecognizeGelu, TheExportedFormBecomesOneNode) {
  PassResult r = run(decomposed(kDiv, kXTimesP));
  ASSERT_TRUE(r.ok && r.changed) << r.text;
  EXPECT_NE(r.text.find("= Gelu(%x) {approximate=\"none\"}"), std::string::npos) << r.text;
  for (const char* gone : {"Erf(", "Div(", "Add(", "Mul("}) EXPECT_EQ(r.text.find(gone), std::string::npos) << r.text;
}

TEST(RecognizeGelu, OrderingsAreRecognised) {
  for (const char* product : {"  %h = Mul(%half, %x) : f32[4x8]\n  %y = Mul(%p, %h) : f32[4x8]\n",  // HuggingFace
                              "  %m = Mul(%p, %half) : f32[4x8]\n  %y = Mul(%x, %m) : f32[4x8]\n",
                              "  %m = Mul(%p, %x) : f32[4x8]\n  %y = Mul(%half, %m) : f32[4x8]\n"}) {
    PassResult r = run(decomposed(kDiv, product));
    ASSERT_TRUE(r.ok && r.changed) << r.text;
    EXPECT_NE(r.text.find("Gelu(%x)"), std::string::npos) << r.text;
  }
  std::map<std::string, double> reciprocal = kSqrt2;
  reciprocal["c"] = 0.70710677;
  PassResult r = run(decomposed("  %d = Mul(%c, %x) : f32[4x8]\n", kXTimesP), reciprocal);
  ASSERT_TRUE(r.ok && r.changed) << r.text;
}

TEST(RecognizeGelu, NearMissesStay) {
  // Divided by 2, not sqrt 2; plus 2, not 1; the erf is also an output; the last product is by 0.25;
  // the product multiplies by another value than x.
  std::map<std::string, double> two = kSqrt2;
  two["c"] = 2.0;
  EXPECT_FALSE(run(decomposed(kDiv, kXTimesP), two).changed);
  std::map<std::string, double> plusTwo = kSqrt2;
  plusTwo["one"] = 2.0;
  EXPECT_FALSE(run(decomposed(kDiv, kXTimesP), plusTwo).changed);
  EXPECT_FALSE(run(decomposed(kDiv, kXTimesP, "%y: f32[4x8], %e: f32[4x8]")).changed);
  std::map<std::string, double> quarter = kSqrt2;
  quarter["half"] = 0.25;
  EXPECT_FALSE(run(decomposed(kDiv, kXTimesP), quarter).changed);
  EXPECT_FALSE(run(decomposed(kDiv, "  %m = Mul(%d, %p) : f32[4x8]\n  %y = Mul(%m, %half) : f32[4x8]\n")).changed);
}

TEST(RecognizeGelu, ComputesWhatTheDecomposedFormComputes) {
  const std::string text = decomposed(kDiv, kXTimesP);
  std::mt19937 rng(11);
  std::uniform_real_distribution<double> u(-6, 6);
  Tensor x(DType::F32, Shape{4, 8});
  for (int64_t i = 0; i < x.numel(); ++i) x.setDouble(i, u(rng));
  auto original = parseGraph(text);
  ASSERT_TRUE(original.isOk());
  std::vector<Tensor> feeds = {x};
  for (double v : {1.4142135, 1.0, 0.5}) feeds.push_back(Tensor::scalar(DType::F32, v));
  auto want = evaluateGraph(**original, feeds);
  ASSERT_TRUE(want.isOk()) << want.status().message();
  auto rewritten = parseGraph(text);
  ASSERT_TRUE(rewritten.isOk());
  Graph& g = **rewritten;
  for (Value* in : std::vector<Value*>(g.inputs().begin(), g.inputs().end()))
    if (in->name() != "x")
      g.replaceAllUsesWith(in, g.addConstant(in->name() + "_const", Tensor::scalar(DType::F32, kSqrt2.at(in->name()))));
  ASSERT_TRUE(recognizeGelu(g).value());
  auto got = evaluateGraph(g, feeds);
  ASSERT_TRUE(got.isOk()) << got.status().message();
  for (int64_t i = 0; i < (*want)[0].numel(); ++i)
    ASSERT_NEAR((*got)[0].getDouble(i), (*want)[0].getDouble(i), 1e-6 * (1 + std::abs((*want)[0].getDouble(i))))
        << "x = " << x.getDouble(i);
}

}  // namespace
}  // namespace nnc::passes
