// --precision=bf16 contractions (targets/cpu/codegen/amx.cpp, bf16_dot.cpp) against a float64 product
// of the operands rounded to bfloat16 here (the rounding the precision promises: nearest even), so the
// only difference left is the f32 accumulation: shapes around the 32 x 32 tile and the 256-deep K
// blocks (edge rows and columns, K not a multiple of the 32-deep tile step, ragged K blocks, several
// row and column blocks), batched activations against shared weights, a transposed activation (a
// strided pack), and the epilogues fusion attaches. Each case checks the bf16 path was taken (or, for
// fewer than 16 rows, not) and runs on every unit this host has: AMX tiles, and VDPBF16PS (on an AMX
// host too, with --cpu-features=-amx-tile,-amx-bf16). On a CPU with neither the numeric cases skip;
// the refusal is tested everywhere.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

#include "ir/builder.h"
#include "runtime/cpu_features.h"
#include "runtime/plan.h"
#include "tests/driver/driver_test_util.h"

namespace nnc::testing {
namespace {

bool hostHasAmxBf16() { return rt::hostHasCpuFeature("amx-tile") && rt::hostHasCpuFeature("amx-bf16"); }

// A unit bf16 products run on: the features that select it on this host, and what its plans need.
struct Bf16Unit {
  const char* name;
  const char* cpuFeatures;
  const char* needs;
};

std::vector<Bf16Unit> hostBf16Units() {
  std::vector<Bf16Unit> units;
  if (hostHasAmxBf16()) units.push_back({"amx", "", "needs amx-tile amx-bf16"});
  if (rt::hostHasCpuFeature("avx512f") && rt::hostHasCpuFeature("avx512bf16"))
    units.push_back({"avx512bf16", hostHasAmxBf16() ? "-amx-tile,-amx-bf16" : "", "needs avx512f avx512bf16"});
  return units;
}

// `g` compiled with --precision=bf16 for `unit`: its kernels take the bf16 path exactly when `bf16`
// (and its plan then needs the unit's features), their kernel IR holds `kirMentions`, and its output
// on `inputs` is within `tol` of `want`.
void expectOnUnit(const Graph& g, const Bf16Unit& unit, bool bf16, const std::vector<Tensor>& inputs,
                  const Tensor& want, double tol, const std::string& what,
                  const std::vector<std::string>& kirMentions = {}) {
  SCOPED_TRACE(unit.name);
  CompileOptions options;
  options.precision = Precision::BF16;
  options.cpuFeatures = unit.cpuFeatures;
  std::unique_ptr<Graph> copy = g.clone();  // (compiling rewrites the graph: each unit gets the original)
  Expected<std::unique_ptr<CompiledModel>> model = compileJit(*copy, options);
  ASSERT_TRUE(model.isOk()) << model.status().message();
  const std::string& kir = (*model)->report().kernelIr;
  EXPECT_EQ(kir.find("operands=bf16") != std::string::npos, bf16) << kir;
  EXPECT_EQ((*model)->report().plan.find(unit.needs) != std::string::npos, bf16) << (*model)->report().plan;
  for (const std::string& mention : kirMentions) EXPECT_NE(kir.find(mention), std::string::npos) << mention << kir;
  Expected<std::vector<Tensor>> got = (*model)->run(inputs);
  ASSERT_TRUE(got.isOk()) << got.status().message();
  expectNear(got->front(), want, tol, tol, (what + " on " + unit.name).c_str());
}

// f32 -> bf16 -> f32, round to nearest even (finite inputs), written independently of nnc's.
double roundToBf16(float f) {
  uint32_t u = 0;
  std::memcpy(&u, &f, 4);
  u = (u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u;
  float r = 0;
  std::memcpy(&r, &u, 4);
  return r;
}

enum class Epilogue { None, BiasRelu, Residual };

struct Bf16Case {
  const char* name;
  int64_t batch, m, k, n;
  bool transposeA;  // A is a Transpose of a stored [k, m]: the pack reads it with a column stride
  Epilogue epilogue;
  bool expectBf16 = true;
  bool bf16WithoutAmx = true;  // false: stays f32 on VDPBF16PS (the padding would outweigh its rate)
};

constexpr Bf16Case kCases[] = {
    {"OneTile", 1, 32, 32, 32, false, Epilogue::None},
    {"EdgeRowsColumnsAndK", 1, 45, 77, 50, false, Epilogue::BiasRelu},
    {"SixteenRows", 1, 16, 100, 33, false, Epilogue::Residual},
    // K past 320: 256-deep K blocks, the last ragged; partial sums in the task's own block.
    {"KBlocks", 1, 70, 700, 90, false, Epilogue::BiasRelu},
    {"KBlocksExact", 1, 64, 512, 64, false, Epilogue::None},
    // Several row blocks (128 rows) and column blocks (256 columns), many tasks.
    {"ManyBlocks", 1, 300, 300, 600, false, Epilogue::Residual},
    {"Transformer", 1, 128, 768, 384, false, Epilogue::BiasRelu},
    {"BatchedActivations", 3, 20, 96, 40, false, Epilogue::BiasRelu},
    {"TransposedA", 1, 40, 130, 60, true, Epilogue::Residual},
    // Fewer than 16 rows: a 32-row tile would be mostly padding, so the GEMM stays f32 ...
    {"FewRowsStayF32", 1, 8, 64, 48, false, Epilogue::BiasRelu, false},
    // ... but on AMX not where the weights outgrow L2 (5.2 MB in f32): streamed, half the bytes in
    // bf16. One row (a classifier's) and a few.
    {"OneRowLargeWeightsBf16OnAmx", 1, 1, 2048, 640, false, Epilogue::BiasRelu, true, false},
    {"FewRowsLargeWeightsBf16OnAmx", 1, 5, 2048, 650, false, Epilogue::Residual, true, false},
    // K past 8192: a 32-row tile of A's whole K would outgrow the stack bound; the f32 GEMM it is.
    {"VeryLongKStaysF32", 1, 20, 9000, 40, false, Epilogue::None, false},
    // 16 columns (or K below 32): half of each 32-wide panel padding, which only AMX outruns.
    {"SixteenColumnsF32WithoutAmx", 1, 64, 96, 16, false, Epilogue::BiasRelu, true, false},
    {"ShallowKF32WithoutAmx", 1, 64, 16, 96, false, Epilogue::Residual, true, false},
};

// The case compiled for each unit this host has, against the float64 product of the rounded operands.
void expectBf16Gemm(const Bf16Case& c, uint32_t seed = 11) {
  std::mt19937 rng(seed);
  const Shape aShape = c.batch > 1 ? Shape({c.batch, c.m, c.k}) : c.transposeA ? Shape({c.k, c.m}) : Shape({c.m, c.k});
  const Shape outShape = c.batch > 1 ? Shape({c.batch, c.m, c.n}) : Shape({c.m, c.n});
  Tensor a = randomTensor(DType::F32, aShape, rng), w = randomTensor(DType::F32, Shape({c.k, c.n}), rng);
  Tensor bias = randomTensor(DType::F32, Shape({c.n}), rng), residual = randomTensor(DType::F32, outShape, rng);
  Graph g;
  GraphBuilder b(g);
  Value* av = b.input("a", DType::F32, aShape);
  if (c.transposeA) {
    Attributes perm;
    perm.set("perm", std::vector<int64_t>{1, 0});
    av = b.op(OpKind::Transpose, {av}, perm);
  }
  Value* y = b.matmul(av, b.constant(w, "w"));
  std::vector<Tensor> inputs = {a};
  if (c.epilogue == Epilogue::BiasRelu) y = b.relu(b.add(y, b.constant(bias, "bias")));
  if (c.epilogue == Epilogue::Residual) {
    y = b.add(y, b.input("r", DType::F32, outShape));
    inputs.push_back(residual);
  }
  b.output(y);
  ASSERT_TRUE(b.status().isOk()) << b.status().message();

  // The product of the operands rounded to bf16 (rounded = true) or as they are, in float64.
  double largest = 0;
  auto oracle = [&](bool rounded) {
    Tensor want(DType::F32, outShape);
    for (int64_t bi = 0; bi < c.batch; ++bi)
      for (int64_t i = 0; i < c.m; ++i)
        for (int64_t j = 0; j < c.n; ++j) {
          double sum = 0;
          for (int64_t p = 0; p < c.k; ++p) {
            const int64_t ai = c.transposeA ? p * c.m + i : (bi * c.m + i) * c.k + p;
            const float av32 = static_cast<float>(a.getDouble(ai)), wv32 = static_cast<float>(w.getDouble(p * c.n + j));
            sum += rounded ? roundToBf16(av32) * roundToBf16(wv32) : static_cast<double>(av32) * wv32;
          }
          const int64_t o = (bi * c.m + i) * c.n + j;
          if (c.epilogue == Epilogue::BiasRelu) sum = std::max(0.0, sum + bias.getDouble(j));
          if (c.epilogue == Epilogue::Residual) sum += residual.getDouble(o);
          want.setDouble(o, sum);
          largest = std::max(largest, std::abs(sum));
        }
    return want;
  };
  const Tensor wantRounded = oracle(true), wantExact = oracle(false);
  // f32 sums of k products (each exact in f32: two 8-bit significands): rounding alone.
  const double tol = 2e-7 * static_cast<double>(c.k) * std::max(1.0, largest / 8) + 1e-6;
  for (const Bf16Unit& unit : hostBf16Units()) {
    const bool bf16 = c.expectBf16 && (std::string(unit.name) == "amx" || c.bf16WithoutAmx);
    // (A packed GEMM either way.)
    expectOnUnit(g, unit, bf16, inputs, bf16 ? wantRounded : wantExact, tol, c.name, {"contraction batch"});
  }
}

class Bf16Contraction : public ::testing::TestWithParam<Bf16Case> {};

TEST_P(Bf16Contraction, MatchesTheRoundedOperandsProductInFloat64) {
  if (hostBf16Units().empty()) GTEST_SKIP() << "this CPU has neither AMX-BF16 nor AVX512-BF16";
  expectBf16Gemm(GetParam());
}

INSTANTIATE_TEST_SUITE_P(Cases, Bf16Contraction, ::testing::ValuesIn(kCases),
                         [](const ::testing::TestParamInfo<Bf16Case>& info) { return info.param.name; });

// Attention's heads merged back before the output projection: A = Reshape(Transpose(x [h, s, d]),
// [s, h d]), a separable read (column p at (p / d) s d + p % d) that the bf16 pack gathers.
TEST(Bf16Precision, ASeparableActivationIsGatheredAsItIsPacked) {
  if (hostBf16Units().empty()) GTEST_SKIP() << "this CPU has neither AMX-BF16 nor AVX512-BF16";
  const int64_t h = 4, s = 40, d = 24, n = 50;
  std::mt19937 rng(5);
  Tensor x = randomTensor(DType::F32, Shape({h, s, d}), rng), w = randomTensor(DType::F32, Shape({h * d, n}), rng);
  Graph g;
  GraphBuilder b(g);
  Attributes perm;
  perm.set("perm", std::vector<int64_t>{1, 0, 2});
  Attributes shape;
  shape.set("shape", std::vector<int64_t>{s, h * d});
  Value* merged = b.op(OpKind::Reshape, {b.op(OpKind::Transpose, {b.input("x", DType::F32, x.shape())}, perm)}, shape);
  b.output(b.matmul(merged, b.constant(w, "w")));
  ASSERT_TRUE(b.status().isOk()) << b.status().message();
  Tensor want(DType::F32, Shape({s, n}));
  for (int64_t i = 0; i < s; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double sum = 0;
      for (int64_t p = 0; p < h * d; ++p)
        sum += roundToBf16(static_cast<float>(x.getDouble(((p / d) * s + i) * d + p % d))) *
               roundToBf16(static_cast<float>(w.getDouble(p * n + j)));
      want.setDouble(i * n + j, sum);
    }
  for (const Bf16Unit& unit : hostBf16Units())
    expectOnUnit(g, unit, true, {x}, want, 1e-4, "heads merged", {"separable"});
}

// Convolutions (channel-first): the weights the compile-time packed B of a transposed GEMM, pixels x
// output channels, the input's patches read through the separable pack (padding, strides) or, for a
// 1 x 1 conv, the activations read as channels x pixels; bias and ReLU in the epilogue.
struct Bf16ConvCase {
  const char* name;
  int64_t cin, cout, h, w, kernel, stride, pad;
};

constexpr Bf16ConvCase kConvCases[] = {
    {"ThreeByThree", 24, 40, 13, 11, 3, 1, 1},
    {"ThreeByThreeStrided", 32, 36, 15, 14, 3, 2, 1},
    // Output rows of 37 pixels: most 16-pixel groups lie within one (packed as transposed blocks),
    // some cross two (packed row by row); K = 171, a ragged 16-column block at the end.
    {"ThreeByThreeWideRows", 19, 40, 6, 37, 3, 1, 1},
    // Rows of 7 pixels: each 16-pixel group in 3 or 4 runs (masked loads).
    {"ThreeByThreeNarrowRows", 20, 33, 7, 7, 3, 1, 1},
    // Stride 2 along rows of 20 output pixels: groups of every other float.
    {"ThreeByThreeStridedWideRows", 12, 40, 9, 40, 3, 2, 1},
    {"PointwiseManyChannels", 300, 70, 9, 10, 1, 1, 0},  // K blocks of 256, the last ragged
    {"SevenBySevenStem", 3, 34, 22, 20, 7, 2, 3},
};

// The conv (+ bias, ReLU) compiled for each unit this host has, against the float64 conv of the
// rounded operands; bf16 expected unless the GEMM is too small for it (fewer than 16 pixels, or
// without AMX K or output channels below 32).
void expectBf16Conv(const Bf16ConvCase& c, uint32_t seed = 17) {
  std::mt19937 rng(seed);
  const int64_t kk = c.kernel, oh = (c.h + 2 * c.pad - kk) / c.stride + 1, ow = (c.w + 2 * c.pad - kk) / c.stride + 1;
  Tensor x = randomTensor(DType::F32, Shape({1, c.cin, c.h, c.w}), rng);
  Tensor w = randomTensor(DType::F32, Shape({c.cout, c.cin, kk, kk}), rng);
  Tensor bias = randomTensor(DType::F32, Shape({c.cout}), rng);
  Graph g;
  GraphBuilder b(g);
  Attributes attrs;
  attrs.set("kernel_shape", std::vector<int64_t>{kk, kk});
  attrs.set("strides", std::vector<int64_t>{c.stride, c.stride});
  attrs.set("pads", std::vector<int64_t>{c.pad, c.pad, c.pad, c.pad});
  Value* conv =
      b.op(OpKind::Conv, {b.input("x", DType::F32, x.shape()), b.constant(w, "w"), b.constant(bias, "b")}, attrs);
  b.output(b.relu(conv));
  ASSERT_TRUE(b.status().isOk()) << b.status().message();
  auto oracle = [&](bool rounded) {
    auto r = [&](double v) { return rounded ? roundToBf16(static_cast<float>(v)) : v; };
    Tensor want(DType::F32, Shape({1, c.cout, oh, ow}));
    for (int64_t o = 0; o < c.cout; ++o)
      for (int64_t y = 0; y < oh; ++y)
        for (int64_t xo = 0; xo < ow; ++xo) {
          double sum = bias.getDouble(o);
          for (int64_t ci = 0; ci < c.cin; ++ci)
            for (int64_t ky = 0; ky < kk; ++ky)
              for (int64_t kx = 0; kx < kk; ++kx) {
                const int64_t iy = y * c.stride - c.pad + ky, ix = xo * c.stride - c.pad + kx;
                if (iy < 0 || iy >= c.h || ix < 0 || ix >= c.w) continue;
                sum +=
                    r(x.getDouble((ci * c.h + iy) * c.w + ix)) * r(w.getDouble(((o * c.cin + ci) * kk + ky) * kk + kx));
              }
          want.setDouble((o * oh + y) * ow + xo, std::max(0.0, sum));
        }
    return want;
  };
  const Tensor wantRounded = oracle(true), wantExact = oracle(false);
  const int64_t depth = c.cin * kk * kk;
  const double tol = 2e-7 * static_cast<double>(depth) * 4 + 1e-5;
  for (const Bf16Unit& unit : hostBf16Units()) {
    const bool bf16 = oh * ow >= 16 && (std::string(unit.name) == "amx" || (depth >= 32 && c.cout >= 32));
    expectOnUnit(g, unit, bf16, {x}, bf16 ? wantRounded : wantExact, tol, c.name,
                 bf16 ? std::vector<std::string>{"transposed"} : std::vector<std::string>{});
  }
}

class Bf16Conv : public ::testing::TestWithParam<Bf16ConvCase> {};

TEST_P(Bf16Conv, MatchesTheRoundedOperandsConvInFloat64) {
  if (hostBf16Units().empty()) GTEST_SKIP() << "this CPU has neither AMX-BF16 nor AVX512-BF16";
  expectBf16Conv(GetParam());
}

INSTANTIATE_TEST_SUITE_P(Cases, Bf16Conv, ::testing::ValuesIn(kConvCases),
                         [](const ::testing::TestParamInfo<Bf16ConvCase>& info) { return info.param.name; });

// Seeded random shapes around the tile, block and pack boundaries (every draw is logged by its
// trace): GEMMs with K blocks, edge tiles, batches and transposed activations; convs with 1 x 1 to
// 7 x 7 kernels, strides 1 and 2, and image rows from 5 to 40 pixels (one run, two, several, or every
// other float per 16-row group in the pack).
TEST(Bf16Precision, RandomGemmShapesMatchTheOracle) {
  if (hostBf16Units().empty()) GTEST_SKIP() << "this CPU has neither AMX-BF16 nor AVX512-BF16";
  std::mt19937 rng(2026);
  auto draw = [&](int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng); };
  for (int i = 0; i < 16; ++i) {
    Bf16Case c{"random",
               draw(1, 2),
               draw(16, 170),
               draw(8, 700),
               draw(8, 300),
               draw(0, 3) == 0,
               static_cast<Epilogue>(draw(0, 2))};
    if (c.batch > 1) c.transposeA = false;
    c.bf16WithoutAmx = c.k >= 32 && c.n >= 32;
    SCOPED_TRACE("batch " + std::to_string(c.batch) + " m " + std::to_string(c.m) + " k " + std::to_string(c.k) +
                 " n " + std::to_string(c.n) + (c.transposeA ? " transposed A" : ""));
    expectBf16Gemm(c, static_cast<uint32_t>(100 + i));
  }
}

TEST(Bf16Precision, RandomConvShapesMatchTheOracle) {
  if (hostBf16Units().empty()) GTEST_SKIP() << "this CPU has neither AMX-BF16 nor AVX512-BF16";
  std::mt19937 rng(2027);
  auto draw = [&](int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng); };
  for (int i = 0; i < 16; ++i) {
    const int64_t kernel = 2 * draw(0, 3) + 1;
    Bf16ConvCase c{"random", draw(1, 40), draw(24, 72),       draw(kernel, 24), draw(std::max<int64_t>(kernel, 5), 40),
                   kernel,   draw(1, 2),  draw(0, kernel / 2)};
    SCOPED_TRACE("cin " + std::to_string(c.cin) + " cout " + std::to_string(c.cout) + " " + std::to_string(c.h) + "x" +
                 std::to_string(c.w) + " kernel " + std::to_string(kernel) + " stride " + std::to_string(c.stride) +
                 " pad " + std::to_string(c.pad));
    expectBf16Conv(c, static_cast<uint32_t>(200 + i));
  }
}

// A CPU with neither AMX-BF16 nor AVX512-BF16, or a tile target without them (here: AVX2's 256-bit
// vectors on any host), is refused with what is missing, not compiled to f32 behind the user's back;
// so is a feature LLVM does not know.
TEST(Bf16Precision, RefusedWhereTheCpuHasNoBf16Unit) {
  Graph g;
  GraphBuilder b(g);
  std::mt19937 rng(3);
  b.output(b.matmul(b.input("a", DType::F32, Shape({32, 32})),
                    b.constant(randomTensor(DType::F32, Shape({32, 32}), rng), "w")));
  CompileOptions options;
  options.precision = Precision::BF16;
  options.vectorBits = 256;
  Expected<std::unique_ptr<CompiledModel>> model = compileJit(g, options);
  ASSERT_FALSE(model.isOk());
  EXPECT_NE(model.status().message().find("needs a CPU with AMX-BF16 (amx-tile and amx-bf16) or AVX512-BF16"),
            std::string::npos)
      << model.status().message();
  options.vectorBits = 0;
  options.cpuFeatures = "-amx-tile,-avx512bf16";  // neither unit left, whatever the host has
  model = compileJit(g, options);
  ASSERT_FALSE(model.isOk());
  EXPECT_NE(model.status().message().find("needs a CPU with AMX-BF16"), std::string::npos) << model.status().message();
  for (const char* bad : {"-no-such-feature", "avx512f", "+"}) {
    options.cpuFeatures = bad;
    model = compileJit(g, options);
    ASSERT_FALSE(model.isOk()) << bad;
    EXPECT_NE(model.status().message().find(std::string("--cpu-features: '") + bad + "'"), std::string::npos)
        << model.status().message();
  }
  options.cpuFeatures.clear();
  options.precision = Precision::FP16;  // the cuda target's
  model = compileJit(g, options);
  ASSERT_FALSE(model.isOk());
  EXPECT_NE(model.status().message().find("--precision=fp16 is for the cuda target"), std::string::npos)
      << model.status().message();
  options.target = "cuda";
  options.precision = Precision::Auto;
  options.vectorBits = 0;
  model = compileJit(g, options);
  ASSERT_FALSE(model.isOk());
  EXPECT_NE(model.status().message().find("--precision=auto is not implemented for target cuda"), std::string::npos)
      << model.status().message();
}

// The runtime checks what a plan says its kernels need before it runs any: a feature this host lacks
// (or one the runtime does not know) is named.
TEST(Bf16Precision, APlanNeedingWhatTheHostLacksIsRefused) {
  std::string error;
  EXPECT_FALSE(rt::ensureCpuFeatures({"avx2", "no-such-feature"}, &error));
  EXPECT_NE(error.find("lacks no-such-feature"), std::string::npos) << error;
  EXPECT_TRUE(rt::ensureCpuFeatures({}, &error));
  if (hostHasAmxBf16()) {
    EXPECT_TRUE(rt::ensureCpuFeatures({"amx-tile", "amx-bf16"}, &error)) << error;
  }
  rt::Plan plan;
  plan.cpuFeatures = {"amx-tile", "amx-bf16"};
  rt::Plan back;
  const std::vector<uint8_t> bytes = rt::serializePlan(plan);
  ASSERT_TRUE(rt::deserializePlan(bytes.data(), bytes.size(), &back, &error)) << error;
  EXPECT_EQ(back.cpuFeatures, plan.cpuFeatures);
}

}  // namespace
}  // namespace nnc::testing
