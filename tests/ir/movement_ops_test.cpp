// Tests for the data-movement op definitions (ir/ops/layout.cpp, gather.cpp, generators.cpp and
// resize.cpp): shapes, diagnostics, and values through the reference evaluator. Expected values were
// computed with numpy (np.transpose, np.pad, np.take, ...) or, where numpy has no equivalent, with the
// ONNX reference implementation (onnx.reference, onnx 1.17), and pasted in.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "ir/builder.h"
#include "ir/reference.h"

namespace nnc {
namespace {

constexpr int64_t kI64Max = std::numeric_limits<int64_t>::max();
constexpr int64_t kI64Min = std::numeric_limits<int64_t>::min();

Tensor tensorOf(DType t, Shape s, const std::vector<double>& values) {
  Tensor x(t, std::move(s));
  EXPECT_EQ(x.numel(), static_cast<int64_t>(values.size()));
  for (size_t i = 0; i < values.size(); ++i) x.setDouble(static_cast<int64_t>(i), values[i]);
  return x;
}

// 0, 1, 2, ... in the given shape (numpy's arange(n).reshape(shape)).
Tensor iota(Shape s, DType t = DType::F32) {
  Tensor x(t, std::move(s));
  for (int64_t i = 0; i < x.numel(); ++i) x.setDouble(i, static_cast<double>(i));
  return x;
}

Tensor ints(const std::vector<int64_t>& v, Shape s, DType t = DType::I64) {
  Tensor x(t, std::move(s));
  for (size_t i = 0; i < v.size(); ++i) x.setInt(static_cast<int64_t>(i), v[i]);
  return x;
}

Attributes attrs(std::vector<std::pair<std::string, AttrValue>> list) {
  Attributes a;
  for (auto& [name, value] : list) a.set(name, std::move(value));
  return a;
}

using Ints = std::vector<int64_t>;
using Floats = std::vector<double>;

// Builds a one-node graph (a null tensor stands for an omitted input) and evaluates it.
std::vector<Tensor> runOpMulti(OpKind op, const std::vector<Tensor>& inputs, Attributes a, int numOutputs) {
  Graph g;
  GraphBuilder b(g);
  b.setFolding(false);
  std::vector<Value*> ins;
  std::vector<Tensor> feeds;
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (inputs[i].isNull()) {
      ins.push_back(nullptr);
      continue;
    }
    ins.push_back(b.input("in" + std::to_string(i), inputs[i].dtype(), inputs[i].shape()));
    feeds.push_back(inputs[i]);
  }
  for (Value* v : b.opMulti(op, ins, std::move(a), numOutputs, "n")) b.output(v);
  EXPECT_TRUE(b.status().isOk()) << b.status().message();
  if (!b.status().isOk()) return {};
  auto result = evaluateGraph(g, feeds);
  EXPECT_TRUE(result.isOk()) << result.status().message();
  if (!result.isOk()) return {};
  return result.value();
}

Tensor runOp(OpKind op, const std::vector<Tensor>& inputs, Attributes a = {}) {
  std::vector<Tensor> outs = runOpMulti(op, inputs, std::move(a), 1);
  return outs.empty() ? Tensor() : outs[0];
}

// The evaluation error of a one-node graph whose inputs are all fed at run time ("" on success).
std::string evalError(OpKind op, const std::vector<Tensor>& inputs, Attributes a = {}) {
  Graph g;
  GraphBuilder b(g);
  b.setFolding(false);
  std::vector<Value*> ins;
  for (size_t i = 0; i < inputs.size(); ++i)
    ins.push_back(b.input("in" + std::to_string(i), inputs[i].dtype(), inputs[i].shape()));
  b.output(b.op(op, ins, std::move(a), "n"));
  EXPECT_TRUE(b.status().isOk()) << b.status().message();
  auto result = evaluateGraph(g, inputs);
  return result.isOk() ? "" : result.status().message();
}

// The builder's diagnostic for creating `op` (empty when it succeeds).
std::string buildError(OpKind op, const std::vector<std::pair<DType, Shape>>& inputs, Attributes a = {},
                       int numOutputs = -1) {
  Graph g;
  GraphBuilder b(g);
  b.setFolding(false);
  std::vector<Value*> ins;
  for (size_t i = 0; i < inputs.size(); ++i)
    ins.push_back(b.input("in" + std::to_string(i), inputs[i].first, inputs[i].second));
  b.opMulti(op, ins, std::move(a), numOutputs, "n");
  return b.status().isOk() ? "" : b.status().message();
}

void expectTensor(const Tensor& t, DType dtype, const Shape& shape, const std::vector<double>& expected,
                  double tol = 0) {
  ASSERT_FALSE(t.isNull());
  EXPECT_EQ(t.dtype(), dtype) << dtypeName(t.dtype());
  ASSERT_EQ(t.shape(), shape) << t.shape().str();
  ASSERT_EQ(t.numel(), static_cast<int64_t>(expected.size()));
  for (size_t i = 0; i < expected.size(); ++i) {
    double got = t.getDouble(static_cast<int64_t>(i));
    if (tol == 0) {
      EXPECT_EQ(got, expected[i]) << "at flat index " << i;
    } else {
      EXPECT_NEAR(got, expected[i], tol * std::max(1.0, std::fabs(expected[i]))) << "at flat index " << i;
    }
  }
}

std::vector<double> iotaValues(int64_t n) {
  std::vector<double> v;
  for (int64_t i = 0; i < n; ++i) v.push_back(static_cast<double>(i));
  return v;
}

// ---------------------------------------------------------------------------------------------

TEST(MovementOps, ReshapeCopiesZeroAndInfersMinusOne) {
  Tensor x = iota({2, 3, 4});
  expectTensor(runOp(OpKind::Reshape, {x}, attrs({{"shape", Ints{0, -1}}})), DType::F32, {2, 12}, iotaValues(24));
  expectTensor(runOp(OpKind::Reshape, {x}, attrs({{"shape", Ints{4, 0, -1}}})), DType::F32, {4, 3, 2}, iotaValues(24));
  // allowzero=1: 0 is a real zero-sized dim.
  Tensor empty(DType::F32, Shape{0, 3});
  Tensor r = runOp(OpKind::Reshape, {empty}, attrs({{"shape", Ints{3, 0}}, {"allowzero", int64_t{1}}}));
  ASSERT_FALSE(r.isNull());
  EXPECT_EQ(r.shape(), Shape({3, 0}));
}

TEST(MovementOps, ReshapeErrors) {
  EXPECT_EQ(buildError(OpKind::Reshape, {{DType::F32, {2, 3}}}, attrs({{"shape", Ints{4, 2}}})),
            "node 'n' (Reshape): cannot reshape [2x3] (6 elements) into shape [4, 2]");
  EXPECT_EQ(buildError(OpKind::Reshape, {{DType::F32, {2, 3}}}, attrs({{"shape", Ints{-1, -1}}})),
            "node 'n' (Reshape): shape [-1, -1] has more than one -1");
  EXPECT_EQ(buildError(OpKind::Reshape, {{DType::F32, {2, 3}}}, attrs({{"shape", Ints{4, -1}}})),
            "node 'n' (Reshape): cannot infer the -1 in shape [4, -1] for input [2x3]");
  // Given dims whose product overflows int64 (a fuzzer finding).
  EXPECT_EQ(buildError(OpKind::Reshape, {{DType::F32, {2, 3}}}, attrs({{"shape", Ints{4, INT64_MAX, -1}}})),
            "node 'n' (Reshape): cannot infer the -1 in shape [4, 9223372036854775807, -1] for input [2x3]");
  EXPECT_EQ(buildError(OpKind::Reshape, {{DType::F32, {6}}}, attrs({{"shape", Ints{2, 0}}})),
            "node 'n' (Reshape): shape [2, 0] copies dim 1 (0) but the input [6] has rank 1");
  EXPECT_EQ(buildError(OpKind::Reshape, {{DType::F32, {6}}}), "node 'n' (Reshape): 'shape' is required (input 1)");
}

TEST(MovementOps, Transpose) {
  // np.transpose(np.arange(24).reshape(2,3,4), (2,0,1))
  expectTensor(runOp(OpKind::Transpose, {iota({2, 3, 4})}, attrs({{"perm", Ints{2, 0, 1}}})), DType::F32, {4, 2, 3},
               {0, 4, 8, 12, 16, 20, 1, 5, 9, 13, 17, 21, 2, 6, 10, 14, 18, 22, 3, 7, 11, 15, 19, 23});
  // Default perm reverses the dims.
  expectTensor(runOp(OpKind::Transpose, {iota({2, 3}, DType::I32)}), DType::I32, {3, 2}, {0, 3, 1, 4, 2, 5});
}

TEST(MovementOps, TransposeBadPerm) {
  EXPECT_EQ(buildError(OpKind::Transpose, {{DType::F32, {2, 3, 4}}}, attrs({{"perm", Ints{0, 0, 1}}})),
            "node 'n' (Transpose): perm [0, 0, 1] is not a permutation of 0..2");
  EXPECT_EQ(buildError(OpKind::Transpose, {{DType::F32, {2, 3, 4}}}, attrs({{"perm", Ints{1, 0}}})),
            "node 'n' (Transpose): perm has 2 values, expected 3");
}

TEST(MovementOps, SliceNegativeStepsAndSaturatedEnds) {
  Tensor x = iota({4, 5});
  // x[-1::-2, 4:0:-3]
  expectTensor(
      runOp(
          OpKind::Slice, {x},
          attrs({{"starts", Ints{-1, 4}}, {"ends", Ints{kI64Min, 0}}, {"axes", Ints{0, 1}}, {"steps", Ints{-2, -3}}})),
      DType::F32, {2, 2}, {19, 16, 9, 6});
  // x[:, 1::2]
  expectTensor(runOp(OpKind::Slice, {x},
                     attrs({{"starts", Ints{1}}, {"ends", Ints{kI64Max}}, {"axes", Ints{-1}}, {"steps", Ints{2}}})),
               DType::F32, {4, 2}, {1, 3, 6, 8, 11, 13, 16, 18});
  // x[3:1] is empty; x[1:3] without axes/steps applies to the leading dims.
  Tensor e = runOp(OpKind::Slice, {x}, attrs({{"starts", Ints{3}}, {"ends", Ints{1}}}));
  ASSERT_FALSE(e.isNull());
  EXPECT_EQ(e.shape(), Shape({0, 5}));
  expectTensor(runOp(OpKind::Slice, {x}, attrs({{"starts", Ints{1, -2}}, {"ends", Ints{3, 100}}})), DType::F32, {2, 2},
               {8, 9, 13, 14});
  // Steps of INT64_MAX and INT64_MIN take one element (their length arithmetic used to overflow):
  // x[0:4:2**63-1, 4::-(2**63)].
  expectTensor(runOp(OpKind::Slice, {x},
                     attrs({{"starts", Ints{0, 4}}, {"ends", Ints{4, kI64Min}}, {"steps", Ints{kI64Max, kI64Min}}})),
               DType::F32, {1, 1}, {4});
}

TEST(MovementOps, SliceErrors) {
  EXPECT_EQ(buildError(OpKind::Slice, {{DType::F32, {4}}},
                       attrs({{"starts", Ints{0}}, {"ends", Ints{4}}, {"steps", Ints{0}}})),
            "node 'n' (Slice): steps value 0 at position 0 must not be zero");
  EXPECT_EQ(buildError(OpKind::Slice, {{DType::F32, {4, 4}}}, attrs({{"starts", Ints{0, 0}}, {"ends", Ints{4}}})),
            "node 'n' (Slice): ends has 1 values, expected 2");
  EXPECT_EQ(buildError(OpKind::Slice, {{DType::F32, {4, 4}}},
                       attrs({{"starts", Ints{0, 0}}, {"ends", Ints{4, 4}}, {"axes", Ints{1, -1}}})),
            "node 'n' (Slice): axis -1 is repeated in axes");
}

TEST(MovementOps, ConcatThreeInputs) {
  Tensor a = iota({2, 1});
  Tensor b = tensorOf(DType::F32, {2, 3}, {10, 11, 12, 13, 14, 15});
  Tensor c = tensorOf(DType::F32, {2, 2}, {20, 21, 22, 23});
  // np.concatenate([a, b, c], axis=-1)
  expectTensor(runOp(OpKind::Concat, {a, b, c}, attrs({{"axis", int64_t{-1}}})), DType::F32, {2, 6},
               {0, 10, 11, 12, 20, 21, 1, 13, 14, 15, 22, 23});
  // An empty input contributes nothing.
  Tensor none(DType::F32, Shape{0, 2});
  expectTensor(runOp(OpKind::Concat, {none, c}, attrs({{"axis", int64_t{0}}})), DType::F32, {2, 2}, {20, 21, 22, 23});
  Tensor noCols(DType::F32, Shape{2, 0});
  Tensor both = runOp(OpKind::Concat, {noCols, noCols}, attrs({{"axis", int64_t{1}}}));
  ASSERT_FALSE(both.isNull());
  EXPECT_EQ(both.shape(), Shape({2, 0}));
  EXPECT_EQ(buildError(OpKind::Concat, {{DType::F32, {2, 3}}, {DType::F32, {3, 3}}}, attrs({{"axis", int64_t{1}}})),
            "node 'n' (Concat): input 1 has shape [3x3], incompatible with [2x3] along axis 1");
}

TEST(MovementOps, SplitExplicitAndEqual) {
  std::vector<Tensor> parts = runOpMulti(OpKind::Split, {iota({6, 2})}, attrs({{"split", Ints{1, 2, 3}}}), 3);
  ASSERT_EQ(parts.size(), 3u);
  expectTensor(parts[0], DType::F32, {1, 2}, {0, 1});
  expectTensor(parts[1], DType::F32, {2, 2}, {2, 3, 4, 5});
  expectTensor(parts[2], DType::F32, {3, 2}, {6, 7, 8, 9, 10, 11});
  // num_outputs=3 on 7 elements: chunks of ceil(7/3) = 3, the last one smaller.
  parts = runOpMulti(OpKind::Split, {iota({7})}, attrs({{"num_outputs", int64_t{3}}}), 3);
  ASSERT_EQ(parts.size(), 3u);
  expectTensor(parts[0], DType::F32, {3}, {0, 1, 2});
  expectTensor(parts[1], DType::F32, {3}, {3, 4, 5});
  expectTensor(parts[2], DType::F32, {1}, {6});
  EXPECT_EQ(buildError(OpKind::Split, {{DType::F32, {6}}}, attrs({{"split", Ints{1, 2}}}), 2),
            "node 'n' (Split): split [1, 2] sums to 3, expected 6 (the size of axis 0)");
  EXPECT_EQ(buildError(OpKind::Split, {{DType::F32, {6}}}, attrs({{"split", Ints{kI64Max, 1}}}), 2),
            "node 'n' (Split): split [9223372036854775807, 1] sums to more than 2^63, expected 6 (the size of axis 0)");
}

TEST(MovementOps, PadModes) {
  Tensor x = iota({3, 4});
  Attributes a = attrs({{"pads", Ints{1, 2, 2, 1}}});
  // np.pad(x, ((1, 2), (2, 1)), mode=...)
  a.set("mode", std::string("reflect"));
  expectTensor(runOp(OpKind::Pad, {x}, a), DType::F32, {6, 7},
               {6,  5, 4, 5, 6,  7,  6,  2, 1, 0, 1, 2, 3, 2, 6, 5, 4, 5, 6, 7, 6,
                10, 9, 8, 9, 10, 11, 10, 6, 5, 4, 5, 6, 7, 6, 2, 1, 0, 1, 2, 3, 2});
  a.set("mode", std::string("edge"));
  expectTensor(runOp(OpKind::Pad, {x}, a), DType::F32, {6, 7},
               {0, 0, 0, 1, 2,  3,  3,  0, 0, 0, 1, 2,  3,  3,  4, 4, 4, 5, 6,  7,  7,
                8, 8, 8, 9, 10, 11, 11, 8, 8, 8, 9, 10, 11, 11, 8, 8, 8, 9, 10, 11, 11});
  a.set("mode", std::string("wrap"));
  expectTensor(runOp(OpKind::Pad, {x}, a), DType::F32, {6, 7},
               {10, 11, 8, 9, 10, 11, 8, 2, 3, 0, 1, 2, 3, 0, 6, 7, 4, 5, 6, 7, 4,
                10, 11, 8, 9, 10, 11, 8, 2, 3, 0, 1, 2, 3, 0, 6, 7, 4, 5, 6, 7, 4});
  // Reflecting further than the input is long: np.pad(np.arange(3), (5, 4), mode='reflect')
  expectTensor(runOp(OpKind::Pad, {iota({3})}, attrs({{"pads", Ints{5, 4}}, {"mode", std::string("reflect")}})),
               DType::F32, {12}, {1, 0, 1, 2, 1, 0, 1, 2, 1, 0, 1, 2});
  // Constant 7 with a negative (cropping) pad, only on the given axes:
  // np.pad(x[:, 1:], ((0, 1), (0, 0)), constant_values=7)
  expectTensor(
      runOp(OpKind::Pad, {x}, attrs({{"pads", Ints{0, -1, 1, 0}}, {"constant_value", Tensor::scalar(DType::F32, 7)}})),
      DType::F32, {4, 3}, {1, 2, 3, 5, 6, 7, 9, 10, 11, 7, 7, 7});
  expectTensor(runOp(OpKind::Pad, {iota({2, 2}, DType::I64)}, attrs({{"pads", Ints{1, 0}}, {"axes", Ints{-1}}})),
               DType::I64, {2, 3}, {0, 0, 1, 0, 2, 3});
}

TEST(MovementOps, PadErrors) {
  EXPECT_EQ(buildError(OpKind::Pad, {{DType::F32, {1, 2, 3, 4}}}, attrs({{"pads", Ints{1, 1, 1}}})),
            "node 'n' (Pad): pads has 3 values, expected 8");
  EXPECT_EQ(
      buildError(OpKind::Pad, {{DType::F32, {2}}}, attrs({{"pads", Ints{1, 1}}, {"mode", std::string("mirror")}})),
      "node 'n' (Pad): mode 'mirror' is not one of constant, reflect, edge, wrap");
  EXPECT_EQ(buildError(OpKind::Pad, {{DType::F32, {3}}}, attrs({{"pads", Ints{kI64Max, 1}}})),
            "node 'n' (Pad): pads [9223372036854775807, 1] make axis 0 too long");
  // A constant of another type than the data (a fuzzer finding: a NaN for integers).
  EXPECT_EQ(buildError(OpKind::Pad, {{DType::I32, {3}}},
                       attrs({{"pads", Ints{1, 1}}, {"constant_value", Tensor::scalar(DType::F32, NAN)}})),
            "node 'n' (Pad): constant_value has type f32, expected i32 like the data");
}

TEST(MovementOps, TileAndExpand) {
  // np.tile(np.arange(6).reshape(2,3), (2,2))
  expectTensor(runOp(OpKind::Tile, {iota({2, 3})}, attrs({{"repeats", Ints{2, 2}}})), DType::F32, {4, 6},
               {0, 1, 2, 0, 1, 2, 3, 4, 5, 3, 4, 5, 0, 1, 2, 0, 1, 2, 3, 4, 5, 3, 4, 5});
  // np.broadcast_to(np.arange(3).reshape(3,1), (2,3,4)); the shape's 1 keeps the input dim.
  expectTensor(runOp(OpKind::Expand, {iota({3, 1})}, attrs({{"shape", Ints{2, 1, 4}}})), DType::F32, {2, 3, 4},
               {0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2});
  EXPECT_EQ(buildError(OpKind::Tile, {{DType::F32, {2, 3}}}, attrs({{"repeats", Ints{2}}})),
            "node 'n' (Tile): repeats has 1 values, expected 2");
  // Repeats whose product with the dim overflows (a fuzzer finding), and an empty tensor's.
  EXPECT_EQ(buildError(OpKind::Tile, {{DType::F32, {4, 0}}}, attrs({{"repeats", Ints{INT64_MAX, 1}}})),
            "node 'n' (Tile): repeats [9223372036854775807, 1] make the output too large");
}

TEST(MovementOps, GatherNegativeIndices) {
  Tensor data = iota({5, 3});
  // np.take(data, [[-1, 0], [2, -5]] (wrapped), axis=0)
  expectTensor(runOp(OpKind::Gather, {data, ints({-1, 0, 2, -5}, {2, 2})}), DType::F32, {2, 2, 3},
               {12, 13, 14, 0, 1, 2, 6, 7, 8, 0, 1, 2});
  // axis=1 with i32 indices [-1, 1]
  expectTensor(runOp(OpKind::Gather, {data, ints({-1, 1}, {2}, DType::I32)}, attrs({{"axis", int64_t{1}}})), DType::F32,
               {5, 2}, {2, 1, 5, 4, 8, 7, 11, 10, 14, 13});
  // Scalar index drops the axis.
  expectTensor(runOp(OpKind::Gather, {data, ints({-2}, {})}), DType::F32, {3}, {9, 10, 11});
  // Out-of-range indices are an error naming the node, the bound and the first offender.
  EXPECT_EQ(evalError(OpKind::Gather, {data, ints({1, 7, -9}, {3})}),
            "node 'n' (Gather): input 1 ('in1', 3 elements) must be in [-5, 4]; 2 elements do not, the first is 7 "
            "(at flat position 1)");
}

TEST(MovementOps, GatherElementsAndND) {
  // np.take_along_axis semantics on data[:2], indices [[1, -1], [0, 2]] along axis 1
  expectTensor(
      runOp(OpKind::GatherElements, {iota({3, 3}), ints({1, -1, 0, 2}, {2, 2})}, attrs({{"axis", int64_t{1}}})),
      DType::F32, {2, 2}, {1, 2, 3, 5});
  // ONNX reference: GatherND(arange(24).reshape(2,3,4), [[[0,1],[2,-1]],[[1,0],[-3,3]]], batch_dims=1)
  expectTensor(runOp(OpKind::GatherND, {iota({2, 3, 4}), ints({0, 1, 2, -1, 1, 0, -3, 3}, {2, 2, 2})},
                     attrs({{"batch_dims", int64_t{1}}})),
               DType::F32, {2, 2}, {1, 11, 16, 15});
  // batch_dims=0, whole slices: data[[1], [0]] of a [2,2,2] tensor
  expectTensor(runOp(OpKind::GatherND, {iota({2, 2, 2}), ints({1, 0}, {2, 1})}), DType::F32, {2, 2, 2},
               {4, 5, 6, 7, 0, 1, 2, 3});
}

TEST(MovementOps, DepthToSpaceAndBack) {
  Tensor x = iota({1, 8, 2, 3});
  // ONNX reference DepthToSpace(blocksize=2)
  expectTensor(runOp(OpKind::DepthToSpace, {x}, attrs({{"blocksize", int64_t{2}}})), DType::F32, {1, 2, 4, 6},
               {0, 12, 1, 13, 2, 14, 24, 36, 25, 37, 26, 38, 3, 15, 4,  16, 5,  17, 27, 39, 28, 40, 29, 41,
                6, 18, 7, 19, 8, 20, 30, 42, 31, 43, 32, 44, 9, 21, 10, 22, 11, 23, 33, 45, 34, 46, 35, 47});
  expectTensor(runOp(OpKind::DepthToSpace, {x}, attrs({{"blocksize", int64_t{2}}, {"mode", std::string("CRD")}})),
               DType::F32, {1, 2, 4, 6},
               {0,  6,  1,  7,  2,  8,  12, 18, 13, 19, 14, 20, 3,  9,  4,  10, 5,  11, 15, 21, 16, 22, 17, 23,
                24, 30, 25, 31, 26, 32, 36, 42, 37, 43, 38, 44, 27, 33, 28, 34, 29, 35, 39, 45, 40, 46, 41, 47});
  expectTensor(runOp(OpKind::SpaceToDepth, {iota({1, 2, 4, 6})}, attrs({{"blocksize", int64_t{2}}})), DType::F32,
               {1, 8, 2, 3},
               {0, 2, 4,  12, 14, 16, 24, 26, 28, 36, 38, 40, 1, 3, 5,  13, 15, 17, 25, 27, 29, 37, 39, 41,
                6, 8, 10, 18, 20, 22, 30, 32, 34, 42, 44, 46, 7, 9, 11, 19, 21, 23, 31, 33, 35, 43, 45, 47});
  EXPECT_EQ(buildError(OpKind::DepthToSpace, {{DType::F32, {1, 6, 2, 2}}}, attrs({{"blocksize", int64_t{2}}})),
            "node 'n' (DepthToSpace): channels (6) are not divisible by blocksize^2 (4)");
  // An empty input with a huge channel dim: blocksize^2 times it overflows int64.
  EXPECT_EQ(buildError(OpKind::SpaceToDepth, {{DType::F32, {0, int64_t(1) << 40, 4096, 4096}}},
                       attrs({{"blocksize", int64_t{4096}}})),
            "node 'n' (SpaceToDepth): output 0 has dim 9223372036854775807 in [0x9223372036854775807x1x1], more "
            "than nnc supports (2^40)");
}

TEST(MovementOps, ResizeLinearHalfPixel) {
  // ONNX reference Resize(arange(8).reshape(1,1,2,4), scales=[1,1,2,1.5], mode=linear)
  expectTensor(runOp(OpKind::Resize, {iota({1, 1, 2, 4})},
                     attrs({{"scales", Floats{1, 1, 2, 1.5}}, {"mode", std::string("linear")}})),
               DType::F32, {1, 1, 4, 6}, {0.0, 0.5, 1.1666666269302368, 1.8333333730697632, 2.5, 3.0,
                                          1.0, 1.5, 2.1666667461395264, 2.8333332538604736, 3.5, 4.0,
                                          3.0, 3.5, 4.166666507720947,  4.833333492279053,  5.5, 6.0,
                                          4.0, 4.5, 5.166666507720947,  5.833333492279053,  6.5, 7.0},
               1e-6);
}

TEST(MovementOps, ResizeNearestAsymmetric) {
  // ONNX reference: scales=[1,1,2.5,1.7], out floor(2*2.5) x floor(3*1.7) = 5 x 5
  expectTensor(
      runOp(OpKind::Resize, {iota({1, 1, 2, 3})},
            attrs({{"scales", Floats{1, 1, 2.5, 1.7}}, {"coordinate_transformation_mode", std::string("asymmetric")}})),
      DType::F32, {1, 1, 5, 5}, {0, 1, 1, 2, 2, 0, 1, 1, 2, 2, 3, 4, 4, 5, 5, 3, 4, 4, 5, 5, 3, 4, 4, 5, 5});
}

TEST(MovementOps, ResizeCubicAndCrop) {
  Tensor x = iota({1, 1, 3, 4});
  // ONNX reference: sizes=[1,1,5,3], cubic, align_corners
  expectTensor(runOp(OpKind::Resize, {x},
                     attrs({{"sizes", Ints{1, 1, 5, 3}},
                            {"mode", std::string("cubic")},
                            {"coordinate_transformation_mode", std::string("align_corners")}})),
               DType::F32, {1, 1, 5, 3}, {0, 1.5, 3, 1.625, 3.125, 4.625, 4, 5.5, 7, 6.375, 7.875, 9.375, 8, 9.5, 11},
               1e-6);
  // ONNX reference: scales=[1,1,1.5,0.8], cubic, exclude_outside=1 (half_pixel)
  expectTensor(
      runOp(
          OpKind::Resize, {x},
          attrs({{"scales", Floats{1, 1, 1.5, 0.8}}, {"mode", std::string("cubic")}, {"exclude_outside", int64_t{1}}})),
      DType::F32, {1, 1, 4, 3},
      {-0.3174782991409302, 0.9988914728164673, 2.3293063640594482, 1.5736414194107056, 2.8900110721588135,
       4.220426082611084, 5.061760902404785, 6.378130912780762, 7.708545684814453, 7.623603343963623, 8.939972877502441,
       10.270387649536133},
      1e-5);
  // ONNX reference: tf_crop_and_resize, linear, roi=[0,0,.2,-.3, 1,1,.9,.8], sizes [1,1,3,3], extrapolation -1
  expectTensor(runOp(OpKind::Resize, {x},
                     attrs({{"roi", Floats{0, 0, 0.2, -0.3, 1, 1, 0.9, 0.8}},
                            {"sizes", Ints{1, 1, 3, 3}},
                            {"mode", std::string("linear")},
                            {"coordinate_transformation_mode", std::string("tf_crop_and_resize")},
                            {"extrapolation_value", -1.0}})),
               DType::F32, {1, 1, 3, 3},
               {-1.0, 2.3499999046325684, 4.0, -1.0, 5.150000095367432, 6.800000190734863, -1.0, 7.949999809265137,
                9.600000381469727},
               1e-6);
}

TEST(MovementOps, ResizeErrors) {
  EXPECT_EQ(buildError(OpKind::Resize, {{DType::F32, {1, 1, 2, 2}}},
                       attrs({{"scales", Floats{1, 1, 2, 2}}, {"antialias", int64_t{1}}})),
            "node 'n' (Resize): antialias=1 is an unsupported Resize mode");
  EXPECT_EQ(buildError(OpKind::Resize, {{DType::F32, {1, 1, 2, 2}}}, attrs({{"scales", Floats{2, 2}}})),
            "node 'n' (Resize): scales has 2 values, expected 4");
  EXPECT_EQ(buildError(OpKind::Resize, {{DType::F32, {1, 1, 2, 2}}}),
            "node 'n' (Resize): one of scales and sizes is required");
}

TEST(MovementOps, Trilu) {
  Tensor x = iota({3, 4});
  // np.triu(x, 1), np.tril(x, -1)
  expectTensor(runOp(OpKind::Trilu, {x}, attrs({{"k", int64_t{1}}})), DType::F32, {3, 4},
               {0, 1, 2, 3, 0, 0, 6, 7, 0, 0, 0, 11});
  expectTensor(runOp(OpKind::Trilu, {x}, attrs({{"upper", int64_t{0}}, {"k", int64_t{-1}}})), DType::F32, {3, 4},
               {0, 0, 0, 0, 4, 0, 0, 0, 8, 9, 0, 0});
}

TEST(MovementOps, OneHot) {
  Tensor indices = ints({0, -1, 5, 2}, {2, 2});
  Tensor values = tensorOf(DType::F32, {2}, {1, 9});
  // onnxruntime OneHot(depth=4, values=[1, 9]); -1 wraps to 3; 5 is out of range, so all off as
  // the spec says (onnx.reference wraps it with np.mod instead, against its own spec text).
  expectTensor(runOp(OpKind::OneHot, {indices, Tensor(), values}, attrs({{"depth", 4.0}})), DType::F32, {2, 2, 4},
               {9, 1, 1, 1, 1, 1, 1, 9, 1, 1, 1, 1, 1, 1, 9, 1});
  expectTensor(runOp(OpKind::OneHot, {indices, Tensor(), values}, attrs({{"depth", 4.0}, {"axis", int64_t{0}}})),
               DType::F32, {4, 2, 2}, {9, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 9, 1, 9, 1, 1});
  // Depths that are no integer (fuzzer findings: converting them was undefined behaviour).
  auto depthError = [](double depth) {
    Graph g;
    GraphBuilder b(g);
    b.op(OpKind::OneHot, {b.input("i", DType::I64, Shape{2}), nullptr, b.input("v", DType::F32, Shape{2})},
         attrs({{"depth", depth}}), "n");
    return b.status().isOk() ? "" : b.status().message();
  };
  EXPECT_EQ(depthError(-INFINITY), "node 'n' (OneHot): depth must be positive, got -9223372036854775808");
  EXPECT_EQ(depthError(NAN), "node 'n' (OneHot): depth must be positive, got 0");
  EXPECT_NE(depthError(1e300), "");
  EXPECT_NE(depthError(INFINITY), "");
}

TEST(MovementOps, Range) {
  // np.arange(1, 10, 3)
  expectTensor(runOp(OpKind::Range, {},
                     attrs({{"start", Tensor::scalar(DType::I64, 1)},
                            {"limit", Tensor::scalar(DType::I64, 10)},
                            {"delta", Tensor::scalar(DType::I64, 3)}})),
               DType::I64, {3}, {1, 4, 7});
  // ONNX reference Range(f32 0, 1, 0.3)
  expectTensor(runOp(OpKind::Range, {},
                     attrs({{"start", Tensor::scalar(DType::F32, 0)},
                            {"limit", Tensor::scalar(DType::F32, 1)},
                            {"delta", Tensor::scalar(DType::F32, 0.3)}})),
               DType::F32, {4}, {0.0, 0.30000001192092896, 0.6000000238418579, 0.9000000357627869}, 1e-7);
  // np.arange(10, 4, -2, dtype=np.int32)
  expectTensor(runOp(OpKind::Range, {},
                     attrs({{"start", Tensor::scalar(DType::I32, 10)},
                            {"limit", Tensor::scalar(DType::I32, 4)},
                            {"delta", Tensor::scalar(DType::I32, -2)}})),
               DType::I32, {3}, {10, 8, 6});
  EXPECT_EQ(buildError(OpKind::Range, {},
                       attrs({{"start", Tensor::scalar(DType::I64, 1)},
                              {"limit", Tensor::scalar(DType::I64, 10)},
                              {"delta", Tensor::scalar(DType::I64, 0)}})),
            "node 'n' (Range): delta must not be zero");
  // Ends at infinity (a fuzzer finding: -inf elements was converted to an integer) and int64 ends
  // whose difference overflows int64.
  expectTensor(runOp(OpKind::Range, {},
                     attrs({{"start", Tensor::scalar(DType::F32, 0)},
                            {"limit", Tensor::scalar(DType::F32, -INFINITY)},
                            {"delta", Tensor::scalar(DType::F32, 1)}})),
               DType::F32, {0}, {});
  EXPECT_EQ(buildError(OpKind::Range, {},
                       attrs({{"start", Tensor::scalar(DType::F32, 0)},
                              {"limit", Tensor::scalar(DType::F32, INFINITY)},
                              {"delta", Tensor::scalar(DType::F32, 1)}})),
            "node 'n' (Range): range has too many elements");
  // np.arange(-2**63, 2**63 - 1, 2**62): 4 elements.
  expectTensor(runOp(OpKind::Range, {},
                     attrs({{"start", Tensor::scalar(DType::I64, -9223372036854775807.0 - 1)},
                            {"limit", Tensor::scalar(DType::I64, 9223372036854775807.0)},
                            {"delta", Tensor::scalar(DType::I64, 4611686018427387904.0)}})),
               DType::I64, {4}, {-9223372036854775808.0, -4611686018427387904.0, 0, 4611686018427387904.0});
}

TEST(MovementOps, ShapeOnlyOps) {
  Tensor x = iota({2, 3, 4});
  expectTensor(runOp(OpKind::Shape, {x}), DType::I64, {3}, {2, 3, 4});
  expectTensor(runOp(OpKind::Shape, {x}, attrs({{"start", int64_t{-2}}, {"end", int64_t{100}}})), DType::I64, {2},
               {3, 4});
  expectTensor(runOp(OpKind::Size, {x}), DType::I64, {}, {24});
  Tensor ofScalar = runOp(OpKind::Shape, {Tensor::scalar(DType::F32, 1)});
  ASSERT_FALSE(ofScalar.isNull());
  EXPECT_EQ(ofScalar.shape(), Shape({0}));
  // np.eye(3, 4, k=1) as i32 (ONNX dtype 6)
  expectTensor(runOp(OpKind::EyeLike, {iota({3, 4})}, attrs({{"k", int64_t{1}}, {"dtype", int64_t{6}}})), DType::I32,
               {3, 4}, {0, 1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1});
  expectTensor(
      runOp(OpKind::ConstantOfShape, {}, attrs({{"shape", Ints{2, 2}}, {"value", ints({5}, {1}, DType::I32)}})),
      DType::I32, {2, 2}, {5, 5, 5, 5});
  expectTensor(runOp(OpKind::ConstantOfShape, {}, attrs({{"shape", Ints{3}}})), DType::F32, {3}, {0, 0, 0});
}

TEST(MovementOps, ReverseSequence) {
  // ONNX reference: x = arange(12).reshape(4, 3), sequence_lens [4, 1, 2], batch_axis=1, time_axis=0
  expectTensor(runOp(OpKind::ReverseSequence, {iota({4, 3}), ints({4, 1, 2}, {3})}), DType::F32, {4, 3},
               {9, 1, 5, 6, 4, 2, 3, 7, 8, 0, 10, 11});
}

TEST(MovementOps, StaticInputMustBeConstant) {
  Graph g;
  GraphBuilder b(g);
  b.setFolding(false);
  Value* x = b.input("x", DType::F32, {2, 3});
  Value* shape = b.input("s", DType::I64, {2});
  b.op(OpKind::Reshape, {x, shape}, {}, "n");
  EXPECT_EQ(b.status().message(), "node 'n' (Reshape): input 1 ('shape') must be a compile-time constant");
  // A constant input is read directly.
  Graph g2;
  GraphBuilder b2(g2);
  b2.setFolding(false);
  Value* y = b2.op(OpKind::Reshape, {b2.input("x", DType::F32, {2, 3}), b2.constant(Tensor::fromInt64s({3, -1}))});
  ASSERT_TRUE(b2.status().isOk()) << b2.status().message();
  EXPECT_EQ(y->shape(), Shape({3, 2}));
}

}  // namespace
}  // namespace nnc
