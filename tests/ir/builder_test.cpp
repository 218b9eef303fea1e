// GraphBuilder: arity and inference errors with sticky status, default names, folding through the
// reference evaluator, fold limits and shape-only folding; inferNode on hand-made nodes.
#include "ir/builder.h"

#include <gtest/gtest.h>

#include "ir/printer.h"

namespace nnc {
namespace {

TEST(Builder, InfersTypesAndNames) {
  Graph g;
  GraphBuilder b(g);
  b.setFolding(false);
  Value* x = b.input("x", DType::F32, Shape{2, 3});
  Value* y = b.input("y", DType::F32, Shape{3});
  Value* s = b.add(x, y);
  Value* t = b.add(s, y);
  ASSERT_TRUE(b.status().isOk()) << b.status().message();
  EXPECT_EQ(s->shape(), (Shape{2, 3}));
  EXPECT_EQ(s->dtype(), DType::F32);
  EXPECT_EQ(s->producer()->name(), "Add");
  EXPECT_EQ(t->producer()->name(), "Add_1");
  EXPECT_EQ(t->name(), "Add_1_out0");
}

TEST(Builder, ArityErrorIsSticky) {
  Graph g;
  GraphBuilder b(g);
  Value* x = b.input("x", DType::F32, Shape{2});
  Value* bad = b.op(OpKind::Add, {x}, {}, "n");
  EXPECT_EQ(bad, nullptr);
  ASSERT_FALSE(b.status().isOk());
  EXPECT_EQ(b.status().message(), "node 'n' (Add): expects 2 inputs, got 1");
  EXPECT_EQ(g.numNodes(), 0u);  // the failed node is not left behind
  // Later calls on the null result stay quiet; the first error is kept.
  EXPECT_EQ(b.relu(bad), nullptr);
  EXPECT_EQ(b.add(bad, x), nullptr);
  b.output(bad);
  EXPECT_EQ(b.status().message(), "node 'n' (Add): expects 2 inputs, got 1");
  // A second independent error does not overwrite the first.
  EXPECT_EQ(b.op(OpKind::Relu, {x, x}), nullptr);
  EXPECT_EQ(b.status().message(), "node 'n' (Add): expects 2 inputs, got 1");
}

TEST(Builder, OutputArityMessage) {
  Graph g;
  GraphBuilder b(g);
  Value* x = b.input("x", DType::F32, Shape{2});
  EXPECT_EQ(b.opMulti(OpKind::Relu, {x}, {}, 2, "r").size(), 2u);
  EXPECT_EQ(b.status().message(), "node 'r' (Relu): expects 1 output, got 2");
}

TEST(Builder, InferenceErrorsNameTheNode) {
  Graph g;
  GraphBuilder b(g);
  Value* x = b.input("x", DType::F32, Shape{2, 3});
  Value* y = b.input("y", DType::F32, Shape{4});
  EXPECT_EQ(b.op(OpKind::Add, {x, y}, {}, "sum"), nullptr);
  EXPECT_EQ(b.status().message(), "node 'sum' (Add): cannot broadcast shapes [2x3] and [4]");

  Graph g2;
  GraphBuilder b2(g2);
  Value* f = b2.input("f", DType::F32, Shape{3});
  Value* i = b2.input("i", DType::I64, Shape{3});
  EXPECT_EQ(b2.add(f, i), nullptr);
  EXPECT_EQ(b2.status().message(), "node 'Add' (Add): input 1 has type i64, expected f32 like input 0");

  Graph g3;
  GraphBuilder b3(g3);
  Value* z = b3.input("z", DType::F32, Shape{3});
  Attributes attrs;
  attrs.set("alpha", std::string("big"));
  EXPECT_EQ(b3.op(OpKind::LeakyRelu, {z}, attrs, "lr"), nullptr);
  EXPECT_EQ(b3.status().message(), "node 'lr' (LeakyRelu): attribute 'alpha' has type STRING, expected FLOAT");
}

TEST(Builder, MissingRequiredInput) {
  Graph g;
  GraphBuilder b(g);
  Value* x = b.input("x", DType::F32, Shape{2});
  EXPECT_EQ(b.op(OpKind::Add, {nullptr, x}, {}, "a"), nullptr);
  EXPECT_EQ(b.status().message(), "node 'a' (Add): input 0 is required");
}

TEST(Builder, OutputTooLarge) {
  Graph g;
  GraphBuilder b(g);
  Value* a = b.input("a", DType::F32, Shape{int64_t{1} << 20, 1});
  Value* c = b.input("c", DType::F32, Shape{1, int64_t{1} << 21});
  EXPECT_EQ(b.op(OpKind::MatMul, {a, c}, {}, "mm"), nullptr);
  EXPECT_EQ(b.status().message(),
            "node 'mm' (MatMul): output 0 has 2199023255552 elements, more than nnc supports (2^40)");
}

TEST(Builder, InvalidInputShape) {
  Graph g;
  GraphBuilder b(g);
  EXPECT_EQ(b.input("x", DType::F32, Shape{2, -1}), nullptr);
  EXPECT_EQ(b.status().message(), "input 'x' has an unsupported shape [2x-1]");
}

TEST(Builder, UnsupportedOperator) {
  int undefined = -1;
  for (int i = 0; i < kNumOps && undefined < 0; ++i)
    if (!OpRegistry::instance().isDefined(static_cast<OpKind>(i))) undefined = i;
  if (undefined < 0) GTEST_SKIP() << "every op is defined";
  auto op = static_cast<OpKind>(undefined);
  Graph g;
  GraphBuilder b(g);
  Value* x = b.input("x", DType::F32, Shape{2});
  EXPECT_EQ(b.op(op, {x}, {}, "u"), nullptr);
  EXPECT_EQ(b.status().message(),
            "node 'u' (" + std::string(opName(op)) + "): unsupported operator " + std::string(opName(op)));
}

TEST(Builder, FoldsConstants) {
  Graph g;
  GraphBuilder b(g);
  Value* a = b.constant(Tensor::fromFloats({1, 2, 3}, Shape{3}));
  Value* c = b.constant(Tensor::fromFloats({10, 20, 30}, Shape{3}));
  Value* s = b.add(a, c);
  ASSERT_TRUE(b.status().isOk()) << b.status().message();
  ASSERT_TRUE(s->isConstant());
  EXPECT_EQ(g.numNodes(), 0u);
  EXPECT_EQ(s->constant().toDoubles(), (std::vector<double>{11, 22, 33}));
  EXPECT_EQ(s->name(), "Add_out0");
  EXPECT_EQ(a->name(), "const");
  EXPECT_EQ(c->name(), "const_1");
}

TEST(Builder, FoldLimitAndFoldingSwitch) {
  Graph g;
  GraphBuilder b(g);
  Value* a = b.constant(Tensor::fromFloats({1, 2, 3, 4}, Shape{4}));
  b.setFoldLimit(3);
  Value* big = b.relu(a);
  EXPECT_FALSE(big->isConstant());
  b.setFoldLimit(4);
  Value* small = b.relu(a);
  EXPECT_TRUE(small->isConstant());
  b.setFolding(false);
  EXPECT_FALSE(b.relu(a)->isConstant());
  EXPECT_EQ(g.numNodes(), 2u);
}

TEST(Builder, FoldsShapeOfNonConstant) {
  Graph g;
  GraphBuilder b(g);
  Value* x = b.input("x", DType::F32, Shape{2, 5});
  if (!opDef(OpKind::Shape).dependsOnlyOnShapes) GTEST_SKIP() << "Shape is not marked dependsOnlyOnShapes";
  Value* s = b.op(OpKind::Shape, {x});
  ASSERT_TRUE(b.status().isOk()) << b.status().message();
  ASSERT_TRUE(s->isConstant());
  EXPECT_EQ(s->constant().toInt64s(), (std::vector<int64_t>{2, 5}));
  EXPECT_TRUE(x->users().empty());
}

TEST(Builder, InferNodeFillsDefaults) {
  Graph g;
  Value* x = g.addInput("x", DType::F32, Shape{2});
  Node* n = g.addNode(OpKind::LeakyRelu, "lr", {x}, 1);
  ASSERT_TRUE(inferNode(*n).isOk());
  EXPECT_DOUBLE_EQ(n->attrs().getFloat("alpha"), 0.01);
  EXPECT_EQ(n->output(0)->shape(), Shape{2});
}

}  // namespace
}  // namespace nnc
