// ONNX importer: translation of ops (generic, decomposed, older opsets), node order, graph outputs.
#include <cmath>

#include "ir/reference.h"
#include "tests/frontend/onnx_test_util.h"

namespace nnc::testing {
namespace {

std::vector<double> run(const Graph& g, const std::vector<Tensor>& inputs, int output = 0) {
  auto r = evaluateGraph(g, inputs);
  EXPECT_TRUE(r.isOk()) << r.status().message();
  if (!r.isOk()) return {};
  return r.value()[output].toDoubles();
}

void expectNear(const std::vector<double>& got, const std::vector<double>& want, double tol = 1e-5) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], tol) << "at " << i;
}

TEST(OnnxImport, SingleReluKeepsNames) {
  OnnxModel m;
  m.input("x", {2, 3});
  m.node("Relu", {"x"}, {"y"}, "relu1");
  m.output("y");
  auto g = m.import();
  ASSERT_TRUE(g.isOk()) << g.status().message();
  EXPECT_EQ(opList(**g), "Relu");
  ASSERT_EQ((*g)->inputs().size(), 1u);
  EXPECT_EQ((*g)->inputs()[0]->name(), "x");
  ASSERT_EQ((*g)->outputs().size(), 1u);
  EXPECT_EQ((*g)->outputs()[0]->name(), "y");
  EXPECT_EQ((*g)->nodes()[0]->name(), "relu1");
  EXPECT_EQ((*g)->outputs()[0]->shape(), (Shape{2, 3}));
}

TEST(OnnxImport, ReshapeShapeInputBecomesAttribute) {
  OnnxModel m;
  m.input("x", {2, 3});
  m.ints("shape", {3, -1});
  m.node("Reshape", {"x", "shape"}, {"y"}, "r");
  m.output("y");
  auto g = m.import();
  ASSERT_TRUE(g.isOk()) << g.status().message();
  const Node* r = findNode(**g, OpKind::Reshape);
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(r->numInputs(), 1);
  EXPECT_EQ(r->attrs().getInts("shape"), (std::vector<int64_t>{3, -1}));
  EXPECT_EQ((*g)->outputs()[0]->shape(), (Shape{3, 2}));
}

TEST(OnnxImport, NonConstantReshapeShapeAsksForBind) {
  OnnxModel m;
  m.input("x", {2, 3});
  m.input("s", {2}, ::onnx::TensorProto::INT64);
  m.node("Reshape", {"x", "s"}, {"y"}, "r");
  m.output("y");
  EXPECT_IMPORT_ERROR(m.import(),
                      "model.onnx: input 'shape' of node 'r' (Reshape) must be a compile-time constant; "
                      "bind it with --bind s=FILE.pb");
  onnx::ImportOptions opts;
  opts.bindings["s"] = Tensor::fromInt64s({6, 1});
  auto g = m.import(opts);
  ASSERT_TRUE(g.isOk()) << g.status().message();
  EXPECT_EQ((*g)->inputs().size(), 1u);
  EXPECT_EQ((*g)->outputs()[0]->shape(), (Shape{6, 1}));
}

TEST(OnnxImport, BindIfNeededBindsOnlyCompileTimeInputs) {
  OnnxModel m;
  m.input("x", {2, 3});
  m.input("s", {2}, ::onnx::TensorProto::INT64);
  m.node("Reshape", {"x", "s"}, {"y"}, "r");
  m.output("y");
  onnx::ImportOptions opts;
  opts.bindIfNeeded["s"] = Tensor::fromInt64s({3, 2});
  opts.bindIfNeeded["x"] = Tensor::fromFloats({1, 2, 3, 4, 5, 6}, Shape{2, 3});
  opts.bindIfNeeded["unrelated"] = Tensor::fromInt64s({1});
  auto g = m.import(opts);
  ASSERT_TRUE(g.isOk()) << g.status().message();
  ASSERT_EQ((*g)->inputs().size(), 1u);
  EXPECT_EQ((*g)->inputs()[0]->name(), "x");
  EXPECT_EQ((*g)->outputs()[0]->shape(), (Shape{3, 2}));
}

