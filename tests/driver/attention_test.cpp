// Attention as one kernel (targets/cpu/lower_attention.h, codegen's emitAttention): the forms exporters write
// (scale by Div or Mul, an additive mask, a Where mask with -inf, K transposed by a Transpose),
// compiled for the cpu at -O2, run as one attention kernel and match the reference evaluator on the
// unfused graph — over key blocks (the online softmax's rescaling), edge panels of K and V, edge row
// tiles, rows whose first key blocks are masked entirely, and a row masked entirely (NaN, as the
// unfused softmax gives).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "ir/builder.h"
#include "ir/reference.h"
#include "tests/driver/driver_test_util.h"

namespace nnc::testing {
namespace {

struct AttentionShape {
  int64_t lq, lk, d, dv;
};

enum class Scale { None, Div, Mul };
enum class Mask { None, Add, WhereNegInf, Both };

struct AttentionGraph {
  Graph graph;
  std::vector<Tensor> inputs;
};

// q [2, 3, lq, d], k [2, 3, lk, d] (transposed in the graph), v [2, 3, lk, dv]; an additive mask
// [2, 1, 1, lk] and a bool "masked" [lq, lk] (Where(masked, -inf, s)) as the form asks.
void build(AttentionGraph& out, const AttentionShape& s, Scale scale, Mask mask, std::mt19937& rng) {
  GraphBuilder b(out.graph);
  const Shape qs{2, 3, s.lq, s.d}, ks{2, 3, s.lk, s.d}, vs{2, 3, s.lk, s.dv};
  Value* q = b.input("q", DType::F32, qs);
  Value* k = b.input("k", DType::F32, ks);
  Value* v = b.input("v", DType::F32, vs);
  out.inputs = {randomTensor(DType::F32, qs, rng), randomTensor(DType::F32, ks, rng),
                randomTensor(DType::F32, vs, rng)};
  Attributes perm;
  perm.set("perm", std::vector<int64_t>{0, 1, 3, 2});
  Value* kt = b.op(OpKind::Transpose, {k}, perm);
  Value* scores = b.op(OpKind::MatMul, {q, kt});
  const float root = std::sqrt(static_cast<float>(s.d));
  if (scale == Scale::Div) scores = b.op(OpKind::Div, {scores, b.constant(Tensor::fromFloats({root}, {}))});
  if (scale == Scale::Mul) scores = b.op(OpKind::Mul, {b.constant(Tensor::fromFloats({1 / root}, {})), scores});
  if (mask == Mask::Add || mask == Mask::Both) {
    Value* m = b.input("mask", DType::F32, Shape{2, 1, 1, s.lk});
    out.inputs.push_back(randomTensor(DType::F32, m->shape(), rng, -3, 0));
    scores = b.add(scores, m);
  }
  if (mask == Mask::WhereNegInf || mask == Mask::Both) {
    Value* masked = b.input("masked", DType::Bool, Shape{s.lq, s.lk});
    Tensor t(DType::Bool, masked->shape());
    std::uniform_int_distribution<int> tenth(0, 9);
    for (int64_t i = 0; i < t.numel(); ++i) t.setDouble(i, tenth(rng) == 0 && i % s.lk != 0 ? 1 : 0);
    out.inputs.push_back(std::move(t));
    Value* negInf = b.constant(Tensor::fromFloats({-std::numeric_limits<float>::infinity()}, {}));
    scores = b.op(OpKind::Where, {masked, negInf, scores});
  }
  Attributes axis;
  axis.set("axis", int64_t{-1});
  Value* p = b.op(OpKind::Softmax, {scores}, axis);
  b.output(b.op(OpKind::MatMul, {p, v}));
  ASSERT_TRUE(b.status().isOk()) << b.status().message();
}

// Compiles at -O2 for the cpu and runs on the graph's inputs: outputs like the reference's, and
// `attentionKernels` of the groups are attention kernels.
void expectMatches(Graph& graph, const std::vector<Tensor>& inputs, int attentionKernels, const std::string& what) {
  Expected<std::vector<Tensor>> want = evaluateGraph(graph, inputs);
  ASSERT_TRUE(want.isOk()) << want.status().message();
  CompileOptions options;
  options.optLevel = 2;
  options.numThreads = 2;
  options.verifyEachPass = true;
  Expected<std::unique_ptr<CompiledModel>> model = compileJit(graph, options);
  ASSERT_TRUE(model.isOk()) << what << ": " << model.status().message();
  int attention = 0;
  for (const CompileReport::Group& g : (*model)->report().groups) attention += g.kind == "attention";
  const CompileReport& report = (*model)->report();
  EXPECT_EQ(attention, attentionKernels) << what << "\n" << report.kernelIr;
  // The step splits tasks, not the kernel's outer points (else one thread gets them all).
  if (const size_t at = report.kernelIr.find("attention batch="); at != std::string::npos) {
    const size_t tasks = report.kernelIr.find(" tasks=", at) + 7;
    const std::string count = report.kernelIr.substr(tasks, report.kernelIr.find('\n', tasks) - tasks);
    EXPECT_NE(report.plan.find(" outer=" + count + " "), std::string::npos) << what << "\n" << report.plan;
  }
  Expected<std::vector<Tensor>> got = (*model)->run(inputs);
  ASSERT_TRUE(got.isOk()) << got.status().message();
  expectNear(got->front(), want->front(), 1e-4, 1e-5, what);
}

struct FormCase {
  const char* name;
  AttentionShape shape;
  Scale scale;
  Mask mask;
};

class AttentionForms : public ::testing::TestWithParam<FormCase> {};

TEST_P(AttentionForms, OneKernelMatchesReference) {
  const FormCase& c = GetParam();
  std::mt19937 rng(7);
  AttentionGraph g;
  build(g, c.shape, c.scale, c.mask, rng);
  expectMatches(g.graph, g.inputs, 1, c.name);
}

INSTANTIATE_TEST_SUITE_P(
    Cpu, AttentionForms,
    ::testing::Values(
        // BERT's: (Q Kᵀ) / sqrt(d) + padding mask, one key block of whole panels.
        FormCase{"Bert", {128, 128, 64, 64}, Scale::Div, Mask::Add},
        // GPT-2's: Where(mask, -inf, scores); two key blocks (of 512), edge K and V panels, edge row tiles.
        FormCase{"WhereTwoKeyBlocks", {20, 600, 16, 24}, Scale::Div, Mask::WhereNegInf},
        FormCase{"BothMasksMulScale", {33, 300, 70, 3}, Scale::Mul, Mask::Both},
        FormCase{"NoScaleNoMask", {1, 64, 8, 40}, Scale::None, Mask::None},
        FormCase{"ExactBlocks", {28, 1024, 32, 32}, Scale::Mul, Mask::Add}),
    [](const ::testing::TestParamInfo<FormCase>& info) { return std::string(info.param.name); });

// Rows whose first key block is masked entirely (their max is -inf until the second block: its
// exponentials must not be NaN), a causal row, and a row masked entirely (NaN in both).
TEST(Attention, MaskedKeyBlocksAndRows) {
  std::mt19937 rng(11);
  AttentionGraph g;
  const AttentionShape s{6, 600, 16, 16};
  build(g, s, Scale::Div, Mask::WhereNegInf, rng);
  Tensor& masked = g.inputs.back();
  for (int64_t i = 0; i < s.lq; ++i)
    for (int64_t j = 0; j < s.lk; ++j) {
      const bool m = i % 2 == 0 ? j < 530 : i == 5 ? true : j > i;  // rows 0, 2, 4 | row 5 | 1, 3 causal
      masked.setDouble(i * s.lk + j, m ? 1 : 0);
    }
  expectMatches(g.graph, g.inputs, 1, "masked blocks");
  Expected<std::vector<Tensor>> want = evaluateGraph(g.graph, g.inputs);
  ASSERT_TRUE(want.isOk());
  EXPECT_TRUE(std::isnan(want->front().getDouble(5 * s.dv)));  // the oracle's own NaN row
}

// Without batch dims (rank 2) and with one (rank 3: heads merged into the batch, as older exporters
// write it): the same kernel.
TEST(Attention, RankTwoAndThree) {
  std::mt19937 rng(5);
  for (const Shape& batch : {Shape{}, Shape{6}}) {
    Graph graph;
    GraphBuilder b(graph);
    auto dims = [&](int64_t rows, int64_t cols) {
      std::vector<int64_t> d = batch.dims();
      d.push_back(rows);
      d.push_back(cols);
      return Shape(d);
    };
    Value* q = b.input("q", DType::F32, dims(30, 24));
    Value* kt = b.input("kt", DType::F32, dims(24, 100));
    Value* v = b.input("v", DType::F32, dims(100, 40));
    Value* s = b.op(OpKind::Mul, {b.op(OpKind::MatMul, {q, kt}), b.constant(Tensor::fromFloats({0.2f}, {}))});
    b.output(b.op(OpKind::MatMul, {b.op(OpKind::Softmax, {s}), v}));
    ASSERT_TRUE(b.status().isOk()) << b.status().message();
    std::vector<Tensor> inputs;
    for (const Value* in : graph.inputs()) inputs.push_back(randomTensor(DType::F32, in->shape(), rng));
    expectMatches(graph, inputs, 1, "rank " + std::to_string(batch.rank() + 2));
  }
}

// Below kMinAttentionKeys keys, or when an intermediate is read elsewhere, the nodes are fused as
// usual (no attention kernel), and still match.
TEST(Attention, DeclinedFormsFuseAsUsual) {
  std::mt19937 rng(3);
  {
    AttentionGraph g;
    build(g, {16, 16, 8, 8}, Scale::Div, Mask::Add, rng);
    expectMatches(g.graph, g.inputs, 0, "16 keys");
  }
  {
    AttentionGraph g;
    build(g, {16, 96, 8, 8}, Scale::Div, Mask::None, rng);
    // The probabilities are a graph output too: they must be written.
    Node* softmax = nullptr;
    for (Node* n : g.graph.nodes())
      if (n->op() == OpKind::Softmax) softmax = n;
    ASSERT_NE(softmax, nullptr);
    g.graph.addOutput(softmax->output(0));
    expectMatches(g.graph, g.inputs, 0, "probabilities returned");
  }
}

}  // namespace
}  // namespace nnc::testing
