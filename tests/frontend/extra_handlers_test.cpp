// ONNX importer handlers of frontend/onnx/extra_handlers.cpp (CastLike, GroupNormalization,
// CenterCropPad, AffineGrid, MaxUnpool, Col2Im) and the DeformConv op, evaluated by the reference
// interpreter. Expected values come from onnx.reference.ReferenceEvaluator (onnx 1.17), pasted in.
#include <cmath>

#include "ir/reference.h"
#include "tests/frontend/onnx_test_util.h"

namespace nnc::testing {
namespace {

std::vector<double> run(const Graph& g, const std::vector<Tensor>& inputs) {
  auto r = evaluateGraph(g, inputs);
  EXPECT_TRUE(r.isOk()) << r.status().message();
  if (!r.isOk()) return {};
  return r.value()[0].toDoubles();
}

void expectNear(const std::vector<double>& got, const std::vector<double>& want, double tol = 1e-5) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], tol) << "at " << i;
}

std::vector<float> iota(int count, float start = 0, float step = 1) {
  std::vector<float> v;
  for (int i = 0; i < count; ++i) v.push_back(start + step * static_cast<float>(i));
  return v;
}

TEST(ExtraHandlers, CastLikeTakesTheSecondInputsType) {
  OnnxModel m(21);
  m.input("x", {3});
  m.input("like", {1}, ::onnx::TensorProto::DOUBLE);
  m.node("CastLike", {"x", "like"}, {"y"}, "cl");
  m.output("y");
  auto g = m.import();
  ASSERT_TRUE(g.isOk()) << g.status().message();
  EXPECT_EQ(opList(**g), "Cast");
  EXPECT_EQ((*g)->outputs()[0]->dtype(), DType::F64);
  Tensor like(DType::F64, Shape{1});
  expectNear(run(**g, {Tensor::fromFloats({1.5f, -2.25f, 3}, Shape{3}), like}), {1.5, -2.25, 3}, 0);
}

// x = [1, 2, 4, 8, -1, 0, 3, 5] as [1, 4, 2], two groups of two channels.
TEST(ExtraHandlers, GroupNormalizationOpset21ScalesPerChannel) {
  OnnxModel m(21);
  m.input("x", {1, 4, 2});
  m.floats("s", {4}, {1, 2, 0.5f, -1});
  m.floats("b", {4}, {0, 1, 2, 3});
  setInt(m.node("GroupNormalization", {"x", "s", "b"}, {"y"}, "gn"), "num_groups", 2);
  m.output("y");
  auto g = m.import();
  ASSERT_TRUE(g.isOk()) << g.status().message();
  EXPECT_NE(findNode(**g, OpKind::InstanceNormalization), nullptr);
  expectNear(run(**g, {Tensor::fromFloats({1, 2, 4, 8, -1, 0, 3, 5}, Shape{1, 4, 2})}),
             {-1.0257545709609985, -0.6527528762817383, 1.1865007877349854, 4.170514106750488, 1.4234437942504883,
              1.6331006288528442, 2.475857973098755, 1.6372308731079102});
}

TEST(ExtraHandlers, GroupNormalizationOpset18ScalesPerGroup) {
  OnnxModel m(18);
  m.input("x", {1, 4, 2});
  m.floats("s", {2}, {2, 0.5f});
  m.floats("b", {2}, {1, -1});
  setInt(m.node("GroupNormalization", {"x", "s", "b"}, {"y"}, "gn"), "num_groups", 2);
  m.output("y");
  auto g = m.import();
  ASSERT_TRUE(g.isOk()) << g.status().message();
  expectNear(run(**g, {Tensor::fromFloats({1, 2, 4, 8, -1, 0, 3, 5}, Shape{1, 4, 2})}),
             {-1.051509141921997, -0.30550575256347656, 1.1865007877349854, 4.170514106750488, -1.5765562057495117,
              -1.3668993711471558, -0.7379289865493774, -0.3186154365539551});
}

TEST(ExtraHandlers, GroupNormalizationRejectsGroupsNotDividingChannels) {
  OnnxModel m(21);
  m.input("x", {1, 4, 2});
  m.floats("s", {4}, {1, 1, 1, 1});
  m.floats("b", {4}, {0, 0, 0, 0});
  setInt(m.node("GroupNormalization", {"x", "s", "b"}, {"y"}, "gn"), "num_groups", 3);
  m.output("y");
  EXPECT_IMPORT_ERROR(m.import(), "node 'gn' (GroupNormalization): num_groups 3 must be positive and divide the 4");
}