TEST(OnnxImport, ShapeSubgraphFoldsAtImport) {
  // y = Reshape(x, Concat(Gather(Shape(x), 0), [-1])): the shape computation is folded.
  OnnxModel m;
  m.input("x", {4, 2, 3});
  m.ints("zero", {0});
  m.ints("minus1", {-1});
  m.node("Shape", {"x"}, {"s"});
  setInt(m.node("Gather", {"s", "zero"}, {"n"}), "axis", 0);
  setInt(m.node("Concat", {"n", "minus1"}, {"target"}), "axis", 0);
  m.node("Reshape", {"x", "target"}, {"y"});
  m.output("y");
  auto g = m.import();
  ASSERT_TRUE(g.isOk()) << g.status().message();
  EXPECT_EQ(opList(**g), "Reshape");
  EXPECT_EQ((*g)->outputs()[0]->shape(), (Shape{4, 6}));
}

TEST(OnnxImport, GemmDecomposesAndComputes) {
  // Y = 0.5 * A @ B^T + 2 * C with A 2x3, B 4x3, C 4.
  OnnxModel m;
  m.input("a", {2, 3});
  m.floats("b", {4, 3}, {1, 0, 0, 0, 1, 0, 0, 0, 1, 1, 1, 1});
  m.floats("c", {4}, {1, 2, 3, 4});
  auto* n = m.node("Gemm", {"a", "b", "c"}, {"y"}, "gemm");
  setInt(n, "transB", 1);
  setFloat(n, "alpha", 0.5f);
  setFloat(n, "beta", 2.0f);
  m.output("y");
  auto g = m.import();
  ASSERT_TRUE(g.isOk()) << g.status().message();
  EXPECT_NE(findNode(**g, OpKind::MatMul), nullptr);
  EXPECT_EQ((*g)->outputs()[0]->name(), "y");
  // A = [[1,2,3],[4,5,6]]: A@B^T = [[1,2,3,6],[4,5,6,15]]; *0.5 + [2,4,6,8].
  auto out = run(**g, {Tensor::fromFloats({1, 2, 3, 4, 5, 6}, Shape{2, 3})});
  expectNear(out, {2.5, 5, 7.5, 11, 4, 6.5, 9, 15.5});
}

TEST(OnnxImport, BatchNormFoldsParameters) {
  OnnxModel m;
  m.input("x", {1, 2, 1, 2});
  m.floats("scale", {2}, {1, 2});
  m.floats("bias", {2}, {0, 1});
  m.floats("mean", {2}, {1, -1});
  m.floats("var", {2}, {4, 0.25});
  auto* n = m.node("BatchNormalization", {"x", "scale", "bias", "mean", "var"}, {"y"}, "bn");
  setFloat(n, "epsilon", 0.0f);
  m.output("y");
  auto g = m.import();
  ASSERT_TRUE(g.isOk()) << g.status().message();
  EXPECT_EQ(opList(**g), "Mul,Add");
  // (x - mean) / sqrt(var) * scale + bias: channel 0: (x-1)/2, channel 1: (x+1)*4 + 1.
  auto out = run(**g, {Tensor::fromFloats({3, 5, 0, 1}, Shape{1, 2, 1, 2})});
  expectNear(out, {1, 2, 5, 9});
}

TEST(OnnxImport, FlattenSqueezeUnsqueezeAreReshapes) {
  OnnxModel m(11);
  m.input("x", {2, 1, 3, 1});
  setInts(m.node("Squeeze", {"x"}, {"s"}), "axes", {1});
  setInts(m.node("Unsqueeze", {"s"}, {"u"}), "axes", {0, -1});
  setInt(m.node("Flatten", {"u"}, {"f"}), "axis", 2);
  m.output("s");
  m.output("u");
  m.output("f");
  auto g = m.import();
  ASSERT_TRUE(g.isOk()) << g.status().message();
  EXPECT_EQ(opList(**g), "Reshape,Reshape,Reshape");
  EXPECT_EQ((*g)->outputs()[0]->shape(), (Shape{2, 3, 1}));
  EXPECT_EQ((*g)->outputs()[1]->shape(), (Shape{1, 2, 3, 1, 1}));
  EXPECT_EQ((*g)->outputs()[2]->shape(), (Shape{2, 3}));
}

