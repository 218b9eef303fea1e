// Constant folding: text in, text out. Expected constant values are computed by hand.
#include "ir/builder.h"
#include "tests/passes/pass_test_util.h"

namespace nnc::passes {
namespace {

using testing::expectRewrite;
using testing::expectUnchanged;

TEST(FoldConstants, FoldsAChainInOneWalk) {
  // s = [1+3, 2+4] = [4, 6]; t = s * s = [16, 36]. The inputs of folded nodes become dead and are
  // dropped; the folded constants take fresh names.
  expectRewrite(foldConstants,
                "graph(%x: f32[2]) -> (%y: f32[2]) {\n"
                "  %c = Constant() {value=[1, 2]} : f32[2]\n"
                "  %d = Constant() {value=[3, 4]} : f32[2]\n"
                "  %s = Add(%c, %d) : f32[2]\n"
                "  %t = Mul(%s, %s) : f32[2]\n"
                "  %y = Mul(%x, %t) : f32[2]\n"
                "}\n",
                "graph(%x: f32[2]) -> (%y: f32[2]) {\n"
                "  %t_1 = Constant() {value=[16, 36]} : f32[2]\n"
                "  %y = Mul(%x, %t_1) : f32[2]\n"
                "}\n");
}

TEST(FoldConstants, ShapeOfAnInputIsKnownWithoutItsData) {
  expectRewrite(foldConstants,
                "graph(%x: f32[2x5x3], %z: i64[3]) -> (%y: i64[3]) {\n"
                "  %s = Shape(%x) {start=0} : i64[3]\n"
                "  %y = Add(%s, %z) : i64[3]\n"
                "}\n",
                "graph(%x: f32[2x5x3], %z: i64[3]) -> (%y: i64[3]) {\n"
                "  %s_1 = Constant() {value=[2, 5, 3]} : i64[3]\n"
                "  %y = Add(%s_1, %z) : i64[3]\n"
                "}\n");
}

TEST(FoldConstants, FoldedGraphOutputBecomesAConstant) {
  expectRewrite(foldConstants,
                "graph() -> (%y: f32[3]) {\n"
                "  %c = Constant() {value=[-1, 0, 2]} : f32[3]\n"
                "  %y = Relu(%c) : f32[3]\n"
                "}\n",
                "graph() -> (%y_1: f32[3]) {\n"
                "  %y_1 = Constant() {value=[0, 0, 2]} : f32[3]\n"
                "}\n");
}

TEST(FoldConstants, LeavesResultsAboveTheSizeLimit) {
  // 2048 x 4096 = 8M elements, above the 4M-element limit: folding would bloat the weights.
  expectUnchanged(foldConstants,
                  "graph(%x: f32[2048x4096]) -> (%y: f32[2048x4096]) {\n"
                  "  %c = Constant() {value=[1.5]} : f32[1]\n"
                  "  %e = Expand(%c) {shape=[2048, 4096]} : f32[2048x4096]\n"
                  "  %y = Add(%x, %e) : f32[2048x4096]\n"
                  "}\n");
}

TEST(FoldConstants, LeavesNodesTooCostlyToInterpret) {
  // MatMul of two constant f32[512x512]: 2^18 outputs x 512 products = 2^27 loop points, above
  // kMaxFoldWork (2^22): the interpreter would take minutes, compiled code milliseconds. The
  // 8x8 one (2^9 points) folds.
  Graph g;
  GraphBuilder b(g);
  b.setFolding(false);
  Value* big = b.constant(Tensor(DType::F32, Shape{512, 512}));
  Value* small = b.constant(Tensor(DType::F32, Shape{8, 8}));
  b.output(b.op(OpKind::MatMul, {big, big}, {}, "big"));
  b.output(b.op(OpKind::MatMul, {small, small}, {}, "small"));
  ASSERT_TRUE(b.status().isOk()) << b.status().message();
  Expected<bool> changed = foldConstants(g);
  ASSERT_TRUE(changed.isOk()) << changed.status().message();
  EXPECT_TRUE(*changed);
  ASSERT_EQ(g.numNodes(), 1u);
  EXPECT_EQ(g.nodes().front()->name(), "big");
}

TEST(FoldConstants, NothingConstant) {
  expectUnchanged(foldConstants,
                  "graph(%x: f32[2]) -> (%y: f32[2]) {\n"
                  "  %c = Constant() {value=[1, 2]} : f32[2]\n"
                  "  %a = Add(%x, %c) : f32[2]\n"
                  "  %y = Exp(%a) : f32[2]\n"
                  "}\n");
}

TEST(FoldConstants, FoldsAGraphWithNoInputs) {
  // sqrt([4, 9]) = [2, 3].
  expectRewrite(foldConstants,
                "graph() -> (%y: f32[2]) {\n"
                "  %c = Constant() {value=[4, 9]} : f32[2]\n"
                "  %y = Sqrt(%c) : f32[2]\n"
                "}\n",
                "graph() -> (%y_1: f32[2]) {\n"
                "  %y_1 = Constant() {value=[2, 3]} : f32[2]\n"
                "}\n");
}

}  // namespace
}  // namespace nnc::passes
