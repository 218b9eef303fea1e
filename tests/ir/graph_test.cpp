// Graph storage and rewrite helpers: names, use lists, replaceAllUsesWith, eraseNode,
// insertNodeBefore, sortTopologically (with a cycle), clone, removeDeadValues.
#include "ir/graph.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "ir/builder.h"
#include "ir/printer.h"
#include "ir/verifier.h"

namespace nnc {
namespace {

bool hasUse(const Value* v, const Node* n, int i) {
  return std::count(v->users().begin(), v->users().end(), Use{const_cast<Node*>(n), i}) == 1;
}

TEST(Graph, UniqueNames) {
  Graph g;
  EXPECT_EQ(g.uniqueName("a"), "a");
  EXPECT_EQ(g.uniqueName("a"), "a_1");
  EXPECT_EQ(g.uniqueName("a"), "a_2");
  Value* x = g.addInput("x", DType::F32, Shape{2});
  EXPECT_EQ(g.uniqueName("x"), "x_1");
  x->setName("renamed");
  EXPECT_EQ(g.uniqueName("renamed"), "renamed_1");
  g.addInput("b_1", DType::F32, Shape{2});
  EXPECT_EQ(g.uniqueName("b"), "b");
  EXPECT_EQ(g.uniqueName("b"), "b_2");  // b_1 is taken by a value
}

TEST(Graph, AddNodeRegistersUsesAndNamesOutputs) {
  Graph g;
  Value* x = g.addInput("x", DType::F32, Shape{2});
  Node* n = g.addNode(OpKind::Clip, "clip", {x, nullptr, x}, 1);
  EXPECT_EQ(n->output(0)->name(), "clip_out0");
  EXPECT_EQ(n->output(0)->producer(), n);
  EXPECT_EQ(n->diagPrefix(), "node 'clip' (Clip): ");
  EXPECT_EQ(x->users().size(), 2u);
  EXPECT_TRUE(hasUse(x, n, 0));
  EXPECT_TRUE(hasUse(x, n, 2));
  Node* s = g.addNode(OpKind::Split, "split", {x}, 2);
  EXPECT_EQ(s->output(1)->name(), "split_out1");
  EXPECT_EQ(s->output(1)->producerOutput(), 1);
}

// Provenance: a rewrite's dead cone ends up in the node that took over its uses; results replaced by a
// constant are folded; a node erased with no heir is elided; an heir erased in turn passes it all on.
TEST(Graph, ErasedNodesHandTheirOriginsToTheirHeir) {
  Graph g;
  GraphBuilder b(g);
  b.setFolding(false);
  Value* x = b.input("x", DType::F32, Shape{4});
  auto stamped = [&](const std::string& origin, Value* v) {
    v->producer()->addOrigins({origin});
    return v;
  };
  Value* neg = stamped("neg", b.op(OpKind::Neg, {x}));
  Value* abs = stamped("abs", b.op(OpKind::Abs, {neg}));
  Value* fused = stamped("new", b.op(OpKind::Relu, {x}));  // what a recogniser would build
  Value* out = stamped("exp", b.op(OpKind::Exp, {abs}));
  b.output(out);
  Value* dead = stamped("unused", b.op(OpKind::Sqrt, {x}));
  ASSERT_TRUE(b.status().isOk()) << b.status().message();

  g.replaceAllUsesWith(abs, fused);  // abs and, through it, neg die
  g.eraseNode(abs->producer());
  g.eraseNode(neg->producer());
  EXPECT_EQ(fused->producer()->origins(), (std::vector<std::string>{"new", "abs", "neg"}));
  g.eraseNode(dead->producer());
  EXPECT_EQ(g.provenance().elided, (std::vector<std::string>{"unused"}));

  // The heir itself replaced: its origins (its inherited ones too) go on to the next one.
  Value* again = stamped("again", b.op(OpKind::Sigmoid, {x}));
  g.replaceAllUsesWith(fused, again);
  g.eraseNode(fused->producer());
  EXPECT_EQ(again->producer()->origins(), (std::vector<std::string>{"again", "new", "abs", "neg"}));

  // Folded: the Exp's result replaced by a constant.
  Value* c = b.constant(Tensor(DType::F32, Shape{4}));
  g.replaceAllUsesWith(out, c);
  g.eraseNode(out->producer());
  EXPECT_EQ(g.provenance().folded, (std::vector<std::string>{"exp"}));
  // clone() keeps it all.
  std::unique_ptr<Graph> copy = g.clone();
  EXPECT_EQ(copy->provenance().folded, g.provenance().folded);
  EXPECT_EQ(copy->nodes()[0]->origins(), g.nodes()[0]->origins());
}

TEST(Graph, ReplaceAllUsesWithAndErase) {
  Graph g;
  GraphBuilder b(g);
  b.setFolding(false);
  Value* x = b.input("x", DType::F32, Shape{2, 3});
  Value* r = b.relu(x);
  Value* a = b.add(r, r);
  b.output(r);
  b.output(a);
  ASSERT_TRUE(b.status().isOk()) << b.status().message();
  Node* relu = r->producer();
  Node* add = a->producer();

  g.replaceAllUsesWith(r, x);  // drop the Relu
  EXPECT_TRUE(r->users().empty());
  EXPECT_EQ(add->input(0), x);
  EXPECT_EQ(add->input(1), x);
  EXPECT_TRUE(hasUse(x, add, 0) && hasUse(x, add, 1));
  EXPECT_EQ(g.outputs()[0], x);  // graph outputs follow
  EXPECT_FALSE(r->isGraphOutput());
  EXPECT_TRUE(x->isGraphOutput());
  size_t valuesBefore = g.values().size();
  g.eraseNode(relu);
  EXPECT_EQ(g.numNodes(), 1u);
  EXPECT_EQ(g.values().size(), valuesBefore - 1);  // its output died with it
  EXPECT_EQ(x->users().size(), 2u);                // the Relu's use of x is gone
  EXPECT_TRUE(verifyGraph(g).isOk()) << verifyGraph(g).message();
}

TEST(Graph, SetNodeInput) {
  Graph g;
  Value* x = g.addInput("x", DType::F32, Shape{2});
  Value* y = g.addInput("y", DType::F32, Shape{2});
  Node* n = g.addNode(OpKind::Add, "add", {x, x}, 1);
  g.setNodeInput(n, 1, y);
  EXPECT_EQ(x->users().size(), 1u);
  EXPECT_TRUE(hasUse(x, n, 0));
  EXPECT_TRUE(hasUse(y, n, 1));
  g.setNodeInput(n, 3, x);  // grows the input list with omitted inputs
  EXPECT_EQ(n->numInputs(), 4);
  EXPECT_EQ(n->input(2), nullptr);
  EXPECT_TRUE(hasUse(x, n, 3));
  g.setNodeInput(n, 3, nullptr);
  EXPECT_EQ(x->users().size(), 1u);
}

TEST(Graph, InsertBeforeAndSort) {
  Graph g;
  GraphBuilder b(g);
  b.setFolding(false);
  Value* x = b.input("x", DType::F32, Shape{4});
  Value* r1 = b.relu(x);
  Value* r2 = b.op(OpKind::Neg, {r1});
  b.output(r2);
  ASSERT_TRUE(b.status().isOk()) << b.status().message();
  // A node inserted before its input's producer breaks the order...
  Node* late = g.insertNodeBefore(r1->producer(), OpKind::Abs, "abs", {r2}, 1);
  ASSERT_TRUE(inferNode(*late).isOk());
  EXPECT_EQ(g.nodes().front(), late);
  Status v = verifyGraph(g);
  ASSERT_FALSE(v.isOk());
  EXPECT_EQ(v.message(),
            "node 'abs' (Abs): input 0 'Neg_out0' is used before it is defined (nodes out of topological order?)");
  // ...which sortTopologically repairs, keeping the other nodes in their order.
  ASSERT_TRUE(g.sortTopologically().isOk());
  std::vector<Node*> order = g.nodes();
  ASSERT_EQ(order.size(), 3u);
  EXPECT_EQ(order[0], r1->producer());
  EXPECT_EQ(order[1], r2->producer());
  EXPECT_EQ(order[2], late);
  EXPECT_TRUE(verifyGraph(g).isOk());
  // insertNodeBefore still works after the sort moved nodes.
  Node* mid = g.insertNodeBefore(r2->producer(), OpKind::Relu, "mid", {r1}, 1);
  EXPECT_EQ(g.nodes()[1], mid);
}

TEST(Graph, SortReportsCycle) {
  Graph g;
  GraphBuilder b(g);
  b.setFolding(false);
  Value* x = b.input("x", DType::F32, Shape{4});
  Value* a = b.op(OpKind::Relu, {x}, {}, "first");
  Value* c = b.op(OpKind::Neg, {a}, {}, "second");
  b.output(c);
  ASSERT_TRUE(b.status().isOk());
  g.setNodeInput(a->producer(), 0, c);  // first <- second <- first
  Status s = g.sortTopologically();
  ASSERT_FALSE(s.isOk());
  EXPECT_EQ(s.message(), "graph has a cycle through node 'first' (Relu)");
  EXPECT_FALSE(verifyGraph(g).isOk());
}

TEST(Graph, CloneIsDeepAndSharesConstants) {
  Graph g;
  GraphBuilder b(g);
  b.setFolding(false);
  Value* x = b.input("x", DType::F32, Shape{3});
  Value* w = b.constant(Tensor::fromFloats({1, 2, 3}, Shape{3}), "w");
  Value* y = b.add(x, w);
  b.output(y);
  ASSERT_TRUE(b.status().isOk());
  std::unique_ptr<Graph> c = g.clone();
  EXPECT_EQ(printGraph(*c), printGraph(g));
  EXPECT_TRUE(verifyGraph(*c).isOk()) << verifyGraph(*c).message();
  Value* cw = c->nodes()[0]->input(1);
  EXPECT_NE(cw, w);
  EXPECT_EQ(cw->constant().data(), w->constant().data());  // weights are shared, not copied
  EXPECT_EQ(c->outputs()[0]->producer(), c->nodes()[0]);
  // Independent: rewriting the clone leaves the original alone.
  c->replaceAllUsesWith(c->outputs()[0], c->inputs()[0]);
  c->eraseNode(c->nodes()[0]);
  EXPECT_EQ(c->numNodes(), 0u);
  EXPECT_EQ(g.numNodes(), 1u);
  EXPECT_EQ(g.outputs()[0], y);
  EXPECT_EQ(c->uniqueName("w"), "w_1");  // names carry over
}

TEST(Graph, RemoveDeadValues) {
  Graph g;
  Value* x = g.addInput("x", DType::F32, Shape{3});
  g.addConstant("unused", Tensor::fromFloats({1}, Shape{1}));
  Value* kept = g.addConstant("kept", Tensor::fromFloats({1}, Shape{1}));
  g.addOutput(kept);
  g.removeDeadValues();
  std::vector<Value*> vs = g.values();
  ASSERT_EQ(vs.size(), 2u);
  EXPECT_EQ(vs[0], x);  // unused graph inputs stay
  EXPECT_EQ(vs[1], kept);
}

}  // namespace
}  // namespace nnc
