// The verifier catches broken graphs, naming the node or value at fault.
#include "ir/verifier.h"

#include <gtest/gtest.h>

#include "ir/builder.h"

namespace nnc {
namespace {

struct Sample {
  std::unique_ptr<Graph> g = std::make_unique<Graph>();
  Value* x;
  Value* r;
  Value* a;
};

Sample build() {
  Sample s;
  GraphBuilder b(*s.g);
  b.setFolding(false);
  s.x = b.input("x", DType::F32, Shape{2, 3});
  s.r = b.relu(s.x);
  s.a = b.add(s.r, s.x);
  b.output(s.a);
  EXPECT_TRUE(b.status().isOk());
  return s;
}

TEST(Verifier, AcceptsBuilderGraph) {
  Sample s = build();
  Status st = verifyGraph(*s.g);
  EXPECT_TRUE(st.isOk()) << st.message();
}

TEST(Verifier, StaleOutputType) {
  Sample s = build();
  s.r->setType(DType::F32, Shape{9});
  EXPECT_EQ(verifyGraph(*s.g).message(),
            "node 'Relu' (Relu): output 0 'Relu_out0' has type f32[9] but inference gives f32[2x3]");
}

TEST(Verifier, StaleInferenceInput) {
  Sample s = build();
  // Relu's output now i64 makes Add's inputs disagree: inference itself rejects the node.
  s.r->setType(DType::I64, Shape{2, 3});
  EXPECT_EQ(verifyGraph(*s.g).message(),
            "node 'Relu' (Relu): output 0 'Relu_out0' has type i64[2x3] but inference gives f32[2x3]");
}

TEST(Verifier, DuplicateValueNames) {
  Sample s = build();
  s.a->setName("x");
  EXPECT_EQ(verifyGraph(*s.g).message(), "value name 'x' is used by two values");
}

TEST(Verifier, AttributesWithoutDefaults) {
  Sample s = build();
  Node* n = s.g->addNode(OpKind::LeakyRelu, "lr", {s.a}, 1);
  n->output(0)->setType(DType::F32, Shape{2, 3});
  EXPECT_EQ(verifyGraph(*s.g).message(),
            "node 'lr' (LeakyRelu): attribute 'alpha' is missing (defaults not filled; run inferNode)");
  ASSERT_TRUE(inferNode(*n).isOk());
  EXPECT_TRUE(verifyGraph(*s.g).isOk());
}

TEST(Verifier, ArityOutsideOpDef) {
  Sample s = build();
  s.g->setNodeInput(s.r->producer(), 1, s.x);  // Relu with two inputs
  EXPECT_EQ(verifyGraph(*s.g).message(), "node 'Relu' (Relu): has 2 inputs, outside the op's arity");
}

TEST(Verifier, UseBeforeDefinition) {
  Sample s = build();
  Node* early = s.g->insertNodeBefore(s.r->producer(), OpKind::Neg, "early", {s.a}, 1);
  ASSERT_TRUE(inferNode(*early).isOk());
  EXPECT_EQ(verifyGraph(*s.g).message(),
            "node 'early' (Neg): input 0 'Add_out0' is used before it is defined (nodes out of topological "
            "order?)");
}

TEST(Verifier, ForeignValue) {
  Sample s = build();
  Graph other;
  Value* alien = other.addInput("alien", DType::F32, Shape{2, 3});
  // Splice a value of another graph into a node behind the graph's back (only a buggy pass could).
  const_cast<std::vector<Value*>&>(s.a->producer()->inputs())[1] = alien;
  EXPECT_EQ(verifyGraph(*s.g).message(), "node 'Add' (Add): input 1 is not a value of the graph");
}

TEST(Verifier, BrokenUseList) {
  Sample s = build();
  // Make Add read r twice while x's use list still lists Add's input 1.
  const_cast<std::vector<Value*>&>(s.a->producer()->inputs())[1] = s.r;
  std::string msg = verifyGraph(*s.g).message();
  EXPECT_EQ(msg, "node 'Add' (Add): input 1 'Relu_out0' lists this use 0 times, expected once");
}

}  // namespace
}  // namespace nnc
