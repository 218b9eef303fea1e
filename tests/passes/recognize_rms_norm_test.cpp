// recognize-rms-norm as text: the RMSNorm of exports (and its variants: Mul(x, x), Reciprocal or
// Div(1, .) then Mul, no weight) becomes one RmsNormalization; near misses stay as they are; the
// rewritten graph computes what the decomposed one does, the decomposed form in the reference
// evaluator being the oracle (its ops are checked against the ONNX backend data).
#include <random>

#include "driver/compiler.h"
#include "ir/reference.h"
#include "tests/passes/pass_test_util.h"

namespace nnc::passes {
namespace {

using testing::expectUnchanged;
using testing::PassResult;

// RMSNorm over the last axis of x [2x3x8] with `square`, `divide` and `tail` lines substituted.
std::string decomposed(const std::string& square, const std::string& divide, const std::string& tail,
                       const std::string& outputs = "%y: f32[2x3x8]") {
  return "graph(%x: f32[2x3x8], %w: f32[8], %eps: f32[], %two: f32[], %one: f32[]) -> (" + outputs + ") {\n" + square +
         "  %ms = ReduceMean(%sq) {axes=[-1], keepdims=1, noop_with_empty_axes=0} : f32[2x3x1]\n"
         "  %mse = Add(%ms, %eps) : f32[2x3x1]\n"
         "  %r = Sqrt(%mse) : f32[2x3x1]\n" +
         divide + tail + "}\n";
}

const char* kPow = "  %sq = Pow(%x, %two) : f32[2x3x8]\n";
const char* kDiv = "  %n = Div(%x, %r) : f32[2x3x8]\n";
const char* kWeight = "  %y = Mul(%n, %w) : f32[2x3x8]\n";

// The graph with eps, two and one made constants (the parser takes them as inputs).
void makeConstants(Graph& g, double two = 2.0) {
  for (Value* in : std::vector<Value*>(g.inputs().begin(), g.inputs().end())) {
    const double v = in->name() == "eps" ? 1e-6 : in->name() == "two" ? two : in->name() == "one" ? 1.0 : -1;
    if (v >= 0) g.replaceAllUsesWith(in, g.addConstant(in->name() + "_const", Tensor::scalar(DType::F32, v)));
  }
}

PassResult runWithConstants(const std::string& text, double two = 2.0) {
  return testing::runPassWithConstants(recognizeRmsNorm, text, {{"eps", 1e-6}, {"two", two}, {"one", 1.0}});
}

TEST(RecognizeRmsNorm, TheExportedFormBecomesOneNode) {
  PassResult r = runWithConstants(decomposed(kPow, kDiv, kWeight));
  ASSERT_TRUE(r.ok && r.changed) << r.text;
  EXPECT_NE(r.text.find("= RmsNormalization(%x, %w) {axis=2, epsilon=9.99999"), std::string::npos) << r.text;
  for (const char* gone : {"ReduceMean", "Pow(", "Sqrt(", "Div(", "Add("})
    EXPECT_EQ(r.text.find(gone), std::string::npos) << gone << "\n" << r.text;
}

TEST(RecognizeRmsNorm, VariantsAreRecognised) {
  // x * x, x * Reciprocal(r), no weight (a ones weight is made).
  PassResult r =
      runWithConstants(decomposed("  %sq = Mul(%x, %x) : f32[2x3x8]\n",
                                  "  %inv = Reciprocal(%r) : f32[2x3x1]\n  %y = Mul(%x, %inv) : f32[2x3x8]\n", ""));
  ASSERT_TRUE(r.ok && r.changed) << r.text;
  EXPECT_NE(r.text.find("RmsNormalization(%x, %y_scale)"), std::string::npos) << r.text;
  // Div(1, r) then Mul, the weight first.
  r = runWithConstants(decomposed(kPow, "  %inv = Div(%one, %r) : f32[2x3x1]\n  %n = Mul(%inv, %x) : f32[2x3x8]\n",
                                  "  %y = Mul(%w, %n) : f32[2x3x8]\n"));
  ASSERT_TRUE(r.ok && r.changed) << r.text;
  EXPECT_NE(r.text.find("RmsNormalization(%x, %w) {axis=2"), std::string::npos) << r.text;
}

TEST(RecognizeRmsNorm, NearMissesStay) {
  // The exponent is 3; the mean square is also an output; the numerator is not the squared value.
  PassResult r = runWithConstants(decomposed(kPow, kDiv, kWeight), 3.0);
  EXPECT_TRUE(r.ok && !r.changed) << r.text;
  r = runWithConstants(decomposed(kPow, kDiv, kWeight, "%y: f32[2x3x8], %ms: f32[2x3x1]"));
  EXPECT_TRUE(r.ok && !r.changed) << r.text;
  r = runWithConstants(decomposed(kPow, "  %n = Div(%w, %r) : f32[2x3x8]\n", "  %y = Mul(%n, %x) : f32[2x3x8]\n"));
  EXPECT_TRUE(r.ok && !r.changed) << r.text;
  // eps not a constant.
  expectUnchanged(recognizeRmsNorm, decomposed(kPow, kDiv, kWeight));
}

TEST(RecognizeRmsNorm, ComputesWhatTheDecomposedFormComputes) {
  const std::string text = decomposed(kPow, kDiv, kWeight);
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> u(-3, 3);
  std::vector<Tensor> feeds;
  for (const Shape& s : {Shape{2, 3, 8}, Shape{8}}) {
    Tensor t(DType::F32, s);
    for (int64_t i = 0; i < t.numel(); ++i) t.setDouble(i, u(rng));
    feeds.push_back(t);
  }
  for (double v : {1e-6, 2.0, 1.0}) feeds.push_back(Tensor::scalar(DType::F32, v));
  auto original = parseGraph(text);
  ASSERT_TRUE(original.isOk());
  auto want = evaluateGraph(**original, feeds);
  ASSERT_TRUE(want.isOk()) << want.status().message();
  auto rewritten = parseGraph(text);
  ASSERT_TRUE(rewritten.isOk());
  Graph& g = **rewritten;
  makeConstants(g);
  ASSERT_TRUE(recognizeRmsNorm(g).value());
  auto got = evaluateGraph(g, feeds);
  ASSERT_TRUE(got.isOk()) << got.status().message();
  for (int64_t i = 0; i < (*want)[0].numel(); ++i)
    ASSERT_NEAR((*got)[0].getDouble(i), (*want)[0].getDouble(i), 1e-5) << i;
}

}  // namespace
}  // namespace nnc::passes
