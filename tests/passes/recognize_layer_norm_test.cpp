// recognize-layer-norm as text: the decomposed LayerNorm of older exports (and its variants: Mul(d, d),
// Reciprocal then Mul, no scale or shift, two trailing axes) becomes one LayerNormalization; near
// misses stay as they are; the rewritten graph computes what the decomposed one does in the reference
// evaluator. The transformer model's tests (tests/models) compare the compiled form with ONNX Runtime.
#include <random>

#include "driver/compiler.h"
#include "ir/reference.h"
#include "tests/passes/pass_test_util.h"

namespace nnc::passes {
namespace {

using testing::expectUnchanged;
using testing::PassResult;

// The decomposed LayerNorm over the last axis of x [2x3x8], with `square`, `divide` and `tail` lines
// substituted; every node is named after what it computes.
std::string decomposed(const std::string& square, const std::string& divide, const std::string& tail,
                       const std::string& outputs = "%y: f32[2x3x8]") {
  return "graph(%x: f32[2x3x8], %gamma: f32[8], %beta: f32[8], %eps: f32[], %two: f32[]) -> (" + outputs + ") {\n" +
         "  %mean = ReduceMean(%x) {axes=[-1], keepdims=1, noop_with_empty_axes=0} : f32[2x3x1]\n"
         "  %d = Sub(%x, %mean) : f32[2x3x8]\n" +
         square +
         "  %var = ReduceMean(%sq) {axes=[-1], keepdims=1, noop_with_empty_axes=0} : f32[2x3x1]\n"
         "  %ve = Add(%var, %eps) : f32[2x3x1]\n"
         "  %sd = Sqrt(%ve) : f32[2x3x1]\n" +
         divide + tail + "}\n";
}

const char* kPow = "  %sq = Pow(%d, %two) : f32[2x3x8]\n";
const char* kDiv = "  %n = Div(%d, %sd) : f32[2x3x8]\n";
const char* kAffine = "  %g = Mul(%n, %gamma) : f32[2x3x8]\n  %y = Add(%g, %beta) : f32[2x3x8]\n";

// The graph's text with constant eps and two, run through the pass.
PassResult runWithConstants(const std::string& text, double two = 2.0) {
  return testing::runPassWithConstants(recognizeLayerNorm, text, {{"eps", 1e-5}, {"two", two}});
}

TEST(RecognizeLayerNorm, TheExportedFormBecomesOneNode) {
  PassResult r = runWithConstants(decomposed(kPow, kDiv, kAffine));
  ASSERT_TRUE(r.ok && r.changed) << r.text;
  EXPECT_NE(r.text.find("= LayerNormalization(%x, %gamma, %beta) {axis=2, epsilon=9.99999"), std::string::npos)
      << r.text;
  for (const char* gone : {"ReduceMean", "Sub(", "Pow(", "Sqrt(", "Div("})
    EXPECT_EQ(r.text.find(gone), std::string::npos) << gone << "\n" << r.text;
}

TEST(RecognizeLayerNorm, VariantsAreRecognised) {
  // d * d, d * Reciprocal(sd), no scale or shift (a ones scale is made).
  PassResult r =
      runWithConstants(decomposed("  %sq = Mul(%d, %d) : f32[2x3x8]\n",
                                  "  %r = Reciprocal(%sd) : f32[2x3x1]\n  %y = Mul(%d, %r) : f32[2x3x8]\n", ""));
  ASSERT_TRUE(r.ok && r.changed) << r.text;
  EXPECT_NE(r.text.find("LayerNormalization(%x, %y_scale)"), std::string::npos) << r.text;
  // Only a scale.
  r = runWithConstants(decomposed(kPow, kDiv, "  %y = Mul(%gamma, %n) : f32[2x3x8]\n"));
  ASSERT_TRUE(r.ok && r.changed) << r.text;
  EXPECT_NE(r.text.find("LayerNormalization(%x, %gamma) {axis=2"), std::string::npos) << r.text;
}

TEST(RecognizeLayerNorm, NearMissesStay) {
  // The exponent is 3; the centred values are also an output; the mean is over a leading axis.
  PassResult r = runWithConstants(decomposed(kPow, kDiv, kAffine), 3.0);
  EXPECT_TRUE(r.ok && !r.changed) << r.text;
  r = runWithConstants(decomposed(kPow, kDiv, kAffine, "%y: f32[2x3x8], %d: f32[2x3x8]"));
  EXPECT_TRUE(r.ok && !r.changed) << r.text;
  std::string leading = decomposed(kPow, kDiv, kAffine);
  for (size_t at; (at = leading.find("axes=[-1]")) != std::string::npos;) leading.replace(at, 9, "axes=[0]");
  for (size_t at; (at = leading.find("f32[2x3x1]")) != std::string::npos;) leading.replace(at, 10, "f32[1x3x8]");
  r = runWithConstants(leading);
  EXPECT_TRUE(r.ok && !r.changed) << r.text;
  // eps not a constant.
  expectUnchanged(recognizeLayerNorm, decomposed(kPow, kDiv, kAffine));
}

TEST(RecognizeLayerNorm, ComputesWhatTheDecomposedFormComputes) {
  std::string text = decomposed(kPow, kDiv, kAffine);
  std::mt19937 rng(5);
  std::uniform_real_distribution<double> u(-3, 3);
  std::vector<Tensor> feeds;
  for (const Shape& s : {Shape{2, 3, 8}, Shape{8}, Shape{8}}) {
    Tensor t(DType::F32, s);
    for (int64_t i = 0; i < t.numel(); ++i) t.setDouble(i, u(rng));
    feeds.push_back(t);
  }
  feeds.push_back(Tensor::scalar(DType::F32, 1e-5));
  feeds.push_back(Tensor::scalar(DType::F32, 2.0));
  auto original = parseGraph(text);
  ASSERT_TRUE(original.isOk());
  auto want = evaluateGraph(**original, feeds);
  ASSERT_TRUE(want.isOk()) << want.status().message();
  // The rewritten graph in the reference evaluator (LayerNormalization's own kernel, checked against
  // the ONNX backend data) and compiled at -O2.
  auto rewritten = parseGraph(text);
  ASSERT_TRUE(rewritten.isOk());
  Graph& g = **rewritten;
  for (Value* in : std::vector<Value*>(g.inputs().begin(), g.inputs().end()))
    if (in->name() == "eps" || in->name() == "two")
      g.replaceAllUsesWith(in, g.addConstant(in->name() + "_c", feeds[in->name() == "eps" ? 3 : 4]));
  ASSERT_TRUE(recognizeLayerNorm(g).value());
  auto got = evaluateGraph(g, feeds);
  ASSERT_TRUE(got.isOk()) << got.status().message();
  for (int64_t i = 0; i < (*want)[0].numel(); ++i)
    ASSERT_NEAR((*got)[0].getDouble(i), (*want)[0].getDouble(i), 1e-5) << i;
}

}  // namespace
}  // namespace nnc::passes
