// The IR text: printer golden output, parser round trip, and parser diagnostics.
#include <gtest/gtest.h>

#include "ir/builder.h"
#include "ir/parser.h"
#include "ir/printer.h"
#include "ir/verifier.h"

namespace nnc {
namespace {

std::unique_ptr<Graph> buildSample() {
  auto g = std::make_unique<Graph>();
  GraphBuilder b(*g);
  b.setFolding(false);
  Value* x = b.input("x", DType::F32, Shape{2, 3});
  Value* w = b.constant(Tensor::fromFloats({0.5f, 1, 1.5f}, Shape{3}), "w");
  Value* hi = b.constant(Tensor::scalar(DType::F32, 6), "hi");
  Value* big = b.constant(Tensor(DType::F32, Shape{3, 3}), "big");
  Value* s = b.add(x, w);
  Attributes alpha;
  alpha.set("alpha", 0.5);
  Value* y = b.op(OpKind::LeakyRelu, {s}, alpha, "act");
  y->setName("y");
  Value* z = b.op(OpKind::Clip, {y, nullptr, hi});
  z->setName("z");
  Value* m = b.matmul(z, big);
  Attributes split;
  split.set("axis", int64_t{1});
  split.set("split", std::vector<int64_t>{1, 2});
  std::vector<Value*> parts = b.opMulti(OpKind::Split, {m}, split, 2, "sp");
  parts[0]->setName("p0");
  parts[1]->setName("p 1");
  b.output(parts[1]);
  b.output(z);
  EXPECT_TRUE(b.status().isOk()) << b.status().message();
  return g;
}

const char* kSampleText =
    "graph(%x: f32[2x3]) -> (%\"p 1\": f32[2x2], %z: f32[2x3]) {\n"
    "  %w = Constant() {value=[0.5, 1, 1.5]} : f32[3]\n"
    "  %hi = Constant() {value=[6]} : f32[]\n"
    "  %big = Constant() : f32[3x3]\n"
    "  %Add_out0 = Add(%x, %w) : f32[2x3]\n"
    "  %y = LeakyRelu(%Add_out0) {alpha=0.5} : f32[2x3] @act\n"
    "  %z = Clip(%y, _, %hi) : f32[2x3] @Clip\n"
    "  %MatMul_out0 = MatMul(%z, %big) : f32[2x3]\n"
    "  %p0, %\"p 1\" = Split(%MatMul_out0) {axis=1, split=[1, 2]} : f32[2x1], f32[2x2] @sp\n"
    "}\n";

TEST(Printer, Golden) { EXPECT_EQ(printGraph(*buildSample()), kSampleText); }

TEST(Printer, EmptyAndScalarGraph) {
  Graph g;
  Value* x = g.addInput("x", DType::BF16, Shape{});
  g.addOutput(x);
  EXPECT_EQ(printGraph(g), "graph(%x: bf16[]) -> (%x: bf16[]) {\n}\n");
}

TEST(Printer, ConstantValuesPerDType) {
  Graph g;
  Tensor h(DType::F16, Shape{2});
  h.setDouble(0, 0.1);
  h.setDouble(1, -65504);
  g.addConstant("h", h);
  g.addConstant("b", Tensor::fromBytes(DType::Bool, Shape{2}, "\x01\x00", 2));
  g.addConstant("i", Tensor::fromInt64s({-5}));
  g.addConstant("d", Tensor::scalar(DType::F64, 0.1));
  EXPECT_EQ(printGraph(g),
            "graph() -> () {\n"
            "  %h = Constant() {value=[0.099975586, -65504]} : f16[2]\n"
            "  %b = Constant() {value=[1, 0]} : bool[2]\n"
            "  %i = Constant() {value=[-5]} : i64[1]\n"
            "  %d = Constant() {value=[0.1]} : f64[]\n"
            "}\n");
}

TEST(Parser, RoundTrip) {
  auto parsed = parseGraph(kSampleText);
  ASSERT_TRUE(parsed.isOk()) << parsed.status().message();
  Graph& g = *parsed.value();
  EXPECT_TRUE(verifyGraph(g).isOk()) << verifyGraph(g).message();
  EXPECT_EQ(printGraph(g), kSampleText);
  // Names, values and attributes come back, not just the text.
  EXPECT_EQ(g.nodes()[1]->name(), "act");
  EXPECT_EQ(g.nodes()[0]->name(), "Add");
  EXPECT_DOUBLE_EQ(g.nodes()[1]->attrs().getFloat("alpha"), 0.5);
  EXPECT_EQ(g.nodes()[2]->input(1), nullptr);
  EXPECT_EQ(g.values()[1]->constant().toDoubles(), (std::vector<double>{0.5, 1, 1.5}));
  EXPECT_EQ(g.outputs()[0]->name(), "p 1");
  // And the builder-made original and the parsed copy agree after another round.
  auto again = parseGraph(printGraph(g));
  ASSERT_TRUE(again.isOk());
  EXPECT_EQ(printGraph(*again.value()), kSampleText);
}

TEST(Parser, AttributeKindsAndComments) {
  const char* text =
      "# a comment line\n"
      "graph(%x: f32[1x2x3], %i: i64[2]) -> (%t: f32[3x2x1]) {\n"
      "  %t = Transpose(%x) {perm=[2, 1, 0]} : f32[3x2x1]  # trailing comment\n"
      "  %g = Gelu(%x) {approximate=\"tanh\"} : f32[1x2x3]\n"
      "  %c = Cast(%i) {to=1} : f32[2]\n"
      "  %l = LeakyRelu(%x) {alpha=1} : f32[1x2x3]\n"
      "  %k = Constant() {value=[true, false]} : bool[2]\n"
      "}\n";
  auto parsed = parseGraph(text);
  ASSERT_TRUE(parsed.isOk()) << parsed.status().message();
  Graph& g = *parsed.value();
  EXPECT_EQ(g.nodes()[0]->attrs().getInts("perm"), (std::vector<int64_t>{2, 1, 0}));
  EXPECT_EQ(g.nodes()[1]->attrs().getString("approximate"), "tanh");
  EXPECT_EQ(g.nodes()[3]->attrs().getFloat("alpha"), 1.0);  // an integer literal where a float is expected
  EXPECT_EQ(g.values().back()->constant().toInt64s(), (std::vector<int64_t>{1, 0}));
  EXPECT_TRUE(verifyGraph(g).isOk());
}

TEST(Parser, TensorAttributeRoundTrip) {
  Graph g;
  Attributes attrs;
  attrs.set("shape", std::vector<int64_t>{2});
  attrs.set("value", Tensor::scalar(DType::F16, 2.5).reshaped(Shape{1}));
  Node* n = g.addNode(OpKind::ConstantOfShape, "cos", {}, 1, attrs);
  ASSERT_TRUE(inferNode(*n).isOk());
  g.addOutput(n->output(0));
  std::string text = printGraph(g);
  EXPECT_EQ(text,
            "graph() -> (%cos_out0: f16[2]) {\n"
            "  %cos_out0 = ConstantOfShape() {shape=[2], value=f16[1]{2.5}} : f16[2]\n"
            "}\n");
  auto parsed = parseGraph(text);
  ASSERT_TRUE(parsed.isOk()) << parsed.status().message();
  EXPECT_EQ(printGraph(*parsed.value()), text);
}

std::string parseError(const std::string& text) {
  auto parsed = parseGraph(text);
  return parsed.isOk() ? "(parsed)" : parsed.status().message();
}

TEST(Parser, Diagnostics) {
  EXPECT_EQ(parseError("graph(%x: f32[2]) -> (%y: f32[2]) {\n  %y = Relu(%q) : f32[2]\n}\n"),
            "line 2: unknown value %q (values must be defined before use)");
  EXPECT_EQ(parseError("graph(%x: f32[2]) -> (%y: f32[2]) {\n  %y = Frob(%x) : f32[2]\n}\n"),
            "line 2: unknown operator 'Frob'");
  EXPECT_EQ(parseError("graph(%x: f32[2]) -> (%y: f32[3]) {\n  %y = Relu(%x) : f32[3]\n}\n"),
            "line 2: node 'y' (Relu): output 0 declared f32[3] but inference gives f32[2]");
  EXPECT_EQ(parseError("graph(%x: f32[2]) -> (%y: f32[2]) {\n  %y = Add(%x) : f32[2]\n}\n"),
            "line 2: node 'y' (Add): expects 2 inputs, got 1");
  EXPECT_EQ(parseError("graph(%x: f32[2]) -> (%y: f32[2]) {\n  %x = Relu(%x) : f32[2]\n}\n"),
            "line 2: value %x defined twice");
  EXPECT_EQ(parseError("graph(%x: f32[2]) -> (%w: f32[2]) {\n}\n"), "line 1: graph output %w is never defined");
  EXPECT_EQ(parseError("graph(%x: f33[2]) -> () {\n}\n"), "line 1: unknown dtype 'f33'");
  EXPECT_EQ(parseError("graph(%x: f32[2]) -> () {\n  %c = Constant() {value=[1, 2, 3]} : f32[2]\n}\n"),
            "line 2: tensor of type f32[2] given 3 values");
  EXPECT_EQ(parseError("graph(%x: f32[2]) -> () {\n  %y = Relu(%x : f32[2]\n}\n"),
            "line 2: expected ',', got ': f32[2]'");
  EXPECT_EQ(parseError("graph(%x: f32[2]) -> () {\n  %y = Relu(%x) : f32[2]\n"),
            "line 3: expected '}' at the end of the graph");
}

}  // namespace
}  // namespace nnc