TEST(ExtraHandlers, CenterCropPadCropsAndPads) {
  // x = arange(12) as [3, 4] to [2, 6]: rows 0..1 (the odd row goes from the end), one zero column
  // on each side.
  OnnxModel m(18);
  m.input("x", {3, 4});
  m.ints("shape", {2, 6});
  m.node("CenterCropPad", {"x", "shape"}, {"y"}, "ccp");
  m.output("y");
  auto g = m.import();
  ASSERT_TRUE(g.isOk()) << g.status().message();
  EXPECT_EQ((*g)->outputs()[0]->shape(), (Shape{2, 6}));
  expectNear(run(**g, {Tensor::fromFloats(iota(12), Shape{3, 4})}), {0, 0, 1, 2, 3, 0, 0, 4, 5, 6, 7, 0}, 0);
}

TEST(ExtraHandlers, CenterCropPadNegativeAxis) {
  OnnxModel m(18);
  m.input("x", {3, 4});
  m.ints("shape", {1});
  setInts(m.node("CenterCropPad", {"x", "shape"}, {"y"}, "ccp"), "axes", {-1});
  m.output("y");
  auto g = m.import();
  ASSERT_TRUE(g.isOk()) << g.status().message();
  expectNear(run(**g, {Tensor::fromFloats(iota(12), Shape{3, 4})}), {1, 5, 9}, 0);
}

void affineGridCase(int64_t alignCorners, const std::vector<double>& want) {
  OnnxModel m(20);
  m.input("theta", {1, 2, 3});
  m.ints("size", {1, 1, 2, 3});
  setInt(m.node("AffineGrid", {"theta", "size"}, {"grid"}, "ag"), "align_corners", alignCorners);
  m.output("grid");
  auto g = m.import();
  ASSERT_TRUE(g.isOk()) << g.status().message();
  EXPECT_EQ((*g)->outputs()[0]->shape(), (Shape{1, 2, 3, 2}));
  expectNear(run(**g, {Tensor::fromFloats({1, 0.5f, 0.25f, -0.5f, 2, 1}, Shape{1, 2, 3})}), want, 1e-6);
}

TEST(ExtraHandlers, AffineGrid2d) {
  affineGridCase(0, {-0.6666666865348816, 0.3333333432674408, 0, 0, 0.6666666865348816, -0.3333333432674408,
                     -0.1666666716337204, 2.3333332538604736, 0.5, 2, 1.1666666269302368, 1.6666666269302368});
  affineGridCase(1, {-1.25, -0.5, -0.25, -1, 0.75, -1.5, -0.25, 3.5, 0.75, 3, 1.75, 2.5});
}

// MaxPool indices are flat over the whole tensor: plane 1 of a [1, 2, 4, 4] pool output starts at 16.
TEST(ExtraHandlers, MaxUnpoolScattersPerPlane) {
  OnnxModel m(22);
  m.input("x", {1, 2, 2, 2});
  m.input("i", {1, 2, 2, 2}, ::onnx::TensorProto::INT64);
  auto* n = m.node("MaxUnpool", {"x", "i"}, {"y"}, "mu");
  setInts(n, "kernel_shape", {2, 2});
  setInts(n, "strides", {2, 2});
  m.output("y");
  auto g = m.import();
  ASSERT_TRUE(g.isOk()) << g.status().message();
  EXPECT_EQ((*g)->outputs()[0]->shape(), (Shape{1, 2, 4, 4}));
  auto out = run(**g, {Tensor::fromFloats({1, 2, 3, 4, 5, 6, 7, 8}, Shape{1, 2, 2, 2}),
                       Tensor::fromInt64s({5, 7, 13, 15, 16, 19, 24, 30}, Shape{1, 2, 2, 2})});
  std::vector<double> want(32, 0.0);
  want[5] = 1, want[7] = 2, want[13] = 3, want[15] = 4, want[16] = 5, want[19] = 6, want[24] = 7, want[30] = 8;
  expectNear(out, want, 0);
}

TEST(ExtraHandlers, MaxUnpoolOutputShapePadsTheEnd) {
  OnnxModel m(22);
  m.input("x", {1, 1, 2, 2});
  m.input("i", {1, 1, 2, 2}, ::onnx::TensorProto::INT64);
  m.ints("shape", {1, 1, 5, 5});
  auto* n = m.node("MaxUnpool", {"x", "i", "shape"}, {"y"}, "mu");
  setInts(n, "kernel_shape", {2, 2});
  setInts(n, "strides", {2, 2});
  m.output("y");
  auto g = m.import();
  ASSERT_TRUE(g.isOk()) << g.status().message();
  auto out = run(**g, {Tensor::fromFloats({5, 6, 7, 8}, Shape{1, 1, 2, 2}),
                       Tensor::fromInt64s({5, 7, 13, 15}, Shape{1, 1, 2, 2})});
  // The ONNX test's expected output: indices address the inferred 4x4 plane.
  expectNear(out, {0, 0, 0, 0, 0, 0, 5, 0, 6, 0, 0, 0, 0, 0, 0, 0, 7, 0, 8, 0, 0, 0, 0, 0, 0}, 0);
}

