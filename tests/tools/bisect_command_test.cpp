// `nnc bisect`: each fused group checked alone against the reference evaluator; with a kernel broken on
// purpose (--inject-fault, CompileOptions::faultNode, a test-only switch), the first group out of tolerance is
// the one holding that node, named with its worst element; a clean model passes with exit 0.
#include <filesystem>

#include "tests/tools/nnc_cli_util.h"

namespace nnc::testing {
namespace {

class BisectCommand : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_FALSE(dir.path().empty()); }
  ScratchDir dir;
};

// x -> MatMul(w) -> Add(b) -> Relu -> Softmax -> Mul(2): a contraction group and a softmax group.
OnnxModel chain() {
  OnnxModel m;
  m.input("x", {4, 8});
  std::vector<float> w(8 * 6), b(6);
  for (size_t i = 0; i < w.size(); ++i) w[i] = 0.05f * static_cast<float>(i % 7) - 0.1f;
  for (size_t i = 0; i < b.size(); ++i) b[i] = 0.1f * static_cast<float>(i);
  m.floats("w", {8, 6}, w);
  m.floats("b", {6}, b);
  m.floats("two", {1}, {2.0f});
  m.node("MatMul", {"x", "w"}, {"mm"}, "proj");
  m.node("Add", {"mm", "b"}, {"biased"}, "bias");
  m.node("Relu", {"biased"}, {"act"}, "relu");
  m.node("Softmax", {"act"}, {"sm"}, "probs");
  m.node("Mul", {"sm", "two"}, {"y"}, "scale");
  m.output("y");
  return m;
}

std::vector<float> inputX() {
  std::vector<float> x(32);
  for (int i = 0; i < 32; ++i) x[i] = 0.3f * static_cast<float>(i % 11) - 1.2f;
  return x;
}

TEST_F(BisectCommand, ACleanModelAgreesEverywhere) {
  writeFile(dir / "m.onnx", chain().bytes());
  writeFile(dir / "x.pb", floatTensorBytes("x", {4, 8}, inputX()));
  RunResult r = runNnc({"bisect", "m.onnx", "--input", "x=x.pb"}, dir.path());
  EXPECT_EQ(r.exitCode, 0) << r;
  EXPECT_TRUE(contains(r.out, "m.onnx: 2 kernel groups at -O2 (target cpu)")) << r.out;
  EXPECT_TRUE(contains(r.out, "group 0 ok")) << r.out;
  EXPECT_TRUE(contains(r.out, "proj (MatMul), bias (Add), relu (Relu)")) << r.out;
  EXPECT_TRUE(contains(r.out, "all 2 groups agree with the reference evaluator")) << r.out;
}

TEST_F(BisectCommand, ABrokenKernelIsNamedWithItsWorstElement) {
  writeFile(dir / "m.onnx", chain().bytes());
  writeFile(dir / "x.pb", floatTensorBytes("x", {4, 8}, inputX()));
  RunResult r = runNnc({"bisect", "m.onnx", "--input", "x=x.pb", "--inject-fault=probs"}, dir.path());
  EXPECT_EQ(r.exitCode, 1) << r;
  EXPECT_TRUE(contains(r.out, "group 0 ok")) << r.out;
  EXPECT_TRUE(contains(r.out, "group 1 FAIL: output 'y' (f32[4x6]): 24 of 24 elements out of tolerance")) << r.out;
  EXPECT_TRUE(contains(r.out, "nodes: probs (Softmax), scale (Mul)")) << r.out;
  EXPECT_TRUE(contains(r.out, "first group out of tolerance: 1 of 2")) << r.out;
  // The fault adds 1 to what the kernel stores: the error is 1 everywhere.
  EXPECT_TRUE(contains(r.out, "max abs error 1,")) << r.out;
}

TEST_F(BisectCommand, RealModelsAgreeAndAFaultIsFound) {
  const std::string root = std::string(NNC_BINARY_DIR) + "/models/model_transformer_encoder";
  if (!std::filesystem::exists(root + "/model.onnx")) GTEST_SKIP() << "no real models in " << NNC_BINARY_DIR;
  const std::vector<std::string> args = {"bisect", root + "/model.onnx", "--input",
                                         "input=" + root + "/test_data_set_0/input_0.pb"};
  RunResult clean = runNnc(args, dir.path());
  EXPECT_EQ(clean.exitCode, 0) << clean;
  EXPECT_TRUE(contains(clean.out, "all 20 groups agree")) << clean.out;
  // The second layer's softmax, broken: the groups before it agree, its group is the one named.
  std::vector<std::string> faulty = args;
  faulty.push_back("--inject-fault=/layers/layers.1/Softmax");
  RunResult broken = runNnc(faulty, dir.path());
  EXPECT_EQ(broken.exitCode, 1) << broken;
  EXPECT_TRUE(contains(broken.out, "group 13 FAIL")) << broken.out;
  EXPECT_TRUE(contains(broken.out, "nodes: /layers/layers.1/Softmax (Softmax)")) << broken.out;
  EXPECT_TRUE(contains(broken.out, "group 12 ok")) << broken.out;
}

TEST_F(BisectCommand, MissingOrWrongInputsAreClearErrors) {
  writeFile(dir / "m.onnx", chain().bytes());
  RunResult none = runNnc({"bisect", "m.onnx"}, dir.path());
  EXPECT_EQ(none.exitCode, 1);
  EXPECT_EQ(none.err, "nnc: error: no --input given for model input 'x'\n");
  writeFile(dir / "small.pb", floatTensorBytes("x", {2, 8}, std::vector<float>(16, 1)));
  RunResult wrong = runNnc({"bisect", "m.onnx", "--input", "x=small.pb"}, dir.path());
  EXPECT_EQ(wrong.exitCode, 1);
  EXPECT_EQ(wrong.err, "nnc: error: --input x: f32[2x8], the model takes f32[4x8]\n");
}

}  // namespace
}  // namespace nnc::testing
