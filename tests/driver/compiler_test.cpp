// compileJit on GraphBuilder graphs: results against float64 formulas, the CompileReport's fields
// at -O0 and -O2, and option errors.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <regex>
#include <sstream>

#include "ir/builder.h"
#include "tests/driver/driver_test_util.h"

namespace nnc::testing {
namespace {

const std::vector<float> kBias = {0.5f, -1.0f, 0.25f, 2.0f, -0.75f};

// y = exp(-relu(x + bias)) on x: f32[3x5]: four nodes in a chain, no intermediate used twice.
std::unique_ptr<Graph> chainGraph() {
  auto g = std::make_unique<Graph>();
  GraphBuilder b(*g);
  Value* x = b.input("x", DType::F32, Shape{3, 5});
  Value* c = b.constant(Tensor::fromFloats(kBias, Shape{5}), "bias");
  Value* y = b.op(OpKind::Exp, {b.op(OpKind::Neg, {b.relu(b.add(x, c))})});
  b.output(y);
  EXPECT_TRUE(b.status().isOk()) << b.status().message();
  return g;
}

std::vector<double> chainExpected(const Tensor& x) {
  std::vector<double> y;
  for (int64_t i = 0; i < x.numel(); ++i) y.push_back(std::exp(-std::max(0.0, x.getDouble(i) + kBias[i % 5])));
  return y;
}

CompileOptions optionsAt(int level) {
  CompileOptions o;
  o.optLevel = level;
  o.verifyEachPass = true;
  o.numThreads = 1;
  return o;
}

TEST(CompileJit, ChainMatchesFormulaAtEveryLevel) {
  std::mt19937 rng(7);
  Tensor x = randomTensor(DType::F32, Shape{3, 5}, rng, -3, 3);
  const std::vector<double> want = chainExpected(x);
  for (int level : {0, 1, 2, 3}) {
    auto g = chainGraph();
    Expected<std::unique_ptr<CompiledModel>> model = compileJit(*g, optionsAt(level));
    ASSERT_TRUE(model.isOk()) << model.status().message();
    Expected<std::vector<Tensor>> y = (*model)->run({x});
    ASSERT_TRUE(y.isOk()) << y.status().message();
    ASSERT_EQ(y->size(), 1u);
    ASSERT_EQ((*y)[0].shape(), (Shape{3, 5}));
    for (int64_t i = 0; i < 15; ++i) EXPECT_NEAR((*y)[0].getDouble(i), want[i], 1e-6) << "-O" << level << " " << i;
  }
}

TEST(CompileJit, ReportAtO0HasOneKernelPerNode) {
  auto g = chainGraph();
  const size_t numNodes = g->numNodes();
  ASSERT_EQ(numNodes, 4u);
  Expected<std::unique_ptr<CompiledModel>> model = compileJit(*g, optionsAt(0));
  ASSERT_TRUE(model.isOk()) << model.status().message();
  const CompileReport& r = (*model)->report();
  EXPECT_EQ(r.numKernels, 4);
  EXPECT_EQ(r.numBuiltins, 0);
  // Three 60-byte intermediates in a chain (each live for two steps): the first and third can share,
  // so two 64-byte slots.
  EXPECT_EQ(r.arenaBytes, 128u);
  EXPECT_EQ(r.weightBytes, 20u);
  // Add reads x (60) and bias (20) and writes 60; Relu, Neg, Exp each read 60 and write 60.
  EXPECT_EQ(r.bytesMoved, 140u + 3 * 120u);
  EXPECT_NE(r.irBefore.find("Relu("), std::string::npos) << r.irBefore;
  EXPECT_EQ(r.irAfter.substr(0, r.irAfter.find('\n')), "// 4 kernels for 4 nodes") << r.irAfter;
  EXPECT_FALSE(r.kernelIr.empty());
  EXPECT_NE(r.llvmIr.find("define"), std::string::npos);
  EXPECT_NE(r.dot.find("digraph"), std::string::npos);
}

TEST(CompileJit, ReportAtO2HasFewerKernels) {
  auto g = chainGraph();
  Expected<std::unique_ptr<CompiledModel>> model = compileJit(*g, optionsAt(2));
  ASSERT_TRUE(model.isOk()) << model.status().message();
  const CompileReport& r = (*model)->report();
  EXPECT_EQ(r.numKernels, 1);
  EXPECT_EQ(r.arenaBytes, 0u);  // nothing is materialised between kernels
  EXPECT_EQ(r.weightBytes, 20u);
  EXPECT_EQ(r.bytesMoved, 140u);
  EXPECT_EQ(r.irAfter.substr(0, r.irAfter.find('\n')), "// 1 kernels for 4 nodes") << r.irAfter;
}

TEST(CompileJit, OpaqueOpsCountAsBuiltins) {
  Graph g;
  GraphBuilder b(g);
  Value* x = b.input("x", DType::F32, Shape{2, 6});
  Attributes k;
  k.set("k", int64_t{2});
  std::vector<Value*> top = b.opMulti(OpKind::TopK, {x}, k);
  b.output(top[0]);
  b.output(top[1]);
  ASSERT_TRUE(b.status().isOk()) << b.status().message();
  Expected<std::unique_ptr<CompiledModel>> model = compileJit(g, optionsAt(2));
  ASSERT_TRUE(model.isOk()) << model.status().message();
  EXPECT_EQ((*model)->report().numBuiltins, 1);
  EXPECT_EQ((*model)->report().numKernels, 0);
  Tensor in = Tensor::fromFloats({3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5, 8}, Shape{2, 6});
  Expected<std::vector<Tensor>> out = (*model)->run({in});
  ASSERT_TRUE(out.isOk()) << out.status().message();
  EXPECT_EQ((*out)[0].toDoubles(), (std::vector<double>{9, 5, 8, 6}));
  EXPECT_EQ((*out)[1].toInt64s(), (std::vector<int64_t>{5, 4, 5, 1}));
}

TEST(CompileJit, PassThroughOutputsAreCopied) {
  // Outputs that are an input, a constant, and the same value twice.
  Graph g;
  GraphBuilder b(g);
  Value* x = b.input("x", DType::F32, Shape{3});
  Value* c = b.constant(Tensor::fromFloats({7, 8, 9}, Shape{3}), "c");
  Value* e = b.op(OpKind::Neg, {x});
  b.output(x);
  b.output(c);
  b.output(e);
  b.output(e);
  ASSERT_TRUE(b.status().isOk()) << b.status().message();
  for (int level : {0, 2}) {
    auto copy = g.clone();
    Expected<std::unique_ptr<CompiledModel>> model = compileJit(*copy, optionsAt(level));
    ASSERT_TRUE(model.isOk()) << model.status().message();
    Expected<std::vector<Tensor>> out = (*model)->run({Tensor::fromFloats({1, 2, 3}, Shape{3})});
    ASSERT_TRUE(out.isOk()) << out.status().message();
    ASSERT_EQ(out->size(), 4u);
    EXPECT_EQ((*out)[0].toDoubles(), (std::vector<double>{1, 2, 3}));
    EXPECT_EQ((*out)[1].toDoubles(), (std::vector<double>{7, 8, 9}));
    EXPECT_EQ((*out)[2].toDoubles(), (std::vector<double>{-1, -2, -3}));
    EXPECT_EQ((*out)[3].toDoubles(), (std::vector<double>{-1, -2, -3}));
    // The user-visible output names survive the copies.
    nnc_tensor_info info;
    ASSERT_EQ(nnc_model_output_info((*model)->handle(), 1, &info), NNC_OK);
    EXPECT_STREQ(info.name, "c");
  }
}

TEST(CompileJit, LogOptionsReachTheLog) {
  std::ostringstream log;
  CompileOptions o = optionsAt(2);
  o.timePasses = true;
  o.printAfterAll = true;
  o.log = &log;
  auto g = chainGraph();
  ASSERT_TRUE(compileJit(*g, o).isOk());
  EXPECT_NE(log.str().find("  simplify "), std::string::npos) << log.str();
  EXPECT_NE(log.str().find("  materialize-outputs "), std::string::npos) << log.str();
}

TEST(CompileJit, DisabledPassesAreHonoured) {
  // Without DCE the dead Exp survives the pipeline (it lowers to no kernel: nothing reads it).
  auto build = [] {
    auto g = std::make_unique<Graph>();
    GraphBuilder b(*g);
    Value* x = b.input("x", DType::F32, Shape{4});
    b.op(OpKind::Exp, {x});
    b.output(b.relu(x));
    return g;
  };
  auto g1 = build();
  auto withDce = compileJit(*g1, optionsAt(0));
  ASSERT_TRUE(withDce.isOk()) << withDce.status().message();
  EXPECT_EQ((*withDce)->report().irAfter.find("Exp("), std::string::npos) << (*withDce)->report().irAfter;
  CompileOptions o = optionsAt(0);
  o.disabledPasses = {"dce"};
  auto g2 = build();
  auto withoutDce = compileJit(*g2, o);
  ASSERT_TRUE(withoutDce.isOk()) << withoutDce.status().message();
  EXPECT_NE((*withoutDce)->report().irAfter.find("Exp("), std::string::npos) << (*withoutDce)->report().irAfter;
  EXPECT_EQ((*withoutDce)->report().numKernels, 1);
  Expected<std::vector<Tensor>> y = (*withoutDce)->run({Tensor::fromFloats({-1, 2, -3, 4}, Shape{4})});
  ASSERT_TRUE(y.isOk()) << y.status().message();
  EXPECT_EQ((*y)[0].toDoubles(), (std::vector<double>{0, 2, 0, 4}));
}

TEST(CompileJit, DeadAnchorWithoutDceAndUnusedBuiltinOutput) {
  // With DCE off a dead MatMul reaches lowering with no outputs; TopK's unused indices still need a
  // buffer to be written to.
  const char* text =
      "graph(%x: f32[2x6], %w: f32[6x3]) -> (%y: f32[2x2]) {\n"
      "  %m = MatMul(%x, %w) : f32[2x3]\n"
      "  %v, %i = TopK(%x) {k=2} : f32[2x2], i64[2x2] @topk\n"
      "  %y = Neg(%v) : f32[2x2]\n"
      "}\n";
  for (int level : {0, 2}) {
    auto g = parseOrDie(text);
    CompileOptions o = optionsAt(level);
    o.disabledPasses = {"dce"};
    auto model = compileJit(*g, o);
    ASSERT_TRUE(model.isOk()) << model.status().message();
    Tensor x = Tensor::fromFloats({3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5, 8}, Shape{2, 6});
    Expected<std::vector<Tensor>> y = (*model)->run({x, Tensor(DType::F32, Shape{6, 3})});
    ASSERT_TRUE(y.isOk()) << y.status().message();
    EXPECT_EQ((*y)[0].toDoubles(), (std::vector<double>{-9, -5, -8, -6})) << "-O" << level;
  }
}

TEST(CompileJit, OptionErrorsAreMessages) {
  auto g = chainGraph();
  CompileOptions o = optionsAt(2);
  o.target = "tpu";
  Expected<std::unique_ptr<CompiledModel>> m1 = compileJit(*g, o);
  ASSERT_FALSE(m1.isOk());
  EXPECT_NE(m1.status().message().find("unknown target 'tpu'"), std::string::npos) << m1.status().message();
  o = optionsAt(7);
  Expected<std::unique_ptr<CompiledModel>> m2 = compileJit(*g, o);
  ASSERT_FALSE(m2.isOk());
  EXPECT_NE(m2.status().message().find("-O7"), std::string::npos) << m2.status().message();
  o = optionsAt(2);
  o.disabledPasses = {"no-such-pass"};
  Expected<std::unique_ptr<CompiledModel>> m3 = compileJit(*g, o);
  ASSERT_FALSE(m3.isOk());
  EXPECT_NE(m3.status().message().find("unknown pass 'no-such-pass'"), std::string::npos) << m3.status().message();
}

TEST(CompileJit, WrongInputsAreRejectedByTheHandle) {
  auto g = chainGraph();
  auto model = compileJit(*g, optionsAt(2));
  ASSERT_TRUE(model.isOk()) << model.status().message();
  Expected<std::vector<Tensor>> none = (*model)->run({});
  ASSERT_FALSE(none.isOk());
  EXPECT_NE(none.status().message().find("1 inputs, given 0"), std::string::npos) << none.status().message();
  Expected<std::vector<Tensor>> badShape = (*model)->run({Tensor(DType::F32, Shape{5, 3})});
  EXPECT_FALSE(badShape.isOk());
}

// A group ending in a Reshape (a Concat feeding a 1x1 conv's GEMM reshape) walks the shape before the
// Reshape, so its indices need no division: the kernel is the concatenation at memory speed.
TEST(CompileJit, AGroupEndingInAReshapeWalksTheShapeBeforeIt) {
  auto g = parseOrDie(
      "graph(%a: f32[1x3x5x7], %b: f32[1x2x5x7]) -> (%y: f32[1x5x35]) {\n"
      "  %c = Concat(%a, %b) {axis=1} : f32[1x5x5x7]\n"
      "  %y = Reshape(%c) {allowzero=0, shape=[1, 5, 35]} : f32[1x5x35]\n"
      "}\n");
  Expected<std::unique_ptr<CompiledModel>> model = compileJit(*g, optionsAt(2));
  ASSERT_TRUE(model.isOk()) << model.status().message();
  const std::string& ir = (*model)->report().kernelIr;
  EXPECT_NE(ir.find("outer [v0<1, v1<5, v2<5, v3<7]"), std::string::npos) << ir;
  EXPECT_EQ(ir.find("floordiv"), std::string::npos) << ir;
  EXPECT_EQ(ir.find("floormod"), std::string::npos) << ir;
  std::mt19937 rng(2);
  const std::vector<Tensor> in = {randomTensor(DType::F32, Shape{1, 3, 5, 7}, rng),
                                  randomTensor(DType::F32, Shape{1, 2, 5, 7}, rng)};
  Expected<std::vector<Tensor>> out = (*model)->run(in);
  ASSERT_TRUE(out.isOk()) << out.status().message();
  for (int64_t i = 0; i < 175; ++i)  // channels 0-2 from a, 3-4 from b, each 35 elements
    ASSERT_EQ((*out)[0].getDouble(i), i < 105 ? in[0].getDouble(i) : in[1].getDouble(i - 105)) << i;
}

// A window's taps (a 7x7 depthwise conv: 49) are a reduction marked for full unrolling, so LLVM's O2
// pipeline vectorises the loop over output positions around them (left rolled, it ran 15x slower).
TEST(CompileJit, WindowTapsAreUnrolledSoTheOutputLoopVectorises) {
  auto g = parseOrDie(
      "graph(%x: f32[1x8x20x20], %w: f32[8x1x7x7]) -> (%y: f32[1x8x20x20]) {\n"
      "  %y = Conv(%x, %w) {auto_pad=\"NOTSET\", group=8, pads=[3, 3, 3, 3]} : f32[1x8x20x20]\n"
      "}\n");
  Expected<std::unique_ptr<CompiledModel>> model = compileJit(*g, optionsAt(2));
  ASSERT_TRUE(model.isOk()) << model.status().message();
  const CompileReport& r = (*model)->report();
  EXPECT_NE(r.kernelIr.find("(unrolled)"), std::string::npos) << r.kernelIr;
  const size_t conv = r.llvmIr.find("define void @nnc_k1_conv");
  ASSERT_NE(conv, std::string::npos) << r.llvmIr;
  const std::string body = r.llvmIr.substr(conv, r.llvmIr.find("\n}\n", conv) - conv);
  // Each of the 49 taps a vector load along the output row (rolled, LLVM made none: 0 vector loads).
  int vectorLoads = 0;
  for (size_t at = body.find("load <"); at != std::string::npos; at = body.find("load <", at + 1)) ++vectorLoads;
  EXPECT_GE(vectorLoads, 49) << body;
}

// A conv's transposed tile (pixels x channels) is stored column by column, each column one masked
// vector along the output's pixels: never as scatters over the channel planes (LLVM vectorised
// the loop over columns once the 14 rows of a whole tile were unrolled: 28 x 28 pixels make only
// whole tiles) nor row by row in scalars.
TEST(CompileJit, TransposedTileEpilogueStoresMaskedVectorsAlongPixels) {
  auto g = parseOrDie(
      "graph(%x: f32[1x3x56x56], %w: f32[32x3x7x7], %b: f32[32]) -> (%y: f32[1x32x28x28]) {\n"
      "  %c = Conv(%x, %w, %b) {auto_pad=\"NOTSET\", pads=[3, 3, 3, 3], strides=[2, 2]} : f32[1x32x28x28]\n"
      "  %y = Relu(%c) : f32[1x32x28x28]\n"
      "}\n");
  Expected<std::unique_ptr<CompiledModel>> model = compileJit(*g, optionsAt(2));
  ASSERT_TRUE(model.isOk()) << model.status().message();
  const CompileReport& r = (*model)->report();
  ASSERT_NE(r.kernelIr.find(" transposed "), std::string::npos) << r.kernelIr;
  EXPECT_EQ(r.llvmIr.find("@llvm.masked.scatter"), std::string::npos) << r.llvmIr;
  EXPECT_NE(r.llvmIr.find("@llvm.masked.store"), std::string::npos) << r.llvmIr;
}

// The float64 3 x 3 convolution (pads 1, stride 1) of xs [1, cin, h, w] by weights [cout, cin, 3, 3],
// plus bias[o] and residual [1, cout, h, w] where given.
Tensor conv3x3Reference(const Tensor& xs, const Tensor& weights, const Tensor* bias, const Tensor* residual) {
  const int64_t cin = xs.shape()[1], h = xs.shape()[2], w = xs.shape()[3], cout = weights.shape()[0];
  Tensor want(DType::F32, Shape{1, cout, h, w});
  for (int64_t o = 0; o < cout; ++o)
    for (int64_t y = 0; y < h; ++y)
      for (int64_t z = 0; z < w; ++z) {
        double sum = bias ? bias->getDouble(o) : 0.0;
        for (int64_t c = 0; c < cin; ++c)
          for (int64_t ky = 0; ky < 3; ++ky)
            for (int64_t kx = 0; kx < 3; ++kx) {
              const int64_t iy = y + ky - 1, ix = z + kx - 1;
              if (iy < 0 || iy >= h || ix < 0 || ix >= w) continue;
              sum += xs.getDouble((c * h + iy) * w + ix) * weights.getDouble(((o * cin + c) * 3 + ky) * 3 + kx);
            }
        const int64_t at = (o * h + y) * w + z;
        want.setDouble(at, sum + (residual ? residual->getDouble(at) : 0.0));
      }
  return want;
}

// A conv whose patches are read in place hints each tile's columns some way ahead of the FMAs
// (`prefetch.a`), in tiles within one output row and tiles crossing two (20-pixel rows, 14-pixel
// tiles); the product is the float64 convolution's.
TEST(CompileJit, InPlacePatchesAreHintedAheadOfTheTile) {
  constexpr int64_t cin = 16, cout = 32, h = 20, w = 20;
  std::mt19937 rng(11);
  const Tensor weights = randomTensor(DType::F32, Shape{cout, cin, 3, 3}, rng, -1, 1);
  Graph g;
  GraphBuilder b(g);
  Value* x = b.input("x", DType::F32, Shape{1, cin, h, w});
  Attributes attrs;
  attrs.set("pads", std::vector<int64_t>{1, 1, 1, 1});
  b.output(b.op(OpKind::Conv, {x, b.constant(weights, "w")}, attrs));
  ASSERT_TRUE(b.status().isOk()) << b.status().message();
  Expected<std::unique_ptr<CompiledModel>> model = compileJit(g, optionsAt(2));
  ASSERT_TRUE(model.isOk()) << model.status().message();
  const CompileReport& r = (*model)->report();
  ASSERT_NE(r.kernelIr.find(" transposed "), std::string::npos) << r.kernelIr;
  EXPECT_NE(r.llvmIr.find("prefetch.a"), std::string::npos) << r.llvmIr;
  const Tensor xs = randomTensor(DType::F32, Shape{1, cin, h, w}, rng, -1, 1);
  Expected<std::vector<Tensor>> got = model.value()->run({xs});
  ASSERT_TRUE(got.isOk()) << got.status().message();
  expectNear(got->front(), conv3x3Reference(xs, weights, nullptr, nullptr), 1e-4, 1e-4, "3 x 3 conv");
}

// Before a conv's tile, its output lines and those of the residual its epilogue reads are hinted;
// the per-channel bias (one cached line per column) is not: a conv with a bias and a residual
// issues as many prefetches as the same conv with the residual alone. Both match float64.
TEST(CompileJit, TileHintsSkipReadsConstantAlongTheRun) {
  constexpr int64_t cin = 16, cout = 32, h = 20, w = 20;
  std::mt19937 rng(12);
  const Tensor weights = randomTensor(DType::F32, Shape{cout, cin, 3, 3}, rng, -1, 1);
  const Tensor bias = randomTensor(DType::F32, Shape{cout}, rng, -1, 1);
  const Tensor xs = randomTensor(DType::F32, Shape{1, cin, h, w}, rng, -1, 1);
  const Tensor rs = randomTensor(DType::F32, Shape{1, cout, h, w}, rng, -1, 1);
  auto prefetches = [&](bool withBias) -> size_t {
    Graph g;
    GraphBuilder b(g);
    Value* x = b.input("x", DType::F32, Shape{1, cin, h, w});
    Value* residual = b.input("r", DType::F32, Shape{1, cout, h, w});
    Attributes attrs;
    attrs.set("pads", std::vector<int64_t>{1, 1, 1, 1});
    std::vector<Value*> operands = {x, b.constant(weights, "w")};
    if (withBias) operands.push_back(b.constant(bias, "b"));
    b.output(b.op(OpKind::Add, {b.op(OpKind::Conv, operands, attrs), residual}));
    EXPECT_TRUE(b.status().isOk()) << b.status().message();
    Expected<std::unique_ptr<CompiledModel>> model = compileJit(g, optionsAt(2));
    EXPECT_TRUE(model.isOk()) << model.status().message();
    if (!model.isOk()) return 0;
    const CompileReport& r = (*model)->report();
    EXPECT_NE(r.kernelIr.find(" transposed "), std::string::npos) << r.kernelIr;
    EXPECT_EQ(r.numKernels, 2) << r.kernelIr;  // the pad, then the conv
    Expected<std::vector<Tensor>> got = model.value()->run({xs, rs});
    EXPECT_TRUE(got.isOk()) << got.status().message();
    if (got.isOk())
      expectNear(got->front(), conv3x3Reference(xs, weights, withBias ? &bias : nullptr, &rs), 1e-4, 1e-4,
                 withBias ? "conv + bias + residual" : "conv + residual");
    size_t calls = 0;
    for (size_t at = r.llvmIr.find("call void @llvm.prefetch"); at != std::string::npos;
         at = r.llvmIr.find("call void @llvm.prefetch", at + 1))
      ++calls;
    return calls;
  };
  const size_t withoutBias = prefetches(false);
  EXPECT_GT(withoutBias, 0u);
  EXPECT_EQ(prefetches(true), withoutBias);
}

// A whole transposed tile's epilogue (bias, residual, ReLU) runs as one vector per column along the
// tile's rows, stored masked to its 14 (AVX-512) rows (`epi.tcol`). 14 x 14 pixels are 14 whole
// tiles, the last ending at the image's end, too near it for a full vector's reads: that one keeps
// the scalar epilogue. Both match float64.
TEST(CompileJit, WholeTransposedTilesRunTheirEpilogueAsVectors) {
  constexpr int64_t cin = 8, cout = 64, h = 14, w = 14;
  std::mt19937 rng(15);
  const Tensor weights = randomTensor(DType::F32, Shape{cout, cin, 3, 3}, rng, -1, 1);
  const Tensor bias = randomTensor(DType::F32, Shape{cout}, rng, -1, 1);
  Graph g;
  GraphBuilder b(g);
  Value* x = b.input("x", DType::F32, Shape{1, cin, h, w});
  Value* residual = b.input("r", DType::F32, Shape{1, cout, h, w});
  Attributes attrs;
  attrs.set("pads", std::vector<int64_t>{1, 1, 1, 1});
  Value* conv = b.op(OpKind::Conv, {x, b.constant(weights, "w"), b.constant(bias, "b")}, attrs);
  b.output(b.op(OpKind::Relu, {b.op(OpKind::Add, {conv, residual})}));
  ASSERT_TRUE(b.status().isOk()) << b.status().message();
  Expected<std::unique_ptr<CompiledModel>> model = compileJit(g, optionsAt(2));
  ASSERT_TRUE(model.isOk()) << model.status().message();
  const CompileReport& r = (*model)->report();
  ASSERT_NE(r.kernelIr.find(" transposed "), std::string::npos) << r.kernelIr;
  EXPECT_NE(r.llvmIr.find("%epi.tcol"), std::string::npos) << r.llvmIr;
  const Tensor xs = randomTensor(DType::F32, Shape{1, cin, h, w}, rng, -1, 1);
  const Tensor rs = randomTensor(DType::F32, Shape{1, cout, h, w}, rng, -1, 1);
  Expected<std::vector<Tensor>> got = model.value()->run({xs, rs});
  ASSERT_TRUE(got.isOk()) << got.status().message();
  Tensor want = conv3x3Reference(xs, weights, &bias, &rs);
  for (int64_t i = 0; i < want.numel(); ++i) want.setDouble(i, std::max(0.0, want.getDouble(i)));
  expectNear(got->front(), want, 1e-4, 1e-4, "conv + bias + residual + relu");
}

// A run-time B packed a block at a time (a 1 x 1 conv's channel planes, 729 pixels: 22 whole panels
// and a 25-column edge) copies each whole panel row as vector moves (`bpanel.row`): as a scalar loop,
// LLVM had made it a call to memcpy per 128-byte row. The product is float64's.
TEST(CompileJit, WholePanelRowsOfBArePackedAsVectors) {
  constexpr int64_t cin = 128, cout = 32, h = 27, w = 27;
  std::mt19937 rng(14);
  const Tensor weights = randomTensor(DType::F32, Shape{cout, cin, 1, 1}, rng, -1, 1);
  Graph g;
  GraphBuilder b(g);
  Value* x = b.input("x", DType::F32, Shape{1, cin, h, w});
  b.output(b.op(OpKind::Conv, {x, b.constant(weights, "w")}));
  ASSERT_TRUE(b.status().isOk()) << b.status().message();
  Expected<std::unique_ptr<CompiledModel>> model = compileJit(g, optionsAt(2));
  ASSERT_TRUE(model.isOk()) << model.status().message();
  const CompileReport& r = (*model)->report();
  ASSERT_NE(r.kernelIr.find(" direct "), std::string::npos) << r.kernelIr;  // B is the activation, read by rows
  EXPECT_NE(r.llvmIr.find("%bpanel.row"), std::string::npos) << r.llvmIr;
  const Tensor xs = randomTensor(DType::F32, Shape{1, cin, h, w}, rng, -1, 1);
  Expected<std::vector<Tensor>> got = model.value()->run({xs});
  ASSERT_TRUE(got.isOk()) << got.status().message();
  Tensor want(DType::F32, Shape{1, cout, h, w});
  for (int64_t o = 0; o < cout; ++o)
    for (int64_t pixel = 0; pixel < h * w; ++pixel) {
      double sum = 0;
      for (int64_t c = 0; c < cin; ++c) sum += xs.getDouble(c * h * w + pixel) * weights.getDouble(o * cin + c);
      want.setDouble(o * h * w + pixel, sum);
    }
  expectNear(got->front(), want, 1e-4, 1e-4, "1 x 1 conv");
}

// A Pad's rows shorter than LLVM's vector loop (7 points at ResNet's last stage) are split at the
// border and vectorised by the kernel lowering itself (a piece's `.vec` loop), not left to masked
// scalar loads; the copy is exact, the border zero.
TEST(CompileJit, ShortRowsAreVectorisedByTheLowering) {
  auto g = parseOrDie(
      "graph(%x: f32[1x8x7x7]) -> (%y: f32[1x8x9x9]) {\n"
      "  %y = Pad(%x) {mode=\"constant\", pads=[0, 0, 1, 1, 0, 0, 1, 1]} : f32[1x8x9x9]\n"
      "}\n");
  Expected<std::unique_ptr<CompiledModel>> model = compileJit(*g, optionsAt(2));
  ASSERT_TRUE(model.isOk()) << model.status().message();
  const std::string& ir = (*model)->report().llvmIr;
  EXPECT_TRUE(std::regex_search(ir, std::regex("\\.p[0-9]+\\.vec"))) << ir;  // a piece's vector loop
  std::mt19937 rng(13);
  const Tensor xs = randomTensor(DType::F32, Shape{1, 8, 7, 7}, rng, -1, 1);
  Expected<std::vector<Tensor>> got = model.value()->run({xs});
  ASSERT_TRUE(got.isOk()) << got.status().message();
  for (int64_t c = 0; c < 8; ++c)
    for (int64_t y = 0; y < 9; ++y)
      for (int64_t x = 0; x < 9; ++x) {
        const bool inside = y >= 1 && y <= 7 && x >= 1 && x <= 7;
        const double want = inside ? xs.getDouble((c * 7 + y - 1) * 7 + x - 1) : 0.0;
        ASSERT_EQ(got->front().getDouble((c * 9 + y) * 9 + x), want) << c << " " << y << " " << x;
      }
}

// A row kernel asks for the next row's input after its first reduction (softmax: the max pass), so
// that it arrives while the exp pass computes: prefetches of %x in the kernel. A 4 KiB row is 64
// lines: the first 16 into L1 (locality 3), the rest into L2 (locality 2), not 64 line-fill buffers'
// worth at once. A kernel with one pass over its row has nothing to overlap and asks for nothing.
TEST(CompileJit, RowKernelsPrefetchTheNextRowAfterTheirFirstPass) {
  auto softmax = parseOrDie(
      "graph(%x: f32[8x1024]) -> (%y: f32[8x1024]) {\n"
      "  %y = Softmax(%x) {axis=1} : f32[8x1024]\n"
      "}\n");
  Expected<std::unique_ptr<CompiledModel>> model = compileJit(*softmax, optionsAt(2));
  ASSERT_TRUE(model.isOk()) << model.status().message();
  const std::string& ir = (*model)->report().llvmIr;
  // (The hint loops have constant trip counts, which LLVM may unroll: count the hints themselves.)
  auto hints = [](const std::string& text, int locality) {
    const std::regex hint("call void @llvm\\.prefetch\\.p0\\(ptr [^,]+, i32 0, i32 " + std::to_string(locality) +
                          ", i32 1\\)");
    return std::distance(std::sregex_iterator(text.begin(), text.end(), hint), std::sregex_iterator());
  };
  EXPECT_GE(hints(ir, 3), 1) << ir;
  EXPECT_LE(hints(ir, 3), 16) << ir;
  EXPECT_GE(hints(ir, 2), 1) << ir;

  auto sum = parseOrDie(
      "graph(%x: f32[8x1024]) -> (%y: f32[8x1]) {\n"
      "  %y = ReduceSum(%x) {axes=[1]} : f32[8x1]\n"
      "}\n");
  model = compileJit(*sum, optionsAt(2));
  ASSERT_TRUE(model.isOk()) << model.status().message();
  EXPECT_EQ((*model)->report().llvmIr.find("@llvm.prefetch"), std::string::npos);
}

// A GEMM whose packed weights outgrow L2 in one K block hints the next column block into L2 as it
// computes (`prefetcht1`: locality 2), once several row tiles share each block; a single row tile
// streams its weights once and hints its own panel 8 KiB ahead into L2 instead. Either way the
// product is the float64 one.
TEST(CompileJit, LargeWeightsAreHintedABlockAheadWhenRowTilesShareThem) {
  constexpr int64_t k = 768, n = 3072;  // 9.4 MB of weights
  std::mt19937 rng(5);
  const Tensor w = randomTensor(DType::F32, Shape{k, n}, rng, -1, 1);
  for (const int64_t m : {int64_t{4}, int64_t{28}}) {
    Graph g;
    GraphBuilder b(g);
    Value* x = b.input("x", DType::F32, Shape{m, k});
    b.output(b.op(OpKind::MatMul, {x, b.constant(w, "w")}));
    ASSERT_TRUE(b.status().isOk()) << b.status().message();
    Expected<std::unique_ptr<CompiledModel>> model = compileJit(g, optionsAt(2));
    ASSERT_TRUE(model.isOk()) << model.status().message();
    const std::string& ir = (*model)->report().llvmIr;
    EXPECT_NE(ir.find("i32 0, i32 2, i32 1)"), std::string::npos) << "m = " << m;  // an L2 hint
    EXPECT_EQ(ir.find("prefetch.next") != std::string::npos, m == 28) << "m = " << m;
    EXPECT_EQ(ir.find("prefetch.far") != std::string::npos, m == 4) << "m = " << m;
    const Tensor xs = randomTensor(DType::F32, Shape{m, k}, rng, -1, 1);
    Expected<std::vector<Tensor>> got = (*model)->run({xs});
    ASSERT_TRUE(got.isOk()) << got.status().message();
    Tensor want(DType::F32, Shape{m, n});
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        double sum = 0;
        for (int64_t p = 0; p < k; ++p) sum += xs.getDouble(i * k + p) * w.getDouble(p * n + j);
        want.setDouble(i * n + j, sum);
      }
    expectNear(got->front(), want, 1e-4, 1e-4, "m = " + std::to_string(m));
  }
}

// Against packed weights a run-time A block may take 512 KiB of the stack (not 128): a K = 3072
// product then packs several row tiles per block where the L2 holds them (so the weights stream
// fewer times), and the larger block computes the same product (float64 reference).
TEST(CompileJit, LongKAgainstPackedWeightsPacksSeveralRowTiles) {
  constexpr int64_t m = 128, k = 3072, n = 768;  // BERT-base's second feed-forward GEMM
  std::mt19937 rng(9);
  const Tensor w = randomTensor(DType::F32, Shape{k, n}, rng, -1, 1);
  Graph g;
  GraphBuilder b(g);
  Value* x = b.input("x", DType::F32, Shape{m, k});
  b.output(b.op(OpKind::MatMul, {x, b.constant(w, "w")}));
  ASSERT_TRUE(b.status().isOk()) << b.status().message();
  Expected<std::unique_ptr<CompiledModel>> model = compileJit(g, optionsAt(2));
  ASSERT_TRUE(model.isOk()) << model.status().message();
  const std::string& ir = (*model)->report().kernelIr;
  std::smatch blocks;
  ASSERT_TRUE(std::regex_search(ir, blocks,
                                std::regex("B=%[0-9]+ packed tile=([0-9]+)x[0-9]+ .* mc=([0-9]+) "
                                           "nc=[0-9]+ kc=([0-9]+)")))
      << ir;
  const int64_t mr = std::stoll(blocks[1]), mc = std::stoll(blocks[2]), kc = std::stoll(blocks[3]);
  EXPECT_LE(mc * kc * 4, int64_t{512} << 10) << ir;
  const long l2 = sysconf(_SC_LEVEL2_CACHE_SIZE);
  if (l2 >= (1 << 20) && kc == k) {
    EXPECT_GE(mc, 2 * mr) << ir;  // 128 KiB of A would be one 13-row tile
  }
  const Tensor xs = randomTensor(DType::F32, Shape{m, k}, rng, -1, 1);
  Expected<std::vector<Tensor>> got = (*model)->run({xs});
  ASSERT_TRUE(got.isOk()) << got.status().message();
  // Every row (each row tile of each block) at a spread of columns (each panel): the float64 product.
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = i % 7; j < n; j += 7) {
      double sum = 0;
      for (int64_t p = 0; p < k; ++p) sum += xs.getDouble(i * k + p) * w.getDouble(p * n + j);
      ASSERT_NEAR(got->front().getDouble(i * n + j), sum, 1e-4 * (1 + std::abs(sum))) << i << ", " << j;
    }
}

}  // namespace
}  // namespace nnc::testing
