// Differential tests: seeded random graphs (fuzz/random_graph.h) compiled at -O0 and -O2 and
// compared with the reference evaluator. A failure prints the seed and the graph; replay one seed
// with NNC_DIFFTEST_SEED=<seed> NNC_DIFFTEST_GRAPHS=1. NNC_DIFFTEST_GRAPHS sets how many graphs
// the main test tries (default 300).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <optional>
#include <random>
#include <string>

#include "driver/compiler.h"
#include "fuzz/random_graph.h"
#include "ir/builder.h"
#include "ir/printer.h"
#include "ir/reference.h"
#include "ir/verifier.h"
#include "passes/pass.h"
#include "runtime/cpu_features.h"
#include "targets/cuda/cuda_passes.h"

namespace nnc::fuzz {
namespace {

uint64_t envOr(const char* name, uint64_t fallback) {
  const char* s = std::getenv(name);
  return s && *s ? std::strtoull(s, nullptr, 10) : fallback;
}

// Builds and checks the graph of one seed; returns "" when it matches, else a report to print.
std::string checkSeed(uint64_t seed, int* numNodes = nullptr) {
  SeededChoices choices(seed);
  Graph graph;
  Status built = buildValidGraph(choices, graph);
  if (!built) return "seed " + std::to_string(seed) + ": the builder rejected a generated node: " + built.message();
  if (numNodes) *numNodes = static_cast<int>(graph.numNodes());
  Status s = compileAndCompare(graph);
  if (s) return "";
  return "seed " + std::to_string(seed) + ": " + s.message() + "\n" + printGraph(graph);
}

TEST(DiffTest, RandomGraphsMatchReferenceAtO0AndO2) {
  const uint64_t first = envOr("NNC_DIFFTEST_SEED", 1);
  const uint64_t count = envOr("NNC_DIFFTEST_GRAPHS", 300);
  int failures = 0;
  int64_t nodes = 0;
  for (uint64_t seed = first; seed < first + count; ++seed) {
    int n = 0;
    std::string report = checkSeed(seed, &n);
    nodes += n;
    if (!report.empty()) {
      ++failures;
      ADD_FAILURE() << report;
    }
  }
  std::printf("difftest: %llu graphs (%lld nodes) from seed %llu, %d mismatched\n",
              static_cast<unsigned long long>(count), static_cast<long long>(nodes),
              static_cast<unsigned long long>(first), failures);
}

// Random graphs are too small for bf16 products, so the precision tiers give each products that depend
// on it: `activation` is an input [32, 64] plus the mean of the graph's first f32 output; `weight`
// makes [64, 64] constants. Nothing when the seed's graph is invalid or has no such output.
struct Extension {
  GraphBuilder b;
  Value* activation = nullptr;
  std::mt19937 rng;
  Value* weight(const char* name) {
    Tensor w(DType::F32, Shape({64, 64}));
    std::uniform_real_distribution<double> unit(-1, 1);
    for (int64_t i = 0; i < w.numel(); ++i) w.setDouble(i, unit(rng));
    return b.constant(w, name);
  }
};

std::optional<Extension> extend(uint64_t seed, Graph& graph, const std::string& prefix) {
  SeededChoices choices(seed);
  if (!buildValidGraph(choices, graph)) return std::nullopt;
  auto first = std::find_if(graph.outputs().begin(), graph.outputs().end(),
                            [](const Value* v) { return v->dtype() == DType::F32 && v->shape().numel() > 0; });
  if (first == graph.outputs().end()) return std::nullopt;
  std::optional<Extension> e{Extension{GraphBuilder(graph), nullptr, std::mt19937(static_cast<uint32_t>(seed))}};
  Attributes keep;
  keep.set("keepdims", int64_t{0});
  Value* mean = e->b.op(OpKind::ReduceMean, {*first}, keep);
  e->activation = e->b.add(e->b.input(prefix + "_x", DType::F32, Shape({32, 64})), mean);
  return e;
}

// --precision=auto with a budget no bf16 product meets (1e-7 of the outputs) must give f32's results:
// calibration (every group run alone, the model checks) on random graphs, against the reference; each
// graph gets one bf16-sized product (extend), itself an output.
TEST(DiffTest, RandomGraphsUnderAutoPrecisionWithATightBudgetMatchReference) {
  const bool bf16Unit = (rt::hostHasCpuFeature("amx-tile") && rt::hostHasCpuFeature("amx-bf16")) ||
                        (rt::hostHasCpuFeature("avx512f") && rt::hostHasCpuFeature("avx512bf16"));
  if (!bf16Unit) GTEST_SKIP() << "this CPU has neither AMX-BF16 nor AVX512-BF16";
  const uint64_t count = envOr("NNC_DIFFTEST_AUTO_GRAPHS", 20);
  CompileOptions options;
  options.precision = Precision::Auto;
  options.accuracy = 1e-7;
  int withProduct = 0;
  for (uint64_t seed = 1; seed <= count; ++seed) {
    Graph graph;
    std::optional<Extension> e = extend(seed, graph, "auto");
    if (!e) continue;
    e->b.output(e->b.matmul(e->activation, e->weight("auto_w")));
    ASSERT_TRUE(e->b.status().isOk()) << e->b.status().message();
    ++withProduct;
    Status s = compileAndCompare(graph, 1, options);
    EXPECT_TRUE(s.isOk()) << "seed " << seed << ": " << s.message() << "\n" << printGraph(graph);
  }
  EXPECT_GT(withProduct, static_cast<int>(count / 2));
}

// cuda's --precision=bf16 on the CUDA emulator: random graphs with two more products against weights (one
// of an activation that has another reader, so that its bf16 copy is a second store of the kernel
// computing it) must compute what the graph after the cuda target's passes (conv-to-gemm,
// half-gemm-operands) specifies, as the reference evaluator runs it: the Casts' rounding, the
// MixedMatMuls' f32 sums of rounded operands. (Within 1e-2 of each output's largest value: a value both
// compute in f32 a few ulps apart may round to neighbouring bf16 values, which later sums spread; a
// half type read as the other, or an operand read as f32, is off by far more.)
TEST(DiffTest, RandomGraphsWithHalfGemmsOnTheEmulatedCudaTarget) {
  ::setenv("NNC_CUDA_EMULATE", "1", 1);  // this process only (ctest runs each test alone)
  const uint64_t count = envOr("NNC_DIFFTEST_HALF_GRAPHS", 30);
  CompileOptions options;
  options.target = "cuda";
  options.precision = Precision::BF16;
  int checked = 0, mixed = 0;
  for (uint64_t seed = 1; seed <= count; ++seed) {
    Graph graph;
    std::optional<Extension> e = extend(seed, graph, "half");
    if (!e) continue;
    GraphBuilder& b = e->b;
    Value* h = b.relu(e->activation);
    b.output(b.op(OpKind::Sigmoid, {h}));  // h's other reader
    b.output(b.matmul(b.matmul(h, e->weight("half_w1")), e->weight("half_w2")));
    ASSERT_TRUE(b.status().isOk()) << b.status().message();
    // The cuda target's passes, in its order: Convs become GEMMs, then the GEMMs against weights half.
    std::unique_ptr<Graph> reference = graph.clone();
    ASSERT_TRUE(passes::convToGemm(*reference).isOk());
    Expected<bool> rewritten = passes::halfGemmOperandsBf16(*reference);
    ASSERT_TRUE(rewritten.isOk() && *rewritten) << "seed " << seed;
    for (const Node* n : reference->nodes()) mixed += n->op() == OpKind::MixedMatMul;
    ++checked;
    Status s = compileAndCompareWith(graph, *reference, 1, options);
    EXPECT_TRUE(s.isOk()) << "seed " << seed << ": " << s.message() << "\n" << printGraph(*reference);
  }
  EXPECT_GT(checked, static_cast<int>(count / 2));
  EXPECT_GE(mixed, 2 * checked);
}

// Seeds that once failed (the cause beside each); they must keep passing. A seed names a graph only
// for one version of the generator: when the generator changes, re-find the graph and update.
TEST(DiffTest, RegressionSeeds) {
  const uint64_t seeds[] = {
      213,  // an f64 output cast from f32 math was compared with f64 tolerances (checker fix)
  };
  for (uint64_t seed : seeds) EXPECT_EQ(checkSeed(seed), "");
}

// The loose generator (what fuzz_shape_inference decodes bytes into) from seeds: the builder either
// rejects a graph with an error or the graph verifies; small accepted graphs also run through the
// reference evaluator, where errors are fine. Counts both so that the test sees real coverage.
TEST(DiffTest, LooseGraphsFailCleanly) {
  const uint64_t count = envOr("NNC_DIFFTEST_LOOSE_GRAPHS", 3000);
  int accepted = 0, evaluated = 0;
  for (uint64_t seed = 1; seed <= count; ++seed) {
    SeededChoices choices(seed);
    Graph graph;
    if (!buildLooseGraph(choices, graph)) continue;
    ++accepted;
    Status s = verifyGraph(graph);
    ASSERT_TRUE(s.isOk()) << "seed " << seed << ": " << s.message() << "\n" << printGraph(graph);
    int64_t total = 0;
    for (const Value* v : graph.values()) total += v->shape().numel();
    if (total > (1 << 16)) continue;
    if (evaluateGraph(graph, deterministicInputs(graph))) ++evaluated;
  }
  std::printf("loose graphs: %llu tried, %d accepted, %d evaluated\n", static_cast<unsigned long long>(count), accepted,
              evaluated);
  EXPECT_GT(accepted, 0);
}

TEST(DiffTest, GeneratorIsDeterministic) {
  std::string texts[2];
  for (std::string& text : texts) {
    SeededChoices choices(12345);
    Graph graph;
    ASSERT_TRUE(buildValidGraph(choices, graph).isOk());
    text = printGraph(graph);
  }
  EXPECT_EQ(texts[0], texts[1]);
  EXPECT_NE(texts[0].find("graph("), std::string::npos);
}

// The comparison can fail: tolerances are tight enough to see a wrong value.
TEST(DiffTest, ToleranceRejectsWrongValues) {
  EXPECT_TRUE(closeEnough(DType::F32, 1.0, 1.0 + 1e-6));
  EXPECT_FALSE(closeEnough(DType::F32, 1.0, 1.01));
  EXPECT_FALSE(closeEnough(DType::F64, 1.0, 1.0 + 1e-6));
  EXPECT_FALSE(closeEnough(DType::I32, 3, 4));
  EXPECT_TRUE(closeEnough(DType::F32, NAN, NAN));
  EXPECT_FALSE(closeEnough(DType::F32, NAN, 0.0));
  EXPECT_FALSE(closeEnough(DType::F32, INFINITY, -INFINITY));
}

// A hand-built graph with known values: Softmax over x + [1, 2, 3]. compileAndCompare accepts it,
// and the compiled model on x = 0 gives numpy's softmax([1, 2, 3]) — so the oracle itself is right.
TEST(DiffTest, HandBuiltGraphMatches) {
  Graph graph;
  GraphBuilder b(graph);
  Value* x = b.input("x", DType::F32, Shape{2, 3});
  Value* y = b.op(OpKind::Softmax, {b.add(x, b.constant(Tensor::fromFloats({1, 2, 3}, {3})))});
  b.output(y);
  ASSERT_TRUE(b.status().isOk()) << b.status().message();
  EXPECT_TRUE(compileAndCompare(graph).isOk());
  CompileOptions opts;
  auto model = compileJit(graph, opts);
  ASSERT_TRUE(model.isOk()) << model.status().message();
  auto out = model.value()->run({Tensor(DType::F32, Shape{2, 3})});
  ASSERT_TRUE(out.isOk()) << out.status().message();
  const double want[3] = {0.09003057317038046, 0.24472847105479764, 0.6652409557748219};
  for (int i = 0; i < 6; ++i) EXPECT_NEAR((*out)[0].getDouble(i), want[i % 3], 1e-6) << i;
}

// Nodes the loose generator found crashing the builder, now errors that name the node and problem.
TEST(DiffTest, LooseGeneratorFindingsAreErrors) {
  {
    // An omitted variadic input: lowering read it as a missing expression and aborted.
    Graph graph;
    GraphBuilder b(graph);
    Value* x = b.input("x", DType::F32, Shape{2});
    EXPECT_EQ(b.op(OpKind::Sum, {x, nullptr, x}, {}, "s"), nullptr);
    EXPECT_EQ(b.status().message(), "node 's' (Sum): input 1 is required");
  }
  {
    // blocksize^2 overflowed int64 and divided by zero (SIGFPE).
    Graph graph;
    GraphBuilder b(graph);
    Value* x = b.input("x", DType::F32, Shape{1, 4, 2, 2});
    Attributes a;
    a.set("blocksize", int64_t{1} << 40);
    EXPECT_EQ(b.op(OpKind::DepthToSpace, {x}, a, "d2s"), nullptr);
    EXPECT_EQ(b.status().message(), "node 'd2s' (DepthToSpace): blocksize 1099511627776 is too large");
  }
  {
    // A zero dim beside huge ones: numel() overflowed before reaching the 0; a dim beyond 2^40 is
    // now rejected even in an empty tensor.
    EXPECT_EQ((Shape{4, INT64_MAX, 0}).numel(), 0);
    EXPECT_FALSE((Shape{0, int64_t{1} << 41}).checkedNumel().has_value());
    EXPECT_EQ((Shape{0, 3}).checkedNumel(), 0);
  }
}

// LRN with a window wider than the channels (found by the loose generator: size = 2^40 looped 2^40
// times per element). Expected values from the ONNX formula in float64: every channel is in the
// window, so the sum of squares is 1 + 4 + 9 = 14 and y = x / (1 + alpha / size * 14) ^ 0.75.
TEST(DiffTest, LrnWindowWiderThanChannels) {
  for (int64_t size : {int64_t{7}, int64_t{1} << 40}) {
    Graph graph;
    GraphBuilder b(graph);
    Value* x = b.input("x", DType::F32, Shape{1, 3, 1, 1});
    Attributes a;
    a.set("size", size);
    b.output(b.op(OpKind::LRN, {x}, a));
    ASSERT_TRUE(b.status().isOk()) << b.status().message();
    auto out = evaluateGraph(graph, {Tensor::fromFloats({1, 2, 3}, {1, 3, 1, 1})});
    ASSERT_TRUE(out.isOk()) << out.status().message();
    double denom = std::pow(1.0 + 1e-4 / static_cast<double>(size) * 14.0, 0.75);
    for (int i = 0; i < 3; ++i) EXPECT_NEAR((*out)[0].getDouble(i), (i + 1) / denom, 1e-6) << size << " " << i;
    EXPECT_TRUE(compileAndCompare(graph).isOk()) << size;
  }
}

}  // namespace
}  // namespace nnc::fuzz
