// fold-constant-subgraphs through the driver's host compile: the projections of a constant table that
// DeBERTa writes (LayerNorm of its relative-position embeddings, through each layer's key and query
// weights) are computed at compile time, and the model's result matches a float64 reference.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>

#include "driver/compiler.h"
#include "ir/builder.h"
#include "tests/driver/driver_test_util.h"

namespace nnc {
namespace {

constexpr int64_t kRows = 256, kWidth = 384, kBatch = 4;  // each projection: 256 x 384 x 384, past kMaxFoldWork

struct Projections {
  std::unique_ptr<Graph> graph = std::make_unique<Graph>();
  Tensor x, table, gamma, beta, w[2], bias[2];
};

// y_k = x . (LayerNorm(table) . w_k + bias_k)^T, k = 0, 1.
Projections build(std::mt19937& rng) {
  Projections p;
  p.x = testing::randomTensor(DType::F32, Shape{kBatch, kWidth}, rng);
  p.table = testing::randomTensor(DType::F32, Shape{kRows, kWidth}, rng);
  p.gamma = testing::randomTensor(DType::F32, Shape{kWidth}, rng, 0.5, 1.5);
  p.beta = testing::randomTensor(DType::F32, Shape{kWidth}, rng);
  GraphBuilder b(*p.graph);
  Value* x = b.input("x", DType::F32, Shape{kBatch, kWidth});
  Attributes norm;
  norm.set("axis", int64_t{-1});
  norm.set("epsilon", 1e-7);
  Value* rel = b.op(OpKind::LayerNormalization, {b.constant(p.table), b.constant(p.gamma), b.constant(p.beta)}, norm,
                    "rel_norm");
  Attributes perm;
  perm.set("perm", std::vector<int64_t>{1, 0});
  for (int k = 0; k < 2; ++k) {
    p.w[k] = testing::randomTensor(DType::F32, Shape{kWidth, kWidth}, rng, -0.1, 0.1);
    p.bias[k] = testing::randomTensor(DType::F32, Shape{kWidth}, rng);
    const std::string n = "proj" + std::to_string(k);
    Value* projected = b.op(OpKind::MatMul, {rel, b.constant(p.w[k])}, {}, n);
    Value* biased = b.op(OpKind::Add, {projected, b.constant(p.bias[k])}, {}, n + "_bias");
    b.output(b.matmul(x, b.op(OpKind::Transpose, {biased}, perm, n + "_t")));
  }
  EXPECT_TRUE(b.status().isOk()) << b.status().message();
  return p;
}

// The float64 result of y_k.
Tensor reference(const Projections& p, int k) {
  std::vector<double> rel(kRows * kWidth), proj(kRows * kWidth);
  for (int64_t r = 0; r < kRows; ++r) {
    double mean = 0, var = 0;
    for (int64_t c = 0; c < kWidth; ++c) mean += p.table.getDouble(r * kWidth + c) / kWidth;
    for (int64_t c = 0; c < kWidth; ++c) var += std::pow(p.table.getDouble(r * kWidth + c) - mean, 2) / kWidth;
    for (int64_t c = 0; c < kWidth; ++c)
      rel[r * kWidth + c] = (p.table.getDouble(r * kWidth + c) - mean) / std::sqrt(var + 1e-7) * p.gamma.getDouble(c) +
                            p.beta.getDouble(c);
  }
  for (int64_t r = 0; r < kRows; ++r)
    for (int64_t c = 0; c < kWidth; ++c) {
      double s = p.bias[k].getDouble(c);
      for (int64_t i = 0; i < kWidth; ++i) s += rel[r * kWidth + i] * p.w[k].getDouble(i * kWidth + c);
      proj[r * kWidth + c] = s;
    }
  Tensor y(DType::F32, Shape{kBatch, kRows});
  for (int64_t b = 0; b < kBatch; ++b)
    for (int64_t r = 0; r < kRows; ++r) {
      double s = 0;
      for (int64_t c = 0; c < kWidth; ++c) s += p.x.getDouble(b * kWidth + c) * proj[r * kWidth + c];
      y.setDouble(b * kRows + r, s);
    }
  return y;
}

bool computedAtRunTime(const CompileReport& report, const std::string& node) {
  for (const CompileReport::Group& g : report.groups)
    if (std::find(g.nodes.begin(), g.nodes.end(), node) != g.nodes.end()) return true;
  return false;
}

TEST(ConstantSubgraphs, ProjectionsOfAConstantTableAreComputedAtCompileTime) {
  for (bool fold : {true, false}) {
    std::mt19937 rng(7);
    Projections p = build(rng);
    CompileOptions options;
    options.verifyEachPass = true;
    if (!fold) options.disabledPasses = {"fold-constant-subgraphs"};
    Expected<std::unique_ptr<CompiledModel>> model = compileJit(*p.graph, options);
    ASSERT_TRUE(model.isOk()) << model.status().message();
    for (const char* node : {"proj0", "proj1", "proj0_bias", "proj1_t"})
      EXPECT_EQ(computedAtRunTime((*model)->report(), node), !fold) << node << (fold ? " folded" : " not folded");
    Expected<std::vector<Tensor>> y = (*model)->run({p.x});
    ASSERT_TRUE(y.isOk()) << y.status().message();
    for (int k = 0; k < 2; ++k) testing::expectNear((*y)[k], reference(p, k), 1e-4, 1e-3, "y" + std::to_string(k));
  }
}

TEST(ConstantSubgraphs, TheFoldedProjectionsAreInTheSharedLibraryToo) {
  std::mt19937 rng(11);
  Projections p = build(rng);
  const std::string path = ::testing::TempDir() + "/constant_subgraph_model.so";
  CompileReport report;
  ASSERT_TRUE(compileToSharedLibrary(*p.graph, CompileOptions{}, path, &report).isOk());
  EXPECT_FALSE(computedAtRunTime(report, "proj0"));
  testing::ModelApi api;
  std::string error;
  ASSERT_TRUE(testing::openModelLibrary(path, &api, &error)) << error;
  nnc_model* m = nullptr;
  ASSERT_EQ(api.create(&m, nullptr), NNC_OK) << api.lastError();
  Expected<std::vector<Tensor>> y = testing::runThroughAbi(api, m, {p.x});
  ASSERT_TRUE(y.isOk()) << y.status().message();
  for (int k = 0; k < 2; ++k) testing::expectNear((*y)[k], reference(p, k), 1e-4, 1e-3, "y" + std::to_string(k));
  api.destroy(m);
}

}  // namespace
}  // namespace nnc