// Hostile attribute values: sizes whose arithmetic would overflow int64 are errors naming the node.
TEST(ExtraHandlers, MaxUnpoolRefusesHugeOrNegativeSizes) {
  auto importError = [](std::vector<int64_t> xDims, std::vector<int64_t> kernel, std::vector<int64_t> strides,
                        std::vector<int64_t> outputShape) {
    OnnxModel m(22);
    m.input("x", xDims);
    m.input("i", xDims, ::onnx::TensorProto::INT64);
    std::vector<std::string> inputs = {"x", "i"};
    if (!outputShape.empty()) {
      m.ints("shape", outputShape);
      inputs.push_back("shape");
    }
    auto* n = m.node("MaxUnpool", inputs, {"y"}, "mu");
    setInts(n, "kernel_shape", kernel);
    setInts(n, "strides", strides);
    m.output("y");
    auto g = m.import();
    return g.isOk() ? std::string("imported") : g.status().message();
  };
  EXPECT_EQ(importError({1, 1, 2, 2}, {INT64_MAX, 2}, {1, 1}, {}),
            "model.onnx: node 'mu' (MaxUnpool): attribute 'kernel_shape' [9223372036854775807, 2] has a value above "
            "2^31 - 1");
  EXPECT_EQ(importError({1, 1, 2, 2}, {2, 2}, {1, INT64_MAX}, {}),
            "model.onnx: node 'mu' (MaxUnpool): attribute 'strides' [1, 9223372036854775807] has a value above "
            "2^31 - 1");
  // An empty batch with a 2^40 spatial dim: 2^40 x a 2^31 stride overflows int64.
  EXPECT_EQ(importError({0, 1, int64_t{1} << 40, 1}, {1, 1}, {INT32_MAX, 1}, {}),
            "model.onnx: node 'mu' (MaxUnpool): inferred output size on spatial axis 0 is too large");
  EXPECT_EQ(importError({1, 1, 2, 2}, {2, 2}, {2, 2}, {1, 1, INT64_MIN, 4}),
            "model.onnx: node 'mu' (MaxUnpool): output_shape [1, 1, -9223372036854775808, 4] is not a valid shape");
  EXPECT_EQ(importError({1 << 20, 1 << 20, 1, 1}, {1 << 20, 1}, {1, 1}, {}),
            "model.onnx: node 'mu' (MaxUnpool): the unpooled output [1048576x1048576x1048576x1] has more than 2^40 "
            "elements");
}

TEST(ExtraHandlers, Col2ImWithStridesAndPads) {
  // x = arange(1, 33) as [1, 8, 4]: two channels of 2x2 blocks, image 3x4, strides [1, 2], pads
  // [0, 0, 0, 1] (the width's block count leaves a remainder).
  OnnxModel m(18);
  m.input("x", {1, 8, 4});
  m.ints("image", {3, 4});
  m.ints("block", {2, 2});
  auto* n = m.node("Col2Im", {"x", "image", "block"}, {"y"}, "c2i");
  setInts(n, "strides", {1, 2});
  setInts(n, "pads", {0, 0, 0, 1});
  m.output("y");
  auto g = m.import();
  ASSERT_TRUE(g.isOk()) << g.status().message();
  EXPECT_EQ((*g)->outputs()[0]->shape(), (Shape{1, 2, 3, 4}));
  expectNear(run(**g, {Tensor::fromFloats(iota(32, 1), Shape{1, 8, 4})}),
             {1, 5, 2, 6, 12, 20, 14, 22, 11, 15, 12, 16, 17, 21, 18, 22, 44, 52, 46, 54, 27, 31, 28, 32}, 0);
}

TEST(ExtraHandlers, Col2ImRejectsWrongBlockCount) {
  OnnxModel m(18);
  m.input("x", {1, 8, 6});
  m.ints("image", {3, 4});
  m.ints("block", {2, 2});
  setInts(m.node("Col2Im", {"x", "image", "block"}, {"y"}, "c2i"), "strides", {1, 2});
  m.output("y");
  EXPECT_IMPORT_ERROR(m.import(), "node 'c2i' (Col2Im): input has 6 blocks, expected 4");
}

