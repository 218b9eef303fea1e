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

// A Linear's weights read through a Transpose (Gemm transB, MatMul(x, W^T)): folded natively past the
// size limit when nothing else reads them (the copy replaces them); values checked element by element,
// 3-D with a permutation that moves every dim. Shared by two readers, the Transpose stays.
TEST(FoldConstants, FoldsALargeTransposeOfWeightsNothingElseReads) {
  Graph g;
  GraphBuilder b(g);
  b.setFolding(false);
  const Shape in{33, 2048, 65};  // 4.4M elements, above the 4M limit
  Tensor w(DType::F32, in);
  for (int64_t i = 0; i < w.numel(); ++i) w.setDouble(i, static_cast<double>(i % 1000003));
  Attributes perm;
  perm.set("perm", std::vector<int64_t>{2, 0, 1});
  Value* x = b.input("x", DType::F32, Shape{65, 33, 2048});
  b.output(b.add(x, b.op(OpKind::Transpose, {b.constant(w, "w")}, perm)));
  Value* shared = b.constant(Tensor(DType::F32, in), "shared");
  b.output(b.add(b.op(OpKind::Transpose, {shared}, perm), b.op(OpKind::Transpose, {shared}, perm)));
  ASSERT_TRUE(b.status().isOk()) << b.status().message();
  Expected<bool> changed = foldConstants(g);
  ASSERT_TRUE(changed.isOk()) << changed.status().message();
  EXPECT_TRUE(*changed);
  int transposes = 0;
  const Value* folded = nullptr;
  for (const Node* n : g.nodes()) {
    transposes += n->op() == OpKind::Transpose;
    if (n->op() == OpKind::Add && n->input(0) == x) folded = n->input(1);
  }
  EXPECT_EQ(transposes, 2) << "the shared constant's transposes stay";
  ASSERT_TRUE(folded && folded->isConstant());
  ASSERT_EQ(folded->shape(), (Shape{65, 33, 2048}));
  const Tensor& t = folded->constant();
  for (int64_t a = 0; a < 65; a += 7)
    for (int64_t c = 0; c < 33; c += 5)
      for (int64_t k = 0; k < 2048; k += 97)
        ASSERT_EQ(t.getDouble((a * 33 + c) * 2048 + k), w.getDouble((c * 2048 + k) * 65 + a))
            << a << " " << c << " " << k;
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