TEST(OnnxImport, Opset13SqueezeTakesAxesInput) {
  OnnxModel m(13);
  m.input("x", {2, 1, 3});
  m.ints("axes", {-2});
  m.node("Squeeze", {"x", "axes"}, {"y"});
  m.output("y");
  auto g = m.import();
  ASSERT_TRUE(g.isOk()) << g.status().message();
  EXPECT_EQ((*g)->outputs()[0]->shape(), (Shape{2, 3}));
}

TEST(OnnxImport, SqueezeOfNonUnitAxisFails) {
  OnnxModel m(11);
  m.input("x", {2, 3});
  setInts(m.node("Squeeze", {"x"}, {"y"}, "sq"), "axes", {1});
  m.output("y");
  EXPECT_IMPORT_ERROR(m.import(), "node 'sq' (Squeeze): cannot squeeze axis 1 of size 3");
}

TEST(OnnxImport, LegacySoftmaxCoercesTo2D) {
  // Opset 11 Softmax(axis=1) on [2,2,2] normalises over the 4 trailing elements of each batch row.
  OnnxModel m(11);
  m.input("x", {2, 2, 2});
  setInt(m.node("Softmax", {"x"}, {"y"}, "sm"), "axis", 1);
  m.output("y");
  auto g = m.import();
  ASSERT_TRUE(g.isOk()) << g.status().message();
  EXPECT_EQ(opList(**g), "Reshape,Softmax,Reshape");
  auto out = run(**g, {Tensor::fromFloats({0, 1, 2, 3, 0, 0, 0, 0}, Shape{2, 2, 2})});
  double z = 1 + std::exp(1.0) + std::exp(2.0) + std::exp(3.0);
  expectNear(out, {1 / z, std::exp(1.0) / z, std::exp(2.0) / z, std::exp(3.0) / z, 0.25, 0.25, 0.25, 0.25});
}

TEST(OnnxImport, Opset13SoftmaxIsOneOp) {
  OnnxModel m(13);
  m.input("x", {2, 2, 2});
  setInt(m.node("Softmax", {"x"}, {"y"}), "axis", 1);
  m.output("y");
  auto g = m.import();
  ASSERT_TRUE(g.isOk()) << g.status().message();
  EXPECT_EQ(opList(**g), "Softmax");
  EXPECT_EQ(findNode(**g, OpKind::Softmax)->attrs().getInt("axis"), 1);
}

TEST(OnnxImport, LegacyBroadcastAlignsAtAxis) {
  OnnxModel m(6);
  m.input("a", {2, 3, 2});
  m.floats("b", {3}, {10, 20, 30});
  auto* n = m.node("Add", {"a", "b"}, {"y"});
  setInt(n, "broadcast", 1);
  setInt(n, "axis", 1);
  m.output("y");
  auto g = m.import();
  ASSERT_TRUE(g.isOk()) << g.status().message();
  EXPECT_EQ(opList(**g), "Add");
  auto out = run(**g, {Tensor::fromFloats({0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}, Shape{2, 3, 2})});
  expectNear(out, {10, 11, 22, 23, 34, 35, 16, 17, 28, 29, 40, 41});
}

TEST(OnnxImport, ReduceAxesAttributeAndInputGiveOneForm) {
  for (int opset : {11, 13}) {
    OnnxModel m(opset);
    m.input("x", {2, 3});
    ::onnx::NodeProto* n;
    if (opset < 13) {
      n = m.node("ReduceSum", {"x"}, {"y"});
      setInts(n, "axes", {1});
    } else {
      m.ints("axes", {1});
      n = m.node("ReduceSum", {"x", "axes"}, {"y"});
    }
    setInt(n, "keepdims", 0);
    m.output("y");
    auto g = m.import();
    ASSERT_TRUE(g.isOk()) << g.status().message();
    const Node* r = findNode(**g, OpKind::ReduceSum);
    ASSERT_NE(r, nullptr);
    EXPECT_EQ(r->numInputs(), 1) << "opset " << opset;
    EXPECT_EQ(r->attrs().getInts("axes"), (std::vector<int64_t>{1}));
    EXPECT_EQ((*g)->outputs()[0]->shape(), (Shape{2}));
  }
}

