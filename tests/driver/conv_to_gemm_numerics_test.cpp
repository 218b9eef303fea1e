// conv-to-gemm numerics, independent of any GPU: Im2Col + MatMul + Reshape + bias computes what Conv
// computes, and MatMul + Col2ImSum + bias what ConvTranspose does (each op's own kernel is checked against the ONNX
// backend data), for strides, asymmetric pads, dilations, auto_pad, 1-D/3-D, 1x1, groups and f64, in the reference
// evaluator and through the CPU JIT at -O0 and -O2 (the pass runs for the cuda target only; here it is applied by
// hand).
#include <gtest/gtest.h>

#include <random>

#include "driver/compiler.h"
#include "ir/builder.h"
#include "ir/reference.h"
#include "passes/pass.h"

namespace nnc::passes {
namespace {

// --- Numerics -----------------------------------------------------------------------------------

struct ConvCase {
  std::string name;
  std::vector<int64_t> x, w;  // shapes
  Attributes attrs;
  bool bias = true;
  bool constantWeights = true;
  DType dtype = DType::F32;
  OpKind op = OpKind::Conv;  // or ConvTranspose (w is [C, M, k...], the bias [M])
};

Attributes convAttrs(std::vector<int64_t> strides, std::vector<int64_t> pads, std::vector<int64_t> dilations,
                     std::string autoPad = "NOTSET") {
  Attributes a;
  if (!strides.empty()) a.set("strides", strides);
  if (!pads.empty()) a.set("pads", pads);
  if (!dilations.empty()) a.set("dilations", dilations);
  a.set("auto_pad", autoPad);
  return a;
}

Attributes withInts(Attributes a, const char* name, std::vector<int64_t> values) {
  a.set(name, values);
  return a;
}

Attributes grouped(Attributes a, int64_t groups) {
  a.set("group", groups);
  return a;
}

// The case as a ConvTranspose (w is then [C, M, k...]).
ConvCase transposed(ConvCase c) {
  c.op = OpKind::ConvTranspose;
  return c;
}

std::vector<ConvCase> convCases() {
  return {
      {"3x3", {2, 3, 7, 6}, {4, 3, 3, 3}, convAttrs({}, {}, {})},
      {"strided_asymmetric_pads", {1, 2, 9, 8}, {5, 2, 3, 2}, convAttrs({2, 3}, {1, 0, 2, 1}, {})},
      {"dilated", {1, 3, 10, 10}, {2, 3, 3, 3}, convAttrs({1, 1}, {2, 2, 2, 2}, {2, 2})},
      {"same_upper", {2, 2, 5, 7}, {3, 2, 4, 3}, convAttrs({2, 2}, {}, {}, "SAME_UPPER")},
      {"same_lower", {1, 2, 6, 5}, {3, 2, 2, 3}, convAttrs({1, 2}, {}, {}, "SAME_LOWER")},
      {"valid", {1, 1, 6, 6}, {2, 1, 3, 3}, convAttrs({}, {}, {}, "VALID"), false},
      {"1d", {2, 3, 11}, {4, 3, 5}, convAttrs({2}, {2, 1}, {})},
      {"3d", {1, 2, 4, 5, 3}, {3, 2, 2, 3, 2}, convAttrs({1, 2, 1}, {0, 1, 1, 1, 0, 0}, {})},
      {"pointwise", {2, 8, 5, 5}, {6, 8, 1, 1}, convAttrs({}, {}, {})},
      {"pointwise_strided", {1, 4, 6, 6}, {3, 4, 1, 1}, convAttrs({2, 2}, {}, {})},
      {"weights_as_input", {1, 3, 6, 5}, {2, 3, 3, 2}, convAttrs({}, {1, 1, 1, 1}, {}), true, false},
      {"f64", {1, 2, 6, 6}, {3, 2, 3, 3}, convAttrs({}, {1, 1, 1, 1}, {}), true, true, DType::F64},
      // Grouped: one GEMM per group, batched over the groups.
      {"grouped_3x3", {1, 8, 9, 9}, {12, 4, 3, 3}, grouped(convAttrs({}, {1, 1, 1, 1}, {}), 2)},
      {"grouped_strided", {1, 16, 10, 11}, {8, 4, 3, 3}, grouped(convAttrs({2, 2}, {1, 0, 1, 1}, {}), 4)},
      {"grouped_pointwise", {1, 32, 5, 5}, {16, 16, 1, 1}, grouped(convAttrs({}, {}, {}), 2)},
      {"grouped_runtime_weights", {1, 6, 7, 7}, {9, 2, 3, 3}, grouped(convAttrs({}, {1, 1, 1, 1}, {}), 3), true, false},
      // ConvTranspose (8+ input channels): a GEMM, then Col2ImSum.
      transposed({"transpose_3x3", {2, 8, 5, 6}, {8, 4, 3, 3}, convAttrs({}, {}, {})}),
      transposed({"transpose_strided_padded", {1, 12, 7, 5}, {12, 3, 4, 3}, convAttrs({2, 3}, {1, 0, 2, 1}, {})}),
      transposed({"transpose_dilated_output_padding",
                  {1, 8, 4, 4},
                  {8, 2, 3, 3},
                  withInts(convAttrs({2, 2}, {}, {2, 1}), "output_padding", {1, 0}),
                  /*bias=*/false}),
      transposed({"transpose_output_shape",
                  {1, 9, 3, 4},
                  {9, 2, 3, 3},
                  withInts(convAttrs({2, 2}, {}, {}), "output_shape", {7, 8})}),
      transposed({"transpose_same_upper", {1, 8, 4, 5}, {8, 3, 3, 2}, convAttrs({2, 2}, {}, {}, "SAME_UPPER")}),
      transposed({"transpose_1d_runtime_weights",
                  {2, 10, 9},
                  {10, 3, 4},
                  convAttrs({3}, {1, 2}, {}),
                  true,
                  /*constantWeights=*/false}),
      transposed(
          {"transpose_3d_f64", {1, 8, 3, 2, 3}, {8, 2, 2, 3, 2}, convAttrs({2, 1, 2}, {}, {}), true, true, DType::F64}),
  };
}

Tensor randomTensor(DType dtype, const Shape& shape, std::mt19937& rng) {
  std::uniform_real_distribution<double> u(-1, 1);
  Tensor t(dtype, shape);
  for (int64_t i = 0; i < t.numel(); ++i) t.setDouble(i, u(rng));
  return t;
}

// The case as a one-Conv graph; its runtime inputs (x, and w unless constant) in *feeds.
std::unique_ptr<Graph> convGraph(const ConvCase& c, std::vector<Tensor>* feeds) {
  std::mt19937 rng(7);
  auto g = std::make_unique<Graph>();
  GraphBuilder b(*g);
  Tensor xt = randomTensor(c.dtype, Shape(c.x), rng), wt = randomTensor(c.dtype, Shape(c.w), rng);
  Tensor bt = randomTensor(c.dtype, Shape({c.op == OpKind::ConvTranspose ? c.w[1] : c.w[0]}), rng);
  feeds->assign({xt});
  Value* x = b.input("x", c.dtype, Shape(c.x));
  Value* w = c.constantWeights ? b.constant(wt, "w") : b.input("w", c.dtype, Shape(c.w));
  if (!c.constantWeights) feeds->push_back(wt);
  std::vector<Value*> ins = {x, w};
  if (c.bias) ins.push_back(b.constant(bt, "b"));
  b.output(b.op(c.op, ins, c.attrs, "conv"));
  EXPECT_TRUE(b.status().isOk()) << c.name << ": " << b.status().message();
  return g;
}

void expectClose(const std::vector<Tensor>& got, const std::vector<Tensor>& want, double tol, const std::string& what) {
  ASSERT_EQ(got.size(), 1u) << what;
  ASSERT_EQ(got[0].shape(), want[0].shape()) << what;
  for (int64_t i = 0; i < want[0].numel(); ++i)
    ASSERT_NEAR(got[0].getDouble(i), want[0].getDouble(i), tol) << what << ": element " << i;
}

TEST(ConvToGemm, ComputesWhatConvComputes) {
  for (const ConvCase& c : convCases()) {
    std::vector<Tensor> feeds;
    auto original = convGraph(c, &feeds);
    auto want = evaluateGraph(*original, feeds);  // Conv's own kernel (checked against ONNX's data)
    ASSERT_TRUE(want.isOk()) << c.name << ": " << want.status().message();

    auto rewritten = convGraph(c, &feeds);
    Expected<bool> changed = convToGemm(*rewritten);
    ASSERT_TRUE(changed.isOk() && *changed) << c.name;
    for (const Node* n : rewritten->nodes()) EXPECT_NE(n->op(), c.op) << c.name;
    const double tol = c.dtype == DType::F64 ? 1e-12 : 1e-5;
    auto got = evaluateGraph(*rewritten, feeds);
    ASSERT_TRUE(got.isOk()) << c.name << ": " << got.status().message();
    expectClose(*got, *want, tol, c.name + " (reference evaluator)");
    for (int level : {0, 2}) {
      auto g = convGraph(c, &feeds);
      ASSERT_TRUE(convToGemm(*g).isOk());
      CompileOptions o;
      o.optLevel = level;
      o.verifyEachPass = true;
      auto jit = compileJit(*g, o);
      ASSERT_TRUE(jit.isOk()) << c.name << ": " << jit.status().message();
      auto out = (*jit)->run(feeds);
      ASSERT_TRUE(out.isOk()) << c.name << ": " << out.status().message();
      expectClose(*out, *want, tol, c.name + " (CPU JIT -O" + std::to_string(level) + ")");
    }
  }
}

}  // namespace
}  // namespace nnc::passes
