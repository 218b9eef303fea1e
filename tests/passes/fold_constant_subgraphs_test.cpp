// fold-constant-subgraphs: text in, text out, with the reference evaluator (ir/reference.h) standing in
// for the host compile the driver gives the pass (tests/driver/constant_subgraph_test.cpp runs that one).
// Expected constant values are computed by hand.
#include "ir/reference.h"
#include "tests/passes/pass_test_util.h"

namespace nnc::passes {
namespace {

using testing::expectRewrite;
using testing::expectUnchanged;

Expected<std::vector<Tensor>> interpret(Graph& graph) { return evaluateGraph(graph, {}); }
Expected<std::vector<Tensor>> failToCompile(Graph&) { return Status::error("no host compiler here"); }

Expected<bool> foldInterpreted(Graph& graph) { return foldConstantSubgraphs(graph, interpret); }

TEST(FoldConstantSubgraphs, ComputesTheConeAndKeepsOnlyWhatIsReadOutsideIt) {
  // p = e . w + b, whatever the work; e's normalisation (the intermediate) is not kept.
  // e = [[1, 2], [3, 4]] * 2 = [[2, 4], [6, 8]]; e . [[1, 0], [1, 1]] = [[6, 4], [14, 8]]; + [1, -1].
  expectRewrite(foldInterpreted,
                "graph(%x: f32[2x2]) -> (%y: f32[2x2]) {\n"
                "  %t = Constant() {value=[1, 2, 3, 4]} : f32[2x2]\n"
                "  %two = Constant() {value=[2]} : f32[1]\n"
                "  %w = Constant() {value=[1, 0, 1, 1]} : f32[2x2]\n"
                "  %b = Constant() {value=[1, -1]} : f32[2]\n"
                "  %e = Mul(%t, %two) : f32[2x2]\n"
                "  %m = MatMul(%e, %w) : f32[2x2]\n"
                "  %p = Add(%m, %b) : f32[2x2]\n"
                "  %y = MatMul(%x, %p) : f32[2x2]\n"
                "}\n",
                "graph(%x: f32[2x2]) -> (%y: f32[2x2]) {\n"
                "  %p_1 = Constant() {value=[7, 3, 15, 7]} : f32[2x2]\n"
                "  %y = MatMul(%x, %p_1) : f32[2x2]\n"
                "}\n");
}

TEST(FoldConstantSubgraphs, StopsBeforeAResultLargerThanWhatItIsComputedFrom) {
  // The Expand would quadruple what it reads: the cone's result is the Add before it.
  expectRewrite(foldInterpreted,
                "graph(%x: f32[4x2]) -> (%y: f32[4x2]) {\n"
                "  %c = Constant() {value=[1, 2]} : f32[2]\n"
                "  %d = Constant() {value=[3, 4]} : f32[2]\n"
                "  %s = Add(%c, %d) : f32[2]\n"
                "  %e = Expand(%s) {shape=[4, 2]} : f32[4x2]\n"
                "  %y = Add(%x, %e) : f32[4x2]\n"
                "}\n",
                "graph(%x: f32[4x2]) -> (%y: f32[4x2]) {\n"
                "  %s_1 = Constant() {value=[4, 6]} : f32[2]\n"
                "  %e = Expand(%s_1) {shape=[4, 2]} : f32[4x2]\n"
                "  %y = Add(%x, %e) : f32[4x2]\n"
                "}\n");
}

TEST(FoldConstantSubgraphs, KeepsAResultReadBothInsideAndOutsideTheCone) {
  expectRewrite(foldInterpreted,
                "graph(%x: f32[2]) -> (%y: f32[2], %z: f32[2]) {\n"
                "  %c = Constant() {value=[1, -2]} : f32[2]\n"
                "  %r = Relu(%c) : f32[2]\n"
                "  %s = Add(%r, %r) : f32[2]\n"
                "  %y = Mul(%x, %r) : f32[2]\n"
                "  %z = Mul(%x, %s) : f32[2]\n"
                "}\n",
                "graph(%x: f32[2]) -> (%y: f32[2], %z: f32[2]) {\n"
                "  %r_1 = Constant() {value=[1, 0]} : f32[2]\n"
                "  %s_1 = Constant() {value=[2, 0]} : f32[2]\n"
                "  %y = Mul(%x, %r_1) : f32[2]\n"
                "  %z = Mul(%x, %s_1) : f32[2]\n"
                "}\n");
}

TEST(FoldConstantSubgraphs, AConstantGraphOutputBecomesAConstant) {
  expectRewrite(foldInterpreted,
                "graph() -> (%y: f32[2]) {\n"
                "  %c = Constant() {value=[4, 9]} : f32[2]\n"
                "  %y = Sqrt(%c) : f32[2]\n"
                "}\n",
                "graph() -> (%y_1: f32[2]) {\n"
                "  %y_1 = Constant() {value=[2, 3]} : f32[2]\n"
                "}\n");
}

TEST(FoldConstantSubgraphs, LeavesTheGraphAsItWasWhenTheConeCannotBeComputed) {
  expectUnchanged([](Graph& graph) { return foldConstantSubgraphs(graph, failToCompile); },
                  "graph(%x: f32[2]) -> (%y: f32[2]) {\n"
                  "  %c = Constant() {value=[4, 9]} : f32[2]\n"
                  "  %s = Sqrt(%c) : f32[2]\n"
                  "  %y = Add(%x, %s) : f32[2]\n"
                  "}\n");
}

// A model file is untrusted: a cone is bounded in work and in bytes. The evaluator stands guard: it
// fails the test, without computing anything, if it is handed the node past the bound.
Expected<std::vector<Tensor>> refuse(OpKind op, Graph& graph) {
  for (const Node* n : graph.nodes())
    if (n->op() == op) {
      ADD_FAILURE() << "the cone holds " << n->name() << ", past the bound";
      return Status::error("past the bound");
    }
  return interpret(graph);
}

TEST(FoldConstantSubgraphs, LeavesAConeTooCostlyToCompute) {
  // 2^9 x 2^13 x 2^14 = 2^36 multiply-adds, past kMaxConeWork, for a scalar.
  expectUnchanged(
      [](Graph& graph) { return foldConstantSubgraphs(graph, [](Graph& g) { return refuse(OpKind::MatMul, g); }); },
      "graph(%x: f32[]) -> (%y: f32[]) {\n"
      "  %c = Constant() {value=[1]} : f32[1]\n"
      "  %a = Expand(%c) {shape=[512, 8192]} : f32[512x8192]\n"
      "  %b = Expand(%c) {shape=[8192, 16384]} : f32[8192x16384]\n"
      "  %m = MatMul(%a, %b) : f32[512x16384]\n"
      "  %s = ReduceSum(%m) {keepdims=0, noop_with_empty_axes=0} : f32[]\n"
      "  %y = Add(%x, %s) : f32[]\n"
      "}\n");
}

TEST(FoldConstantSubgraphs, LeavesAConeTooLargeToHold) {
  // A 16 GiB intermediate, past kMaxConeBytes, for a scalar.
  expectUnchanged(
      [](Graph& graph) { return foldConstantSubgraphs(graph, [](Graph& g) { return refuse(OpKind::Expand, g); }); },
      "graph(%x: f32[]) -> (%y: f32[]) {\n"
      "  %c = Constant() {value=[1]} : f32[1]\n"
      "  %e = Expand(%c) {shape=[65536, 65536]} : f32[65536x65536]\n"
      "  %s = ReduceSum(%e) {keepdims=0, noop_with_empty_axes=0} : f32[]\n"
      "  %y = Add(%x, %s) : f32[]\n"
      "}\n");
}

TEST(FoldConstantSubgraphs, LeavesAGraphWithoutConstantWork) {
  expectUnchanged(foldInterpreted,
                  "graph(%x: f32[2]) -> (%y: f32[2]) {\n"
                  "  %c = Constant() {value=[4, 9]} : f32[2]\n"
                  "  %y = Add(%x, %c) : f32[2]\n"
                  "}\n");
}

}  // namespace
}  // namespace nnc::passes