TEST(OnnxImport, LegacyClipPadSliceBecomeInputForms) {
  OnnxModel m(6);
  m.input("x", {2, 4});
  auto* c = m.node("Clip", {"x"}, {"c"});
  setFloat(c, "min", -1);
  setFloat(c, "max", 1);
  auto* p = m.node("Pad", {"c"}, {"p"});
  setInts(p, "pads", {0, 1, 0, 1});
  setFloat(p, "value", 7);
  auto* s = m.node("Slice", {"p"}, {"y"});
  setInts(s, "starts", {0});
  setInts(s, "ends", {3});
  setInts(s, "axes", {1});
  m.output("y");
  auto g = m.import();
  ASSERT_TRUE(g.isOk()) << g.status().message();
  EXPECT_EQ(opList(**g), "Clip,Pad,Slice");
  const Node* clip = findNode(**g, OpKind::Clip);
  ASSERT_EQ(clip->numInputs(), 3);
  EXPECT_DOUBLE_EQ(clip->input(1)->constant().getDouble(0), -1);
  EXPECT_DOUBLE_EQ(clip->input(2)->constant().getDouble(0), 1);
  EXPECT_EQ(findNode(**g, OpKind::Pad)->attrs().getInts("pads"), (std::vector<int64_t>{0, 1, 0, 1}));
  EXPECT_EQ((*g)->outputs()[0]->shape(), (Shape{2, 3}));
  auto out = run(**g, {Tensor::fromFloats({-5, 0.5, 5, 0, 1, 2, 3, 4}, Shape{2, 4})});
  expectNear(out, {7, -1, 0.5, 7, 1, 1});
}

TEST(OnnxImport, DropoutIsIdentityWithMask) {
  OnnxModel m(13);
  m.input("x", {2, 2});
  m.node("Dropout", {"x"}, {"y", "mask"});
  m.output("y");
  m.output("mask");
  auto g = m.import();
  ASSERT_TRUE(g.isOk()) << g.status().message();
  EXPECT_EQ((*g)->outputs()[0]->name(), "y");
  EXPECT_EQ((*g)->outputs()[1]->name(), "mask");
  EXPECT_EQ((*g)->outputs()[1]->dtype(), DType::Bool);
  auto out = run(**g, {Tensor::fromFloats({1, 2, 3, 4}, Shape{2, 2})}, 0);
  expectNear(out, {1, 2, 3, 4});
  auto mask = run(**g, {Tensor::fromFloats({1, 2, 3, 4}, Shape{2, 2})}, 1);
  expectNear(mask, {1, 1, 1, 1});
}

TEST(OnnxImport, ConstantNodeForms) {
  OnnxModel m(13);
  auto* c1 = m.node("Constant", {}, {"a"});
  setFloats(c1, "value_floats", {1.5, 2.5});
  auto* c2 = m.node("Constant", {}, {"b"});
  auto* attr = c2->add_attribute();
  attr->set_name("value");
  attr->set_type(::onnx::AttributeProto::TENSOR);
  attr->mutable_t()->set_data_type(::onnx::TensorProto::FLOAT);
  attr->mutable_t()->add_dims(2);
  attr->mutable_t()->add_float_data(10);
  attr->mutable_t()->add_float_data(20);
  m.node("Add", {"a", "b"}, {"y"});
  m.output("y");
  auto g = m.import();
  ASSERT_TRUE(g.isOk()) << g.status().message();
  ASSERT_TRUE((*g)->outputs()[0]->isConstant());
  expectNear((*g)->outputs()[0]->constant().toDoubles(), {11.5, 22.5});
  EXPECT_EQ((*g)->outputs()[0]->name(), "y");
}

TEST(OnnxImport, NegativeLogLikelihoodLossMean) {
  // input[n, c] log-probabilities, target [2, 0] with weights: loss = -(w2*in[0,2] + w0*in[1,0]) / (w2 + w0).
  OnnxModel m(13);
  m.input("in", {2, 3});
  m.ints("t", {2, 0});
  m.floats("w", {3}, {0.5, 1, 2});
  m.node("NegativeLogLikelihoodLoss", {"in", "t", "w"}, {"loss"}, "nll");
  m.output("loss");
  auto g = m.import();
  ASSERT_TRUE(g.isOk()) << g.status().message();
  auto out = run(**g, {Tensor::fromFloats({-1, -2, -3, -4, -5, -6}, Shape{2, 3})});
  expectNear(out, {(2 * 3 + 0.5 * 4) / 2.5});
}

