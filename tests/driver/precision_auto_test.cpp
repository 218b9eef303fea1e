// --precision=auto (driver/precision_choice.h): bf16 per group where calibration keeps the outputs
// within the budget. Oracles are float64 products computed here: a group auto keeps in f32 must
// match the exact product to f32 rounding, one it puts in bf16 the budget, and the model's outputs
// the budget against the exact ones. Runs on every bf16 unit this host has; skips on a CPU with none.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>

#include "ir/builder.h"
#include "runtime/cpu_features.h"
#include "tests/driver/driver_test_util.h"

namespace nnc::testing {
namespace {

// The features that select each bf16 unit of this host (as bf16_contraction_test.cpp's).
std::vector<std::string> hostBf16Units() {
  const bool amx = rt::hostHasCpuFeature("amx-tile") && rt::hostHasCpuFeature("amx-bf16");
  std::vector<std::string> units;
  if (amx) units.push_back("");
  if (rt::hostHasCpuFeature("avx512f") && rt::hostHasCpuFeature("avx512bf16"))
    units.push_back(amx ? "-amx-tile,-amx-bf16" : "");
  return units;
}

// a [m, k] x w [k, n] in float64 (the operands as they are: no rounding), optionally ReLU'd.
Tensor exactProduct(const Tensor& a, const Tensor& w, bool relu) {
  const int64_t m = a.shape()[0], k = a.shape()[1], n = w.shape()[1];
  Tensor out(DType::F32, Shape({m, n}));
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double sum = 0;
      for (int64_t p = 0; p < k; ++p) sum += a.getDouble(i * k + p) * w.getDouble(p * n + j);
      out.setDouble(i * n + j, relu ? std::max(0.0, sum) : sum);
    }
  return out;
}

// max |got - want| / max |want|, in float64.
double relError(const Tensor& got, const Tensor& want) {
  double diff = 0, largest = 0;
  for (int64_t i = 0; i < want.numel(); ++i) {
    diff = std::max(diff, std::fabs(got.getDouble(i) - want.getDouble(i)));
    largest = std::max(largest, std::fabs(want.getDouble(i)));
  }
  return diff / largest;
}

// Two GEMMs, each its own model output. `benign`: random operands, whose bf16 rounding costs ~2^-9
// of the output. `cancelling`: activations 1 + 0.01 r against weights of alternating sign ±(1 + 0.01 r'):
// the ±1 parts cancel, and what is left (the 0.01 parts) is of the size of bf16's rounding of
// 1 + 0.01 r (2^-8): in bf16 the product is mostly error.
struct TwoGemms {
  Graph graph;
  Tensor xb, xs, wb, ws;
  Tensor wantBenign, wantCancelling;
};

void buildTwoGemms(TwoGemms& t) {
  const int64_t m = 64, k = 256, n = 64;
  std::mt19937 rng(41);
  std::uniform_real_distribution<double> unit(-1, 1);
  t.xb = randomTensor(DType::F32, Shape({m, k}), rng);
  t.wb = randomTensor(DType::F32, Shape({k, n}), rng, -0.125, 0.125);
  t.xs = Tensor(DType::F32, Shape({m, k}));
  t.ws = Tensor(DType::F32, Shape({k, n}));
  for (int64_t i = 0; i < m * k; ++i) t.xs.setDouble(i, 1 + 0.01 * unit(rng));
  for (int64_t p = 0; p < k; ++p)
    for (int64_t j = 0; j < n; ++j) t.ws.setDouble(p * n + j, (p % 2 ? -1 : 1) * (1 + 0.01 * unit(rng)));
  GraphBuilder b(t.graph);
  b.output(b.relu(b.matmul(b.input("xb", DType::F32, t.xb.shape()), b.constant(t.wb, "wb"))));
  b.output(b.matmul(b.input("xs", DType::F32, t.xs.shape()), b.constant(t.ws, "ws")));
  ASSERT_TRUE(b.status().isOk()) << b.status().message();
  t.wantBenign = exactProduct(t.xb, t.wb, true);
  t.wantCancelling = exactProduct(t.xs, t.ws, false);
}

// The report's group holding a MatMul, with (the benign product's) or without a Relu.
const CompileReport::Group* matmulGroup(const CompileReport& report, bool withRelu) {
  for (const CompileReport::Group& g : report.groups) {
    const bool matmul = std::find(g.ops.begin(), g.ops.end(), "MatMul") != g.ops.end();
    const bool relu = std::find(g.ops.begin(), g.ops.end(), "Relu") != g.ops.end();
    if (matmul && relu == withRelu) return &g;
  }
  return nullptr;
}

TEST(PrecisionAuto, KeepsTheGemmBf16WouldSpoilInF32AndTheOtherInBf16) {
  if (hostBf16Units().empty()) GTEST_SKIP() << "this CPU has neither AMX-BF16 nor AVX512-BF16";
  TwoGemms t;
  buildTwoGemms(t);
  for (const std::string& features : hostBf16Units()) {
    SCOPED_TRACE(features.empty() ? "host unit" : features);
    // Plain bf16 spoils the cancelling product (so the check below can fail), not the other.
    CompileOptions bf16;
    bf16.precision = Precision::BF16;
    bf16.cpuFeatures = features;
    std::unique_ptr<Graph> copy = t.graph.clone();
    Expected<std::unique_ptr<CompiledModel>> plain = compileJit(*copy, bf16);
    ASSERT_TRUE(plain.isOk()) << plain.status().message();
    Expected<std::vector<Tensor>> plainOut = (*plain)->run({t.xb, t.xs});
    ASSERT_TRUE(plainOut.isOk()) << plainOut.status().message();
    EXPECT_LT(relError((*plainOut)[0], t.wantBenign), 1e-2);
    EXPECT_GT(relError((*plainOut)[1], t.wantCancelling), 5e-2);

    CompileOptions autoOptions = bf16;
    autoOptions.precision = Precision::Auto;
    autoOptions.accuracy = 1e-2;
    autoOptions.calibrationInputs = {{"xb", t.xb}, {"xs", t.xs}};
    copy = t.graph.clone();
    Expected<std::unique_ptr<CompiledModel>> chosen = compileJit(*copy, autoOptions);
    ASSERT_TRUE(chosen.isOk()) << chosen.status().message();
    const CompileReport& report = (*chosen)->report();
    const CompileReport::Group* benign = matmulGroup(report, true);
    const CompileReport::Group* cancelling = matmulGroup(report, false);
    ASSERT_TRUE(benign && cancelling) << report.irAfter;
    EXPECT_EQ(benign->precision, "bf16");
    EXPECT_GE(benign->bf16Error, 0);
    EXPECT_LT(benign->bf16Error, 1e-2);
    EXPECT_EQ(cancelling->precision, "f32");
    EXPECT_GT(cancelling->bf16Error, 5e-2);
    EXPECT_GE(report.calibratedError, 0);
    EXPECT_LE(report.calibratedError, 1e-2);
    Expected<std::vector<Tensor>> got = (*chosen)->run({t.xb, t.xs});
    ASSERT_TRUE(got.isOk()) << got.status().message();
    EXPECT_LT(relError((*got)[0], t.wantBenign), 1e-2);
    EXPECT_GT(relError((*got)[0], t.wantBenign), 1e-5);      // (really bf16)
    EXPECT_LT(relError((*got)[1], t.wantCancelling), 1e-4);  // f32 sums of 256 products
    // A plan with a bf16 contraction needs the unit.
    EXPECT_NE(report.plan.find("needs "), std::string::npos) << report.plan;
  }
}

// Calibration on generated inputs (normal floats) does not see what the cancelling inputs do: both
// products look benign there and go to bf16. What the inputs are matters; a budget too tight for any
// bf16 group leaves the model all f32, needing nothing of the CPU.
TEST(PrecisionAuto, CalibratesOnWhatItIsGivenAndLeavesAllF32UnderATightBudget) {
  if (hostBf16Units().empty()) GTEST_SKIP() << "this CPU has neither AMX-BF16 nor AVX512-BF16";
  TwoGemms t;
  buildTwoGemms(t);
  CompileOptions options;
  options.precision = Precision::Auto;
  options.cpuFeatures = hostBf16Units().front();
  std::unique_ptr<Graph> copy = t.graph.clone();
  Expected<std::unique_ptr<CompiledModel>> generated = compileJit(*copy, options);
  ASSERT_TRUE(generated.isOk()) << generated.status().message();
  for (bool relu : {true, false}) {
    EXPECT_EQ(matmulGroup((*generated)->report(), relu)->precision, "bf16");
    // The whole model in bf16 was within the budget: nothing more was measured.
    EXPECT_EQ(matmulGroup((*generated)->report(), relu)->bf16Error, -1);
  }
  EXPECT_NE((*generated)->report().calibration.find("2 model compiles"), std::string::npos)
      << (*generated)->report().calibration;

  options.accuracy = 1e-7;
  copy = t.graph.clone();
  Expected<std::unique_ptr<CompiledModel>> tight = compileJit(*copy, options);
  ASSERT_TRUE(tight.isOk()) << tight.status().message();
  const CompileReport& report = tight->get()->report();
  for (bool relu : {true, false}) {
    EXPECT_EQ(matmulGroup(report, relu)->precision, "f32");
    EXPECT_GT(matmulGroup(report, relu)->bf16Error, 1e-7);
  }
  EXPECT_EQ(report.calibratedError, 0);
  EXPECT_EQ(report.kernelIr.find("operands=bf16"), std::string::npos);
  EXPECT_EQ(report.plan.find("needs "), std::string::npos) << report.plan;
  Expected<std::vector<Tensor>> got = tight->get()->run({t.xb, t.xs});
  ASSERT_TRUE(got.isOk()) << got.status().message();
  EXPECT_LT(relError((*got)[0], t.wantBenign), 1e-5);
  EXPECT_LT(relError((*got)[1], t.wantCancelling), 1e-4);
}

// Errors add up along a chain: each GEMM alone is within the budget, the chain in bf16 is not, so the
// model check (not the groups' own errors) decides, and puts fewer of them in bf16.
TEST(PrecisionAuto, ErrorsThatAddUpAlongAChainAreCaughtByTheModelCheck) {
  if (hostBf16Units().empty()) GTEST_SKIP() << "this CPU has neither AMX-BF16 nor AVX512-BF16";
  const int64_t m = 32, k = 128, layers = 8;
  std::mt19937 rng(7);
  Graph g;
  GraphBuilder b(g);
  Value* x = b.input("x", DType::F32, Shape({m, k}));
  std::vector<Tensor> weights;
  for (int l = 0; l < layers; ++l) {
    weights.push_back(randomTensor(DType::F32, Shape({k, k}), rng, -0.15, 0.15));
    x = b.matmul(x, b.constant(weights.back(), "w" + std::to_string(l)));
  }
  b.output(x);
  ASSERT_TRUE(b.status().isOk()) << b.status().message();
  Tensor input = randomTensor(DType::F32, Shape({m, k}), rng);
  Tensor want = input;
  for (const Tensor& w : weights) want = exactProduct(want, w, false);

  CompileOptions bf16;
  bf16.precision = Precision::BF16;
  bf16.cpuFeatures = hostBf16Units().front();
  std::unique_ptr<Graph> copy = g.clone();
  Expected<std::unique_ptr<CompiledModel>> plain = compileJit(*copy, bf16);
  ASSERT_TRUE(plain.isOk()) << plain.status().message();
  const double plainError = relError((*plain)->run({input})->front(), want);

  CompileOptions options = bf16;
  options.precision = Precision::Auto;
  options.calibrationInputs = {{"x", input}};
  double largestOwn = 0;
  {
    // The budget: above every group's own error, below the chain's in bf16.
    options.accuracy = 1;  // (all bf16: just to read the own errors)
    options.measureGroupErrors = true;
    copy = g.clone();
    Expected<std::unique_ptr<CompiledModel>> probe = compileJit(*copy, options);
    ASSERT_TRUE(probe.isOk()) << probe.status().message();
    for (const CompileReport::Group& group : (*probe)->report().groups)
      largestOwn = std::max(largestOwn, group.bf16Error);
  }
  ASSERT_GT(largestOwn, 0);
  ASSERT_GT(plainError, 1.5 * largestOwn) << "the chain does not add up errors: the case tests nothing";
  options.measureGroupErrors = false;
  options.accuracy = std::sqrt(plainError * largestOwn);  // between the two
  copy = g.clone();
  Expected<std::unique_ptr<CompiledModel>> chosen = compileJit(*copy, options);
  ASSERT_TRUE(chosen.isOk()) << chosen.status().message();
  const CompileReport& report = (*chosen)->report();
  int inBf16 = 0, measured = 0;
  for (const CompileReport::Group& group : report.groups) {
    inBf16 += group.precision == "bf16";
    measured += group.bf16Error >= 0;
    if (group.bf16Error >= 0) {
      EXPECT_LE(group.bf16Error, options.accuracy);
    }
  }
  EXPECT_EQ(measured, layers);
  EXPECT_GT(inBf16, 0);
  EXPECT_LT(inBf16, layers);
  EXPECT_LE(report.calibratedError, options.accuracy);
  EXPECT_LE(relError((*chosen)->run({input})->front(), want), options.accuracy * 1.01 + 1e-6);
}

TEST(PrecisionAuto, BadCalibrationInputsAreRefused) {
  if (hostBf16Units().empty()) GTEST_SKIP() << "this CPU has neither AMX-BF16 nor AVX512-BF16";
  TwoGemms t;
  buildTwoGemms(t);
  CompileOptions options;
  options.precision = Precision::Auto;
  options.cpuFeatures = hostBf16Units().front();
  options.calibrationInputs = {{"xb", Tensor(DType::F32, Shape({2, 2}))}};
  std::unique_ptr<Graph> copy = t.graph.clone();
  Expected<std::unique_ptr<CompiledModel>> model = compileJit(*copy, options);
  ASSERT_FALSE(model.isOk());
  EXPECT_NE(model.status().message().find("calibration input 'xb' is f32[2x2], the model takes f32[64x256]"),
            std::string::npos)
      << model.status().message();
  options.calibrationInputs = {{"nope", t.xb}};
  copy = t.graph.clone();
  model = compileJit(*copy, options);
  ASSERT_FALSE(model.isOk());
  EXPECT_NE(model.status().message().find("calibration input 'nope' is not an input of the model"), std::string::npos)
      << model.status().message();
}

// Without a bf16 unit, auto is refused as bf16 is, naming it.
TEST(PrecisionAuto, RefusedWhereTheCpuHasNoBf16Unit) {
  TwoGemms t;
  buildTwoGemms(t);
  CompileOptions options;
  options.precision = Precision::Auto;
  options.cpuFeatures = "-amx-tile,-avx512bf16";
  Expected<std::unique_ptr<CompiledModel>> model = compileJit(t.graph, options);
  ASSERT_FALSE(model.isOk());
  EXPECT_NE(model.status().message().find("--precision=auto needs a CPU with AMX-BF16"), std::string::npos)
      << model.status().message();
}

}  // namespace
}  // namespace nnc::testing
