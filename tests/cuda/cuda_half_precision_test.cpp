// --precision=bf16|fp16 on the cuda target (targets/cuda/half_gemm_operands.cpp): which GEMMs take half
// operands (those against constant weights, not those of two activations), that the kernels computing
// their activations store them in half instead of a conversion kernel of their own, and real models run
// on the CUDA emulator (the generated kernels on the host; cuBLASLt's mixed-precision GEMMs in float64 on
// the rounded operands) against PyTorch's f32 outputs: within the half types' error bars, and measurably
// less exact than f32, fp16 more exact than bf16.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <iostream>
#include <random>

#include "driver/compiler.h"
#include "ir/builder.h"
#include "nnc/onnx.h"
#include "tests/cuda/cuda_cli_util.h"
#include "tests/cuda/test_kernel_cache.h"
#include "tests/driver/driver_test_util.h"

namespace nnc::testing {
namespace {

namespace fs = std::filesystem;

// h = relu(relu(x) @ w1 + b1); y = h @ w2 + b2; s = softmax(h @ h^T): two GEMMs against weights, one
// of two activations.
std::unique_ptr<Graph> mlpWithSelfSimilarity() {
  auto g = std::make_unique<Graph>();
  GraphBuilder b(*g);
  std::mt19937 rng(11);
  Value* x = b.input("x", DType::F32, Shape{8, 64});
  Value* w1 = b.constant(randomTensor(DType::F32, Shape{64, 96}, rng), "w1");
  Value* b1 = b.constant(randomTensor(DType::F32, Shape{96}, rng), "b1");
  Value* w2 = b.constant(randomTensor(DType::F32, Shape{96, 32}, rng), "w2");
  Value* b2 = b.constant(randomTensor(DType::F32, Shape{32}, rng), "b2");
  Value* h =
      b.op(OpKind::Relu, {b.op(OpKind::Add, {b.op(OpKind::MatMul, {b.relu(x), w1}, {}, "fc1"), b1}, {}, "fc1_bias")},
           {}, "relu1");
  b.output(b.op(OpKind::Add, {b.op(OpKind::MatMul, {h, w2}, {}, "fc2"), b2}, {}, "fc2_bias"));
  Attributes perm, axis;
  perm.set("perm", std::vector<int64_t>{1, 0});
  axis.set("axis", int64_t{-1});
  Value* s = b.op(OpKind::MatMul, {h, b.op(OpKind::Transpose, {h}, perm, "ht")}, {}, "similarity");
  b.output(b.op(OpKind::Softmax, {s}, axis, "softmax"));
  EXPECT_TRUE(b.status().isOk()) << b.status().message();
  return g;
}

CompileReport compileCuda(Precision precision, int level) {
  useTestKernelCache();
  auto g = mlpWithSelfSimilarity();
  CompileOptions o;
  o.target = "cuda";
  o.optLevel = level;
  o.precision = precision;
  o.verifyEachPass = true;
  CompileReport report;
  const Status s = compileForEmit(*g, o, &report);
  EXPECT_TRUE(s.isOk()) << s.message();
  return report;
}

TEST(CudaHalfPrecision, GemmsAgainstConstantWeightsTakeHalfOperands) {
  for (int level : {0, 2}) {
    const CompileReport f32 = compileCuda(Precision::F32, level);
    EXPECT_EQ(f32.plan.find("->f32"), std::string::npos) << f32.plan;
    for (const auto& [precision, type] : {std::pair{Precision::BF16, "bf16"}, std::pair{Precision::FP16, "f16"}}) {
      SCOPED_TRACE(std::string(type) + " -O" + std::to_string(level));
      const CompileReport r = compileCuda(precision, level);
      EXPECT_EQ(r.numLibraryCalls, 3) << r.plan;
      const std::string fc1 = std::string("gemm ") + type + "->f32 batch=1 m=8 n=96 k=64";
      const std::string fc2 = std::string("gemm ") + type + "->f32 batch=1 m=8 n=32 k=96";
      EXPECT_NE(r.plan.find(fc1), std::string::npos) << r.plan;
      EXPECT_NE(r.plan.find(fc2), std::string::npos) << r.plan;
      // Two activations: f32, as AMP keeps attention's products.
      EXPECT_NE(r.plan.find("gemm f32 batch=1 m=8 n=8 k=96"), std::string::npos) << r.plan;
      int halfGroups = 0;
      for (const CompileReport::Group& g : r.groups)
        halfGroups += g.precision == std::string(precision == Precision::BF16 ? "bf16" : "fp16");
      EXPECT_EQ(halfGroups, 2);
      if (level == 2) {
        // relu(x) stores its result in half for fc1, and relu1 stores h twice (f32 for the similarity,
        // half for fc2): the conversions cost no kernel of their own.
        EXPECT_EQ(r.numKernels, f32.numKernels) << "f32:\n" << f32.plan << "\nhalf:\n" << r.plan;
      }
    }
  }
}

// The model's relative error, max |got - want| / max |want|.
double relativeError(const Tensor& got, const Tensor& want) {
  EXPECT_EQ(got.shape(), want.shape());
  double err = 0, scale = 0;
  for (int64_t i = 0; i < want.numel(); ++i) {
    err = std::max(err, std::fabs(got.getDouble(i) - want.getDouble(i)));
    scale = std::max(scale, std::fabs(want.getDouble(i)));
  }
  return err / scale;
}

TEST(CudaHalfPrecision, RealModelsOnTheEmulatorWithinTheHalfErrorBars) {
  const std::string root = std::string(NNC_BINARY_DIR) + "/models";
  if (!fs::exists(root + "/model_resnet18/model.onnx"))
    GTEST_SKIP() << "no real models in " << root << " (generate them with tests/models/make_models.py " << root << ")";
  ScratchDir dir;
  for (const char* name : {"model_mlp", "model_resnet18"}) {
    const std::string caseDir = root + "/" + name;
    auto want = onnx::readTensorFile(caseDir + "/test_data_set_0/output_0.pb");  // PyTorch's f32 output
    ASSERT_TRUE(want.isOk()) << want.status().message();
    std::map<std::string, double> error;
    for (const char* precision : {"f32", "bf16", "fp16"}) {
      const std::string out = dir.path() + "/" + name + "_" + precision;
      CliResult r =
          runNnc({"run", caseDir + "/model.onnx", "--target=cuda", "--emulate", std::string("--precision=") + precision,
                  "--input", "input=" + caseDir + "/test_data_set_0/input_0.pb", "--output-dir", out},
                 dir.path());
      ASSERT_EQ(r.exitCode, 0) << r.err;
      std::vector<fs::path> outputs;
      for (const auto& e : fs::directory_iterator(out)) outputs.push_back(e.path());
      ASSERT_EQ(outputs.size(), 1u);
      auto got = onnx::readTensorFile(outputs[0].string());
      ASSERT_TRUE(got.isOk()) << got.status().message();
      error[precision] = relativeError(*got, *want);
    }
    std::cout << "[ cuda     ] " << name << " on the emulator, relative error vs PyTorch f32: f32 " << error["f32"]
              << ", bf16 " << error["bf16"] << ", fp16 " << error["fp16"] << "\n";
    EXPECT_LT(error["f32"], 1e-5) << name;
    // The bar (2e-2 of the largest output), and far from f32: the GEMMs really are half.
    EXPECT_LT(error["bf16"], 2e-2) << name;
    EXPECT_GT(error["bf16"], 100 * error["f32"]) << name;
    // f16 keeps 3 more mantissa bits than bf16: about 8x less error.
    EXPECT_LT(error["fp16"], error["bf16"] / 3) << name;
    EXPECT_GT(error["fp16"], 10 * error["f32"]) << name;
  }
}

}  // namespace
}  // namespace nnc::testing