TEST(OnnxImport, SoftmaxCrossEntropyIgnoreIndexSum) {
  // Row 1 is ignored; row 0: -log_softmax([0, ln 3])[1] = ln(4/3).
  OnnxModel m(13);
  m.input("s", {2, 2});
  m.ints("labels", {1, -100});
  auto* n = m.node("SoftmaxCrossEntropyLoss", {"s", "labels"}, {"loss"});
  setInt(n, "ignore_index", -100);
  setString(n, "reduction", "sum");
  m.output("loss");
  auto g = m.import();
  ASSERT_TRUE(g.isOk()) << g.status().message();
  auto out = run(**g, {Tensor::fromFloats({0, static_cast<float>(std::log(3.0)), 5, 1}, Shape{2, 2})});
  expectNear(out, {std::log(4.0 / 3.0)});
}

TEST(OnnxImport, UpsampleBecomesNearestResize) {
  OnnxModel m(7);
  m.input("x", {1, 1, 2, 2});
  setFloats(m.node("Upsample", {"x"}, {"y"}, "up"), "scales", {1, 1, 2, 2});
  m.output("y");
  auto g = m.import();
  ASSERT_TRUE(g.isOk()) << g.status().message();
  const Node* r = findNode(**g, OpKind::Resize);
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(r->attrs().getString("coordinate_transformation_mode"), "asymmetric");
  EXPECT_EQ(r->attrs().getString("nearest_mode"), "floor");
  auto out = run(**g, {Tensor::fromFloats({1, 2, 3, 4}, Shape{1, 1, 2, 2})});
  expectNear(out, {1, 1, 2, 2, 1, 1, 2, 2, 3, 3, 4, 4, 3, 3, 4, 4});
}

TEST(OnnxImport, Resize10TakesScalesAsSecondInput) {
  OnnxModel m(10);
  m.input("x", {1, 1, 1, 2});
  m.floats("scales", {4}, {1, 1, 1, 2});
  m.node("Resize", {"x", "scales"}, {"y"});
  m.output("y");
  auto g = m.import();
  ASSERT_TRUE(g.isOk()) << g.status().message();
  EXPECT_EQ((*g)->outputs()[0]->shape(), (Shape{1, 1, 1, 4}));
  expectNear(run(**g, {Tensor::fromFloats({5, 7}, Shape{1, 1, 1, 2})}), {5, 5, 7, 7});
}

TEST(OnnxImport, TopK1AttributeBecomesInput) {
  OnnxModel m(1);
  m.input("x", {1, 4});
  setInt(m.node("TopK", {"x"}, {"v", "i"}), "k", 2);
  m.output("v");
  m.output("i");
  auto g = m.import();
  ASSERT_TRUE(g.isOk()) << g.status().message();
  expectNear(run(**g, {Tensor::fromFloats({3, 1, 4, 2}, Shape{1, 4})}, 0), {4, 3});
  expectNear(run(**g, {Tensor::fromFloats({3, 1, 4, 2}, Shape{1, 4})}, 1), {2, 0});
}

TEST(OnnxImport, Split11AttributeAndSplit13Input) {
  for (int opset : {11, 13}) {
    OnnxModel m(opset);
    m.input("x", {3});
    ::onnx::NodeProto* n;
    if (opset < 13) {
      n = m.node("Split", {"x"}, {"a", "b"});
      setInts(n, "split", {1, 2});
    } else {
      m.ints("sizes", {1, 2});
      n = m.node("Split", {"x", "sizes"}, {"a", "b"});
    }
    setInt(n, "axis", 0);
    m.output("a");
    m.output("b");
    auto g = m.import();
    ASSERT_TRUE(g.isOk()) << g.status().message();
    EXPECT_EQ((*g)->outputs()[0]->shape(), (Shape{1})) << "opset " << opset;
    EXPECT_EQ((*g)->outputs()[1]->shape(), (Shape{2})) << "opset " << opset;
  }
}