// X = 0.5 * arange(1, 25) as [1, 2, 3, 4]; 2 groups, 2 offset groups, pads [0, 0, 0, 1];
// offset[i] = f32(sin(i) * 1.3), mask[i] = f32(cos(i) * 0.5 + 0.5), so samples fall between pixels
// and outside the image.
TEST(ExtraHandlers, DeformConvWithMaskBiasAndOffsetGroups) {
  OnnxModel m(22);
  m.input("x", {1, 2, 3, 4});
  m.floats("w", {2, 1, 2, 2}, {1, -1, 0.5f, 2, 0.25f, 1, -2, 1});
  m.input("offset", {1, 16, 2, 4});
  m.floats("b", {2}, {0.5f, -1});
  m.input("mask", {1, 8, 2, 4});
  auto* n = m.node("DeformConv", {"x", "w", "offset", "b", "mask"}, {"y"}, "dc");
  setInt(n, "group", 2);
  setInt(n, "offset_group", 2);
  setInts(n, "pads", {0, 0, 0, 1});
  m.output("y");
  auto g = m.import();
  ASSERT_TRUE(g.isOk()) << g.status().message();
  EXPECT_EQ((*g)->outputs()[0]->shape(), (Shape{1, 2, 2, 4}));
  std::vector<float> offset, mask;
  for (int i = 0; i < 128; ++i) offset.push_back(static_cast<float>(std::sin(static_cast<double>(i)) * 1.3));
  for (int i = 0; i < 64; ++i) mask.push_back(static_cast<float>(std::cos(static_cast<double>(i)) * 0.5 + 0.5));
  auto out = run(**g, {Tensor::fromFloats(iota(24, 0.5f, 0.5f), Shape{1, 2, 3, 4}),
                       Tensor::fromFloats(offset, Shape{1, 16, 2, 4}), Tensor::fromFloats(mask, Shape{1, 8, 2, 4})});
  expectNear(out,
             {2.5248560905456543, 6.4821062088012695, 3.3012800216674805, 1.6750019788742065, -2.6721372604370117,
              -2.260366201400757, 5.583630561828613, 1.160433053970337, 5.2533674240112305, -2.5315632820129395,
              -13.370570182800293, -7.790332794189453, 1.8215889930725098, 10.553272247314453, 8.167969703674316,
              -1.8066900968551636},
             1e-4);
}

TEST(ExtraHandlers, DeformConvRejectsWrongOffsetShape) {
  OnnxModel m(22);
  m.input("x", {1, 1, 3, 3});
  m.floats("w", {1, 1, 2, 2}, {1, 1, 1, 1});
  m.input("offset", {1, 8, 3, 3});
  m.node("DeformConv", {"x", "w", "offset"}, {"y"}, "dc");
  m.output("y");
  EXPECT_IMPORT_ERROR(m.import(), "node 'dc' (DeformConv): offset has shape [1x8x3x3], expected [1x8x2x2]");
}

// If with a constant condition imports the taken branch inline; branch nodes read outer values.
void ifCase(bool cond, double want0) {
  OnnxModel m(18);
  m.input("x", {2});
  auto* c = m.graph().add_initializer();
  c->set_name("cond");
  c->set_data_type(::onnx::TensorProto::BOOL);
  c->add_int32_data(cond ? 1 : 0);
  auto* n = m.node("If", {"cond"}, {"y"}, "if1");
  for (const char* branch : {"then_branch", "else_branch"}) {
    auto* a = n->add_attribute();
    a->set_name(branch);
    a->set_type(::onnx::AttributeProto::GRAPH);
    ::onnx::GraphProto* g = a->mutable_g();
    g->set_name(branch);
    auto* node = g->add_node();
    node->set_op_type(std::string(branch) == "then_branch" ? "Neg" : "Abs");
    node->add_input("x");
    node->add_output("t");
    g->add_output()->set_name("t");
  }
  m.node("Relu", {"y"}, {"z"}, "after");  // a user of the If's output
  m.output("y");
  m.output("z");
  auto g = m.import();
  ASSERT_TRUE(g.isOk()) << g.status().message();
  EXPECT_EQ(opList(**g), cond ? "Neg,Relu" : "Abs,Relu");
  EXPECT_EQ((*g)->outputs()[0]->name(), "y");
  expectNear(run(**g, {Tensor::fromFloats({-3, 2}, Shape{2})}), {want0, cond ? -2.0 : 2.0}, 0);
}

TEST(ExtraHandlers, IfWithConstantConditionInlinesTheTakenBranch) {
  ifCase(true, 3);
  ifCase(false, 3);
}

}  // namespace
}  // namespace nnc::testing
