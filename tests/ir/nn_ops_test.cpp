// Tests for the neural-network op definitions (ir/ops/contraction.cpp, conv.cpp, nhwc.cpp, pool.cpp
// and topk.cpp) and the TopK host kernel: shapes, diagnostics, and values through the reference
// evaluator against numpy-computed constants.
// Inputs come from seq(), a formula reproduced in the numpy script, and are multiples of 1/4 so
// that most expected values are exact in f32. The conv/pool references were numpy loops (scatter
// form for ConvTranspose) cross-checked against onnx.reference; pool semantics were also checked
// against the ONNX backend test data.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "ir/builder.h"
#include "ir/reference.h"

namespace nnc {
namespace {

using Ints = std::vector<int64_t>;

// numpy: (((arange(n) * a) % b) - b // 2) * 0.25
Tensor seq(Shape shape, int64_t a, int64_t b, DType t = DType::F32) {
  Tensor x(t, std::move(shape));
  for (int64_t i = 0; i < x.numel(); ++i) x.setDouble(i, static_cast<double>((i * a) % b - b / 2) * 0.25);
  return x;
}

Tensor tensorOf(DType t, Shape s, const std::vector<double>& values) {
  Tensor x(t, std::move(s));
  EXPECT_EQ(x.numel(), static_cast<int64_t>(values.size()));
  for (size_t i = 0; i < values.size(); ++i) x.setDouble(static_cast<int64_t>(i), values[i]);
  return x;
}

Attributes attrs(std::vector<std::pair<std::string, AttrValue>> list) {
  Attributes a;
  for (auto& [name, value] : list) a.set(name, std::move(value));
  return a;
}

// One-node graph (folding off) run through the reference evaluator; all outputs, or empty after a
// reported failure.
std::vector<Tensor> runOpMulti(OpKind op, const std::vector<Tensor>& inputs, Attributes a, int numOutputs) {
  Graph g;
  GraphBuilder b(g);
  b.setFolding(false);
  std::vector<Value*> ins;
  for (size_t i = 0; i < inputs.size(); ++i)
    ins.push_back(b.input("in" + std::to_string(i), inputs[i].dtype(), inputs[i].shape()));
  std::vector<Value*> outs = b.opMulti(op, ins, std::move(a), numOutputs, "n");
  EXPECT_TRUE(b.status().isOk()) << b.status().message();
  if (!b.status().isOk()) return {};
  for (Value* v : outs) b.output(v);
  auto result = evaluateGraph(g, inputs);
  EXPECT_TRUE(result.isOk()) << result.status().message();
  if (!result.isOk()) return {};
  return result.value();
}

Tensor runOp(OpKind op, const std::vector<Tensor>& inputs, Attributes a = {}) {
  std::vector<Tensor> outs = runOpMulti(op, inputs, std::move(a), 1);
  return outs.empty() ? Tensor() : outs[0];
}

std::string buildError(OpKind op, const std::vector<std::pair<DType, Shape>>& inputs, Attributes a = {},
                       int numOutputs = -1) {
  Graph g;
  GraphBuilder b(g);
  b.setFolding(false);
  std::vector<Value*> ins;
  for (size_t i = 0; i < inputs.size(); ++i)
    ins.push_back(b.input("in" + std::to_string(i), inputs[i].first, inputs[i].second));
  b.opMulti(op, ins, std::move(a), numOutputs, "n");
  return b.status().message();
}

void expectValues(const Tensor& t, DType dtype, const Shape& shape, const std::vector<double>& expected,
                  double tol = 1e-6) {
  ASSERT_FALSE(t.isNull());
  EXPECT_EQ(t.dtype(), dtype);
  ASSERT_EQ(t.shape(), shape);
  std::vector<double> got = t.toDoubles();
  ASSERT_EQ(got.size(), expected.size());
  for (size_t i = 0; i < got.size(); ++i)
    EXPECT_NEAR(got[i], expected[i], tol * std::max(1.0, std::abs(expected[i]))) << "at " << i;
}

void expectInts(const Tensor& t, const Shape& shape, const std::vector<int64_t>& expected) {
  ASSERT_FALSE(t.isNull());
  EXPECT_EQ(t.dtype(), DType::I64);
  ASSERT_EQ(t.shape(), shape);
  EXPECT_EQ(t.toInt64s(), expected);
}

// --- MatMul

TEST(NnOps, MatMulBatchedBroadcast) {
  Tensor y = runOp(OpKind::MatMul, {seq({2, 1, 2, 3}, 7, 11), seq({3, 3, 2}, 5, 9)});
  expectValues(y, DType::F32, {2, 3, 2, 2},
               {1.125, -0.4375, -1.0625, -0.125, 0.1875, -1.375, -0.5, 1.5625, -0.75, 0.5,  0.0625,  -0.6875,
                -0.5,  -0.5,    0.0625,  -0.875, -0.5,   1.75,   -0.5, 1.9375, -0.5,  -0.5, -1.0625, -0.3125});
}

TEST(NnOps, MatMulVectorOperands) {
  expectValues(runOp(OpKind::MatMul, {seq({3}, 3, 7), seq({3, 4}, 5, 9)}), DType::F32, {4},
               {0.75, -0.9375, 0.75, -0.9375});
  expectValues(runOp(OpKind::MatMul, {seq({2, 3}, 3, 7), seq({3}, 5, 9)}), DType::F32, {2}, {0.1875, 0.75});
}

TEST(NnOps, MatMulIntegerAndHalf) {
  Tensor a = tensorOf(DType::I32, {2, 3}, {-3, 0, 3, -1, 2, -2});
  Tensor b = tensorOf(DType::I32, {3, 2}, {-4, 1, -3, 2, -2, 3});
  expectValues(runOp(OpKind::MatMul, {a, b}), DType::I32, {2, 2}, {6, 6, 2, -3}, 0);
  // f16 storage, f32 accumulation; every value here is exact in f16.
  Tensor y = runOp(OpKind::MatMul, {seq({2, 3}, 3, 7, DType::F16), seq({3}, 5, 9, DType::F16)});
  expectValues(y, DType::F16, {2}, {0.1875, 0.75}, 0);
}

// --- Einsum

TEST(NnOps, EinsumBatchedMatMul) {
  Tensor y = runOp(OpKind::Einsum, {seq({2, 2, 3}, 7, 11), seq({2, 3, 2}, 5, 9)},
                   attrs({{"equation", std::string("bij,bjk->bik")}}));
  expectValues(y, DType::F32, {2, 2, 2}, {1.125, -0.4375, -1.0625, -0.125, -0.5, 1.75, -0.5, 1.9375});
}

TEST(NnOps, EinsumDiagonalTraceAndEllipsis) {
  expectValues(runOp(OpKind::Einsum, {seq({3, 3}, 7, 11)}, attrs({{"equation", std::string("ii->i")}})), DType::F32,
               {3}, {-1.25, 0.25, -1});
  // Implicit output: letters appearing once; none here, so the trace.
  expectValues(runOp(OpKind::Einsum, {seq({3, 3}, 7, 11)}, attrs({{"equation", std::string("ii")}})), DType::F32, {},
               {-2});
  // Implicit output with an ellipsis: "...ik"; B's missing batch dims broadcast.
  Tensor y = runOp(OpKind::Einsum, {seq({2, 2, 3}, 7, 11), seq({3, 2}, 5, 9)},
                   attrs({{"equation", std::string("... i j , j k")}}));
  expectValues(y, DType::F32, {2, 2, 2}, {1.125, -0.4375, -1.0625, -0.125, -0.5, -0.5, 0.0625, -0.875});
}

// --- Conv

TEST(NnOps, Conv2DPadsStridesDilationsGroupBias) {
  Tensor y = runOp(
      OpKind::Conv, {seq({1, 4, 5, 6}, 7, 11), seq({4, 2, 3, 2}, 5, 9), seq({4}, 3, 7)},
      attrs({{"pads", Ints{1, 0, 2, 1}}, {"strides", Ints{2, 1}}, {"dilations", Ints{1, 2}}, {"group", int64_t{2}}}));
  expectValues(
      y, DType::F32, {1, 4, 3, 5},
      {-0.1875, 0.625,   -0.625, -1.875,  -0.8125, -1.6875, 0.5,     -0.75,   -4.0625, 0.4375,  0.375,  -0.4375,
       -4,      0.6875,  0,      -0.375,  -0.5,    -0.625,  1.3125,  -0.4375, -0.9375, -1,      1.6875, 0.25,
       -1.0625, -0.375,  2.1875, -0.0625, -0.25,   0.1875,  -0.625,  2.8125,  -0.625,  0.0625,  2.0625, 2.25,
       1.5,     0.0625,  1.375,  0.25,    2.0625,  0.4375,  1.5625,  0.625,   -0.0625, 0.25,    1.0625, -0.875,
       -0.75,   -0.8125, 2.1875, -2.5,    0.375,   -2.25,   -0.1875, -2.5,    1.5,     -2.0625, 0.5625, 1.5625});
}

TEST(NnOps, ConvSameUpper) {
  // Axis 0: out 4, total pad 1 -> (0, 1), the odd pad at the end; axis 1: out 3, pads (1, 1).
  Tensor y = runOp(OpKind::Conv, {seq({1, 2, 4, 5}, 7, 11), seq({3, 2, 2, 3}, 5, 9)},
                   attrs({{"auto_pad", std::string("SAME_UPPER")}, {"strides", Ints{1, 2}}}));
  expectValues(y, DType::F32, {1, 3, 4, 3},
               {1.3125, -4.1875, -3.6875, -1.3125, -2.1875, 1.4375, -1.875,  -0.1875, 3.125,  0.125,  0.9375, 0.9375,
                0.1875, 2,       1.375,   2.0625,  -1.0625, -1.375, -0.1875, 0,       -1.375, -1.75,  -1.5,   1.5,
                -1.5,   -0.8125, 1.375,   -1.3125, 2.3125,  3.125,  0.9375,  1.3125,  1.4375, 1.4375, 1.125,  -1.875});
}

TEST(NnOps, Conv1D) {
  Tensor y = runOp(OpKind::Conv, {seq({1, 2, 7}, 7, 11), seq({3, 2, 3}, 5, 9)},
                   attrs({{"strides", Ints{2}}, {"kernel_shape", Ints{3}}}));
  expectValues(y, DType::F32, {1, 3, 3}, {2.8125, 0.1875, -2.4375, 0, 1.5, 0.9375, -2.25, -1.125, 2.0625});
}

TEST(NnOps, ConvTransposeStride2OutputPadding) {
  // out = 2 * (in - 1) + 1 + 3 - 2.
  Tensor y = runOp(OpKind::ConvTranspose, {seq({1, 2, 2, 3}, 7, 11), seq({2, 2, 3, 3}, 5, 9), seq({2}, 3, 7)},
                   attrs({{"strides", Ints{2, 2}}, {"pads", Ints{1, 1, 1, 1}}, {"output_padding", Ints{1, 1}}}));
  expectValues(y, DType::F32, {1, 2, 4, 6},
               {-0.625, -0.6875, -1,    -1.125, 0,    -1.875, -0.5, -2.375, -0.25, 1.625, -2.75, 0.75,
                -1.75,  0.75,    -0.75, -1.75,  0.25, -2.25,  1.25, -0.75,  -0.75, -0.25, -2.75, -0.75,
                0.125,  0.0625,  -0.25, -0.375, 0.75, -1.125, 0.25, -1.625, 0.5,   2.375, -2,    1.5,
                -1,     1.5,     0,     -1,     1,    -1.5,   2,    0,      0,     0.5,   -2,    0});
}

TEST(NnOps, ConvTransposeGroupDilationOutputShape) {
  // Full size 7, output_shape 6: total pad 1, which NOTSET puts at the beginning.
  Tensor y =
      runOp(OpKind::ConvTranspose, {seq({1, 4, 3}, 7, 11), seq({4, 1, 2}, 5, 9)},
            attrs({{"strides", Ints{2}}, {"dilations", Ints{2}}, {"group", int64_t{2}}, {"output_shape", Ints{6}}}));
  expectValues(y, DType::F32, {1, 2, 6}, {0, -0.375, 0, 1.3125, 0, -0.5, 0, 1.5625, 0, 0.5625, 0, -2});
}

// --- Pools

TEST(NnOps, MaxPoolCeilModeWithIndices) {
  // ceil_mode: 5 -> 3 windows, the last one partial. Ties go to the first position in the window.
  std::vector<Tensor> outs =
      runOpMulti(OpKind::MaxPool, {seq({1, 2, 5, 5}, 7, 11)},
                 attrs({{"kernel_shape", Ints{2, 2}}, {"strides", Ints{2, 2}}, {"ceil_mode", int64_t{1}}}), 2);
  ASSERT_EQ(outs.size(), 2u);
  expectValues(outs[0], DType::F32, {1, 2, 3, 3},
               {1, 1.25, 0.75, 0.25, 1, 1.25, 0.75, 0.5, -0.5, 1.25, 1, 0.5, 1.25, 0.75, 1, 0.5, 1.25, -0.75});
  expectInts(outs[1], {1, 2, 3, 3}, {6, 3, 9, 15, 17, 14, 20, 23, 24, 25, 28, 34, 36, 42, 39, 45, 47, 49});
}

TEST(NnOps, MaxPoolPadsColumnMajorIndices) {
  std::vector<Tensor> outs =
      runOpMulti(OpKind::MaxPool, {seq({1, 1, 4, 3}, 5, 13)},
                 attrs({{"kernel_shape", Ints{3, 3}}, {"pads", Ints{1, 1, 1, 1}}, {"storage_order", int64_t{1}}}), 2);
  ASSERT_EQ(outs.size(), 2u);
  expectValues(outs[0], DType::F32, {1, 1, 4, 3}, {0.25, 1.5, 1.5, 0.75, 1.5, 1.5, 1.25, 1.5, 1.5, 1.25, 1.25, 1.25});
  expectInts(outs[1], {1, 1, 4, 3}, {5, 9, 9, 6, 9, 9, 7, 9, 9, 7, 7, 7});
}

TEST(NnOps, AveragePoolCountIncludePad) {
  Attributes a = attrs({{"kernel_shape", Ints{3, 3}}, {"strides", Ints{2, 2}}, {"pads", Ints{1, 1, 1, 1}}});
  Tensor x = seq({1, 1, 4, 5}, 5, 13);
  expectValues(runOp(OpKind::AveragePool, {x}, a), DType::F32, {1, 1, 2, 3},
               {-0.1875, -0.20833333333333334, -0.5, 0.25, -0.2222222222222222, -0.3333333333333333});
  a.set("count_include_pad", int64_t{1});
  expectValues(runOp(OpKind::AveragePool, {x}, a), DType::F32, {1, 1, 2, 3},
               {-0.08333333333333333, -0.1388888888888889, -0.2222222222222222, 0.16666666666666666,
                -0.2222222222222222, -0.2222222222222222});
  // With ceil_mode the last row of windows runs past the end padding; ONNX still divides by 9.
  a.set("ceil_mode", int64_t{1});
  expectValues(runOp(OpKind::AveragePool, {x}, a), DType::F32, {1, 1, 3, 3},
               {-0.08333333333333333, -0.1388888888888889, -0.2222222222222222, 0.16666666666666666,
                -0.2222222222222222, -0.2222222222222222, 0, 0.08333333333333333, 0.1111111111111111});
}

TEST(NnOps, AveragePoolDilationsCeilModeExcludePad) {
  Tensor y = runOp(OpKind::AveragePool, {seq({1, 1, 6, 7}, 5, 13)},
                   attrs({{"kernel_shape", Ints{2, 3}},
                          {"strides", Ints{2, 3}},
                          {"dilations", Ints{2, 2}},
                          {"pads", Ints{1, 2, 1, 0}},
                          {"ceil_mode", int64_t{1}}}));
  expectValues(y, DType::F32, {1, 1, 4, 3},
               {0.375, 0.16666666666666666, -1.125, 0.1875, -0.2916666666666667, -0.5, -0.1875, -0.125, -0.0625, -0.375,
                0.5, -0.25});
}

TEST(NnOps, LpPool) {
  Tensor x = seq({1, 1, 4, 4}, 5, 13);
  expectValues(runOp(OpKind::LpPool, {x}, attrs({{"kernel_shape", Ints{2, 2}}, {"strides", Ints{2, 2}}})), DType::F32,
               {1, 1, 2, 2}, {2.1505813167606567, 1.6770509831248424, 2.0155644370746373, 1.7853571071357126});
  Tensor y =
      runOp(OpKind::LpPool, {x}, attrs({{"kernel_shape", Ints{3, 3}}, {"pads", Ints{1, 1, 1, 1}}, {"p", int64_t{3}}}));
  expectValues(y, DType::F32, {1, 1, 4, 4},
               {1.8927935695477132, 1.9921567821740593, 1.810789110860435, 1.3656388928203496, 2.059415346070231,
                2.2774417289067466, 2.0257097547609733, 1.701023028988342, 2.0679759595742233, 2.219760004356502,
                2.202717028727584, 1.5790898994140947, 1.760145154178368, 1.950613438384856, 1.8913386930562823,
                1.5023112517293415},
               1e-5);
}

TEST(NnOps, GlobalPools) {
  Tensor x = seq({2, 3, 2, 2}, 7, 11);
  expectValues(runOp(OpKind::GlobalAveragePool, {x}), DType::F32, {2, 3, 1, 1},
               {0, 0.125, -0.4375, 0.375, -0.1875, -0.0625});
  expectValues(runOp(OpKind::GlobalMaxPool, {x}), DType::F32, {2, 3, 1, 1}, {1.25, 1, 0.75, 1.25, 1, 0.75});
  expectValues(runOp(OpKind::GlobalLpPool, {x}), DType::F32, {2, 3, 1, 1},
               {1.9039432764659772, 1.2747548783981961, 1.7853571071357126, 1.4577379737113252, 1.6007810593582121,
                1.5612494995995996});
}

// --- TopK

TEST(NnOps, TopKLargestWithTies) {
  Tensor x = tensorOf(DType::F32, {2, 6}, {3, 1, 3, 2, 5, 1, -1, 4, 4, 0, 4, 2});
  std::vector<Tensor> outs = runOpMulti(OpKind::TopK, {x}, attrs({{"k", int64_t{3}}}), 2);
  ASSERT_EQ(outs.size(), 2u);
  expectValues(outs[0], DType::F32, {2, 3}, {5, 3, 3, 4, 4, 4}, 0);
  expectInts(outs[1], {2, 3}, {4, 0, 2, 1, 2, 4});
}

TEST(NnOps, TopKSmallestAlongAxis0) {
  Tensor x = tensorOf(DType::I32, {3, 2}, {2, 5, 1, 5, 2, 0});
  std::vector<Tensor> outs =
      runOpMulti(OpKind::TopK, {x}, attrs({{"k", int64_t{2}}, {"axis", int64_t{0}}, {"largest", int64_t{0}}}), 2);
  ASSERT_EQ(outs.size(), 2u);
  expectValues(outs[0], DType::I32, {2, 2}, {1, 0, 2, 5}, 0);
  expectInts(outs[1], {2, 2}, {1, 2, 0, 0});
  Tensor f = tensorOf(DType::F64, {6}, {3, 1, 3, 2, 5, 1});
  outs = runOpMulti(OpKind::TopK, {f}, attrs({{"k", int64_t{3}}, {"largest", int64_t{0}}}), 2);
  ASSERT_EQ(outs.size(), 2u);
  expectValues(outs[0], DType::F64, {3}, {1, 1, 2}, 0);
  expectInts(outs[1], {3}, {1, 5, 3});
}

// --- Diagnostics

TEST(NnOps, ErrorMessages) {
  const Shape x4{1, 2, 5, 5};
  // Window values far beyond any real model, whose arithmetic would overflow int64.
  EXPECT_EQ(buildError(OpKind::MaxPool, {{DType::F32, {1, 1, 4}}}, attrs({{"kernel_shape", Ints{int64_t(1) << 40}}})),
            "node 'n' (MaxPool): kernel size [1099511627776] has a value above 2^31 - 1");
  EXPECT_EQ(buildError(OpKind::AveragePool, {{DType::F32, {1, 1, 4}}},
                       attrs({{"kernel_shape", Ints{2}}, {"strides", Ints{INT64_MAX}}})),
            "node 'n' (AveragePool): strides [9223372036854775807] has a value above 2^31 - 1");
  EXPECT_EQ(buildError(OpKind::Conv, {{DType::F32, x4}, {DType::F32, {3, 2, 3, 3}}},
                       attrs({{"pads", Ints{INT64_MAX, 0, 0, 0}}})),
            "node 'n' (Conv): pads [9223372036854775807, 0, 0, 0] has a value above 2^31 - 1");
  // An empty batch with huge spatial and kernel dims: the transposed conv's size overflows int64.
  EXPECT_EQ(buildError(OpKind::ConvTranspose, {{DType::F32, {0, 1, int64_t(1) << 40}}, {DType::F32, {1, 1, 1 << 20}}},
                       attrs({{"strides", Ints{INT32_MAX}}})),
            "node 'n' (ConvTranspose): the output on spatial axis 0 would be too large");
  // Attribute values whose arithmetic overflows int64 (found by fuzz_shape_inference).
  EXPECT_EQ(buildError(OpKind::ConvTranspose, {{DType::F32, {1, 2, 5, 5}}, {DType::F32, {2, 3, 3, 3}}},
                       attrs({{"output_shape", Ints{INT64_MIN, 4}}})),
            "node 'n' (ConvTranspose): output_shape [-9223372036854775808, 4] must be positive");
  EXPECT_EQ(buildError(OpKind::Conv, {{DType::F32, x4}, {DType::F32, {3, 4, 3, 3}}}, attrs({{"group", INT64_MAX}})),
            "node 'n' (Conv): input has 2 channels, weight [3x4x3x3] expects 4 per group x group 9223372036854775807");
  EXPECT_EQ(buildError(OpKind::ConvTranspose, {{DType::F32, {1, 2, 5, 5}}, {DType::F32, {2, int64_t(1) << 40, 0, 3}}},
                       attrs({{"group", int64_t{2}}})),
            "node 'n' (ConvTranspose): weight [2x1099511627776x0x3] x group 2 gives too many output channels");
  EXPECT_EQ(buildError(OpKind::Conv, {{DType::F32, x4}, {DType::F32, {3, 2, 3, 3}}}, attrs({{"pads", Ints{1, 1, 1}}})),
            "node 'n' (Conv): pads has 3 values, expected 4");
  EXPECT_EQ(buildError(OpKind::Conv, {{DType::F32, x4}, {DType::F32, {3, 4, 3, 3}}}),
            "node 'n' (Conv): input has 2 channels, weight [3x4x3x3] expects 4 per group x group 1");
  EXPECT_EQ(buildError(OpKind::Conv, {{DType::F32, x4}, {DType::F32, {3, 2, 3, 3}}},
                       attrs({{"auto_pad", std::string("SAME")}})),
            "node 'n' (Conv): auto_pad 'SAME' is not one of NOTSET, SAME_UPPER, SAME_LOWER, VALID");
  EXPECT_EQ(buildError(OpKind::MaxPool, {{DType::F32, {1, 1, 3, 3}}},
                       attrs({{"kernel_shape", Ints{5, 5}}, {"pads", Ints{0, 0, 1, 1}}})),
            "node 'n' (MaxPool): kernel extent 5 on spatial axis 0 is larger than the padded input (4)");
  EXPECT_EQ(buildError(OpKind::AveragePool, {{DType::F32, x4}}, attrs({{"kernel_shape", Ints{2}}})),
            "node 'n' (AveragePool): kernel_shape has 1 values, expected 2 for a 4-D input");
  EXPECT_EQ(buildError(OpKind::AveragePool, {{DType::F32, x4}},
                       attrs({{"kernel_shape", Ints{2, 2}}, {"strides", Ints{0, 1}}})),
            "node 'n' (AveragePool): strides must be positive, got [0, 1]");
  EXPECT_EQ(buildError(OpKind::MatMul, {{DType::F32, {2, 3}}, {DType::F32, {4, 5}}}),
            "node 'n' (MatMul): inner dimensions differ: A is [2x3], B is [4x5] (3 vs 4)");
  EXPECT_EQ(buildError(OpKind::MatMul, {{DType::F32, {2, 2, 3}}, {DType::F32, {3, 3, 1}}}),
            "node 'n' (MatMul): batch dimensions [2] and [3] do not broadcast");
  EXPECT_EQ(buildError(OpKind::Einsum, {{DType::F32, {2, 3}}}, attrs({{"equation", std::string("ij->k")}})),
            "node 'n' (Einsum): equation 'ij->k': output label 'k' does not appear in any input");
  EXPECT_EQ(buildError(OpKind::Einsum, {{DType::F32, {2, 3}}, {DType::F32, {4, 2}}},
                       attrs({{"equation", std::string("ij,jk->ik")}})),
            "node 'n' (Einsum): equation 'ij,jk->ik': label 'j' has size 3 and 4 (input 1)");
  EXPECT_EQ(buildError(OpKind::ConvTranspose, {{DType::F32, x4}, {DType::F32, {2, 3, 3, 3}}},
                       attrs({{"output_padding", Ints{1, 1}}})),
            "node 'n' (ConvTranspose): output_padding [1, 1] must be smaller than the stride or dilation");
  EXPECT_EQ(buildError(OpKind::TopK, {{DType::F32, {2, 4}}}, attrs({{"k", int64_t{5}}}), 2),
            "node 'n' (TopK): k = 5 is larger than axis 1 of size 4");
  EXPECT_EQ(buildError(OpKind::TopK, {{DType::F32, {2, 4}}, {DType::I64, {1}}}, {}, 2),
            "node 'n' (TopK): input K must be a compile-time constant (bind it with --bind NAME=FILE.pb)");
}

}  // namespace
}  // namespace nnc