TEST(OnnxImport, BatchNormWithRuntimeScale) {
  OnnxModel m;
  m.input("x", {1, 2, 1, 1});
  m.input("scale", {2});
  m.floats("bias", {2}, {1, 1});
  m.floats("mean", {2}, {0, 2});
  m.floats("var", {2}, {1, 4});
  auto* n = m.node("BatchNormalization", {"x", "scale", "bias", "mean", "var"}, {"y"});
  setFloat(n, "epsilon", 0.0f);
  m.output("y");
  auto g = m.import();
  ASSERT_TRUE(g.isOk()) << g.status().message();
  // channel 0: (6 - 0) / 1 * 3 + 1 = 19; channel 1: (6 - 2) / 2 * 0.5 + 1 = 2.
  auto out = run(**g, {Tensor::fromFloats({6, 6}, Shape{1, 2, 1, 1}), Tensor::fromFloats({3, 0.5}, Shape{2})});
  expectNear(out, {19, 2});
}

TEST(OnnxImport, LegacyCastNamesTypeAsString) {
  OnnxModel m(1);
  m.input("x", {2});
  setString(m.node("Cast", {"x"}, {"y"}), "to", "INT32");
  m.output("y");
  auto g = m.import();
  ASSERT_TRUE(g.isOk()) << g.status().message();
  EXPECT_EQ((*g)->outputs()[0]->dtype(), DType::I32);
}

TEST(OnnxImport, UnsortedNodesAreSorted) {
  OnnxModel m;
  m.input("x", {2});
  m.node("Relu", {"a"}, {"y"}, "second");
  m.node("Neg", {"x"}, {"a"}, "first");
  m.output("y");
  auto g = m.import();
  ASSERT_TRUE(g.isOk()) << g.status().message();
  EXPECT_EQ(opList(**g), "Neg,Relu");
}

TEST(OnnxImport, CycleIsReported) {
  OnnxModel m;
  m.input("x", {2});
  m.node("Add", {"x", "c"}, {"a"}, "n1");
  m.node("Relu", {"a"}, {"b"}, "n2");
  m.node("Neg", {"b"}, {"c"}, "n3");
  m.output("c");
  auto g = m.import();
  ASSERT_FALSE(g.isOk());
  const std::string& msg = g.status().message();
  EXPECT_NE(msg.find("model.onnx: graph has a cycle through node 'n"), std::string::npos) << msg;
}

TEST(OnnxImport, UndefinedInputIsReported) {
  OnnxModel m;
  m.input("x", {2});
  m.node("Add", {"x", "nope"}, {"y"}, "add1");
  m.output("y");
  EXPECT_IMPORT_ERROR(m.import(), "model.onnx: node 'add1' (Add): input 'nope' is not defined");
}

TEST(OnnxImport, DuplicateOutputIsReported) {
  OnnxModel m;
  m.input("x", {2});
  m.node("Relu", {"x"}, {"y"}, "a");
  m.node("Neg", {"x"}, {"y"}, "b");
  m.output("y");
  EXPECT_IMPORT_ERROR(m.import(), "duplicate output name 'y' (node 'a' (Relu) and node 'b' (Neg))");
}

TEST(OnnxImport, UnsupportedOperatorAndDomain) {
  OnnxModel m;
  m.input("x", {2});
  m.node("NonZero", {"x"}, {"y"}, "nz");
  m.output("y");
  EXPECT_IMPORT_ERROR(m.import(), "model.onnx: node 'nz' (NonZero): unsupported operator NonZero");

  OnnxModel d;
  d.input("x", {2});
  d.node("FusedGemm", {"x"}, {"y"}, "fg")->set_domain("com.microsoft");
  d.output("y");
  EXPECT_IMPORT_ERROR(d.import(), "node 'fg' (FusedGemm): unsupported operator domain 'com.microsoft'");

  // nnc's internal ops are made by passes, never imported from a file.
  OnnxModel internal;
  internal.input("x", {1, 1, 4, 4});
  setInts(internal.node("Im2Col", {"x"}, {"y"}, "cols"), "kernel_shape", {2, 2});
  internal.output("y");
  EXPECT_IMPORT_ERROR(internal.import(), "model.onnx: node 'cols' (Im2Col): unsupported operator Im2Col");
}

TEST(OnnxImport, MissingAndMistypedAttributes) {
  OnnxModel m;
  m.input("x", {2});
  m.node("Cast", {"x"}, {"y"}, "c");
  m.output("y");
  EXPECT_IMPORT_ERROR(m.import(), "model.onnx: node 'c' (Cast): missing required attribute 'to'");

  OnnxModel w;
  w.input("x", {2});
  setString(w.node("LeakyRelu", {"x"}, {"y"}, "lr"), "alpha", "big");
  w.output("y");
  EXPECT_IMPORT_ERROR(w.import(),
                      "model.onnx: node 'lr' (LeakyRelu): attribute 'alpha' has type STRING, expected FLOAT");

  OnnxModel gm;
  gm.input("a", {2, 2});
  gm.input("b", {2, 2});
  setFloat(gm.node("Gemm", {"a", "b"}, {"y"}, "g"), "transA", 1);
  gm.output("y");
  EXPECT_IMPORT_ERROR(gm.import(), "model.onnx: node 'g' (Gemm): attribute 'transA' has type FLOAT, expected INT");

  OnnxModel u(11);
  u.input("x", {2});
  u.node("Unsqueeze", {"x"}, {"y"}, "u");
  u.output("y");
  EXPECT_IMPORT_ERROR(u.import(), "node 'u' (Unsqueeze): missing required attribute 'axes'");
}

TEST(OnnxImport, IfNeedsACompileTimeCondition) {
  // If is imported by inlining the taken branch (tests/frontend/extra_handlers_test.cpp), so its
  // condition must be known at compile time.
  OnnxModel m;
  m.input("x", {2});
  auto* n = m.node("If", {"x"}, {"y"}, "if1");
  auto* a = n->add_attribute();
  a->set_name("then_branch");
  a->set_type(::onnx::AttributeProto::GRAPH);
  m.output("y");
  EXPECT_IMPORT_ERROR(m.import(), "input 'cond' of node 'if1' (If) must be a compile-time constant");
}

TEST(OnnxImport, SymbolicDimsNeedShapeOverride) {
  OnnxModel m;
  m.input("x", {-1, 3});
  m.node("Relu", {"x"}, {"y"});
  m.output("y");
  EXPECT_IMPORT_ERROR(m.import(), "model.onnx: input 'x' has symbolic dim 'N'; give --shape x=...");
  onnx::ImportOptions opts;
  opts.shapeOverrides["x"] = Shape{5, 3};
  auto g = m.import(opts);
  ASSERT_TRUE(g.isOk()) << g.status().message();
  EXPECT_EQ((*g)->outputs()[0]->shape(), (Shape{5, 3}));
  opts.shapeOverrides["x"] = Shape{5};
  EXPECT_IMPORT_ERROR(m.import(opts), "has rank 1, but the model declares rank 2");
  onnx::ImportOptions unknown;
  unknown.shapeOverrides["z"] = Shape{1};
  EXPECT_IMPORT_ERROR(m.import(unknown), "--shape names 'z', which is not a graph input");
}

// Legacy exporters declare a dynamic dim as -1: unknown until --shape gives it, as a symbolic one.
TEST(OnnxImport, NegativeDimsAreUnknownUntilAShapeOverride) {
  OnnxModel m;
  m.input("x", {2, 3});
  m.setInputDim(0, 0, -1);
  m.node("Relu", {"x"}, {"y"});
  m.output("y");
  EXPECT_IMPORT_ERROR(m.import(), "model.onnx: input 'x' has negative dim -1; give --shape x=...");
  onnx::ImportOptions opts;
  opts.shapeOverrides["x"] = Shape{4, 3};
  auto g = m.import(opts);
  ASSERT_TRUE(g.isOk()) << g.status().message();
  EXPECT_EQ((*g)->outputs()[0]->shape(), (Shape{4, 3}));
}

TEST(OnnxImport, InitializerInputsAreConstants) {
  OnnxModel m;
  m.input("x", {2});
  m.input("w", {2});
  m.floats("w", {2}, {1, 2});
  m.node("Add", {"x", "w"}, {"y"});
  m.output("y");
  auto g = m.import();
  ASSERT_TRUE(g.isOk()) << g.status().message();
  ASSERT_EQ((*g)->inputs().size(), 1u);
  EXPECT_EQ((*g)->inputs()[0]->name(), "x");
}

TEST(OnnxImport, OutputThatIsAnInputAliasGetsItsName) {
  OnnxModel m;
  m.input("x", {2});
  m.node("Identity", {"x"}, {"y"});
  m.output("x");
  m.output("y");
  auto g = m.import();
  ASSERT_TRUE(g.isOk()) << g.status().message();
  EXPECT_EQ((*g)->outputs()[0]->name(), "x");
  EXPECT_EQ((*g)->outputs()[1]->name(), "y");
}

TEST(OnnxImport, MissingGraphOutputIsReported) {
  OnnxModel m;
  m.input("x", {2});
  m.node("Relu", {"x"}, {"y"});
  m.output("z");
  EXPECT_IMPORT_ERROR(m.import(), "graph output 'z' is not produced");
}

TEST(OnnxImport, MissingDefaultOpsetIsReported) {
  OnnxModel m;
  m.proto().mutable_opset_import(0)->set_domain("ai.onnx.ml");
  m.input("x", {2});
  m.node("Relu", {"x"}, {"y"});
  m.output("y");
  onnx::ImportOptions allow;  // past the refusal of the unknown domain, to the node that needs ai.onnx
  allow.allowUnsupportedOpset = true;
  EXPECT_IMPORT_ERROR(m.import(allow),
                      "model declares no opset for the default ONNX domain (opset_import), which "
                      "node 'y' (Relu) uses");
}

// Strict opsets: a default-domain opset newer than nnc implements, or an imported domain nnc does
// not implement, is refused up front (before any node: an op of the newer opset may have changed
// meaning without changing name), unless the user allows it.
TEST(OnnxImport, NewerOpsetIsRefusedUnlessAllowed) {
  for (int64_t opset : {onnx::kMaxSupportedOpset + 1, int64_t{999}}) {
    OnnxModel m(opset);
    m.input("x", {2});
    m.node("Relu", {"x"}, {"y"}, "relu");
    m.output("y");
    EXPECT_IMPORT_ERROR(m.import(), "model.onnx: the model's default-domain opset " + std::to_string(opset) +
                                        " is newer than nnc supports: nnc implements the default ONNX domain "
                                        "(ai.onnx), opsets 1 to 22; re-export it for opset 22 or older, or pass "
                                        "--allow-unsupported-opset to compile it anyway (an operator whose "
                                        "definition changed after opset 22 then gets the older definition)");
    onnx::ImportOptions allow;
    allow.allowUnsupportedOpset = true;
    EXPECT_TRUE(m.import(allow).isOk());
  }
  OnnxModel newest(onnx::kMaxSupportedOpset);
  newest.input("x", {2});
  newest.node("Relu", {"x"}, {"y"});
  newest.output("y");
  EXPECT_TRUE(newest.import().isOk());
  // "ai.onnx" is the default domain's other name.
  newest.proto().mutable_opset_import(0)->set_domain("ai.onnx");
  newest.proto().mutable_opset_import(0)->set_version(onnx::kMaxSupportedOpset + 1);
  EXPECT_IMPORT_ERROR(newest.import(), "model.onnx: the model's default-domain opset 23 is newer than nnc supports");
}

TEST(OnnxImport, ImportedDomainIsRefusedOnlyWhereANodeUsesIt) {
  // tf2onnx and paddle2onnx declare domains (ai.onnx.ml, Paddle) that no node of the model uses.
  OnnxModel m;
  auto* ml = m.proto().add_opset_import();
  ml->set_domain("ai.onnx.ml");
  ml->set_version(3);
  m.input("x", {2});
  m.node("Relu", {"x"}, {"y"});
  m.output("y");
  EXPECT_TRUE(m.import().isOk()) << "no node uses the domain";
  m.node("Binarizer", {"y"}, {"z"}, "bin")->set_domain("ai.onnx.ml");
  m.proto().mutable_graph()->mutable_output(0)->set_name("z");
  const std::string refused =
      "model.onnx: node 'bin' (Binarizer): unsupported operator domain 'ai.onnx.ml'; nnc implements the default "
      "ONNX domain (ai.onnx)";
  EXPECT_IMPORT_ERROR(m.import(), refused);
  onnx::ImportOptions allow;
  allow.allowUnsupportedOpset = true;
  EXPECT_IMPORT_ERROR(m.import(allow), refused);
}

}  // namespace
}  // namespace nnc::testing
