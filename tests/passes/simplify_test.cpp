// simplify: text in, text out. Like CSE, simplify only redirects uses; replaced nodes stay until
// DCE, which the expected texts show.
#include "tests/passes/pass_test_util.h"

namespace nnc::passes {
namespace {

using testing::expectRewrite;
using testing::expectUnchanged;
using testing::runPassOnText;

TEST(Simplify, RemovesIdentityNoOpCastAndSameShapeReshape) {
  expectRewrite(simplify,
                "graph(%x: f32[2x3]) -> (%y: f32[2x3]) {\n"
                "  %i = Identity(%x) : f32[2x3]\n"
                "  %c = Cast(%i) {round_mode=\"up\", saturate=1, to=1} : f32[2x3]\n"
                "  %r = Reshape(%c) {allowzero=0, shape=[2, 3]} : f32[2x3]\n"
                "  %y = Exp(%r) : f32[2x3]\n"
                "}\n",
                "graph(%x: f32[2x3]) -> (%y: f32[2x3]) {\n"
                "  %i = Identity(%x) : f32[2x3]\n"
                "  %c = Cast(%x) {round_mode=\"up\", saturate=1, to=1} : f32[2x3]\n"
                "  %r = Reshape(%x) {allowzero=0, shape=[2, 3]} : f32[2x3]\n"
                "  %y = Exp(%x) : f32[2x3]\n"
                "}\n");
}

TEST(Simplify, KeepsARealCast) {
  expectUnchanged(simplify,
                  "graph(%x: f32[2]) -> (%y: i32[2]) {\n"
                  "  %y = Cast(%x) {round_mode=\"up\", saturate=1, to=6} : i32[2]\n"
                  "}\n");
}

TEST(Simplify, MergesReshapeChains) {
  expectRewrite(simplify,
                "graph(%x: f32[2x3x4]) -> (%y: f32[4x6]) {\n"
                "  %a = Reshape(%x) {allowzero=0, shape=[6, 4]} : f32[6x4]\n"
                "  %b = Reshape(%a) {allowzero=0, shape=[24]} : f32[24]\n"
                "  %y = Reshape(%b) {allowzero=0, shape=[4, -1]} : f32[4x6]\n"
                "}\n",
                "graph(%x: f32[2x3x4]) -> (%y: f32[4x6]) {\n"
                "  %a = Reshape(%x) {allowzero=0, shape=[6, 4]} : f32[6x4]\n"
                "  %b = Reshape(%x) {allowzero=0, shape=[24]} : f32[24]\n"
                "  %y = Reshape(%x) {allowzero=0, shape=[4, 6]} : f32[4x6]\n"
                "}\n");
}

TEST(Simplify, MergesReshapeChainsOfEmptyTensors) {
  // The merged shape [0, 3, 2] has a 0 that is a size, not "copy the input's dim": the rewrite must
  // keep allowzero=1 or inference copies x's dim 0 (2) and fails.
  expectRewrite(simplify,
                "graph(%x: f32[2x0x3]) -> (%y: f32[0x3x2]) {\n"
                "  %a = Reshape(%x) {allowzero=1, shape=[0, 6]} : f32[0x6]\n"
                "  %y = Reshape(%a) {allowzero=1, shape=[0, 3, 2]} : f32[0x3x2]\n"
                "}\n",
                "graph(%x: f32[2x0x3]) -> (%y: f32[0x3x2]) {\n"
                "  %a = Reshape(%x) {allowzero=1, shape=[0, 6]} : f32[0x6]\n"
                "  %y = Reshape(%x) {allowzero=1, shape=[0, 3, 2]} : f32[0x3x2]\n"
                "}\n");
}

TEST(Simplify, ComposesTransposeChains) {
  // y[i] dims = a[q[i]] dims = x[p[q[i]]] dims: p = [1, 2, 0], q = [1, 2, 0] -> [2, 0, 1].
  expectRewrite(simplify,
                "graph(%x: f32[2x3x4]) -> (%y: f32[4x2x3]) {\n"
                "  %a = Transpose(%x) {perm=[1, 2, 0]} : f32[3x4x2]\n"
                "  %y = Transpose(%a) {perm=[1, 2, 0]} : f32[4x2x3]\n"
                "}\n",
                "graph(%x: f32[2x3x4]) -> (%y: f32[4x2x3]) {\n"
                "  %a = Transpose(%x) {perm=[1, 2, 0]} : f32[3x4x2]\n"
                "  %y = Transpose(%x) {perm=[2, 0, 1]} : f32[4x2x3]\n"
                "}\n");
}

TEST(Simplify, TransposeWithoutPermReversesDims) {
  // The inner Transpose has no perm: ONNX's default [2, 1, 0]. Composed with [1, 0, 2]:
  // [p[1], p[0], p[2]] = [1, 2, 0].
  expectRewrite(simplify,
                "graph(%x: f32[2x3x4]) -> (%y: f32[3x4x2]) {\n"
                "  %a = Transpose(%x) : f32[4x3x2]\n"
                "  %y = Transpose(%a) {perm=[1, 0, 2]} : f32[3x4x2]\n"
                "}\n",
                "graph(%x: f32[2x3x4]) -> (%y: f32[3x4x2]) {\n"
                "  %a = Transpose(%x) : f32[4x3x2]\n"
                "  %y = Transpose(%x) {perm=[1, 2, 0]} : f32[3x4x2]\n"
                "}\n");
}

TEST(Simplify, TransposeChainComposingToIdentityDisappears) {
  // Two default (reversing) transposes cancel: one call of the pass merges them into an identity
  // transpose and bypasses it.
  expectRewrite(simplify,
                "graph(%x: f32[2x3x4]) -> (%y: f32[2x3x4]) {\n"
                "  %a = Transpose(%x) : f32[4x3x2]\n"
                "  %b = Transpose(%a) : f32[2x3x4]\n"
                "  %y = Neg(%b) : f32[2x3x4]\n"
                "}\n",
                "graph(%x: f32[2x3x4]) -> (%y: f32[2x3x4]) {\n"
                "  %a = Transpose(%x) : f32[4x3x2]\n"
                "  %b = Transpose(%x) {perm=[0, 1, 2]} : f32[2x3x4]\n"
                "  %y = Neg(%x) : f32[2x3x4]\n"
                "}\n");
}

TEST(Simplify, IdentityPermutationIsRemoved) {
  expectRewrite(simplify,
                "graph(%x: f32[2x3]) -> (%y: f32[2x3]) {\n"
                "  %t = Transpose(%x) {perm=[0, 1]} : f32[2x3]\n"
                "  %y = Relu(%t) : f32[2x3]\n"
                "}\n",
                "graph(%x: f32[2x3]) -> (%y: f32[2x3]) {\n"
                "  %t = Transpose(%x) {perm=[0, 1]} : f32[2x3]\n"
                "  %y = Relu(%x) : f32[2x3]\n"
                "}\n");
}

TEST(Simplify, OutputIdentityOfIntermediateIsRemoved) {
  // The graph output moves to the Identity's input, which is computed (so still writable).
  expectRewrite(simplify,
                "graph(%x: f32[2]) -> (%y: f32[2]) {\n"
                "  %e = Exp(%x) : f32[2]\n"
                "  %y = Identity(%e) : f32[2]\n"
                "}\n",
                "graph(%x: f32[2]) -> (%e: f32[2]) {\n"
                "  %e = Exp(%x) : f32[2]\n"
                "  %y = Identity(%e) : f32[2]\n"
                "}\n");
}

TEST(Simplify, OutputCopiesOfInputsConstantsAndOtherOutputsStay) {
  expectUnchanged(simplify,
                  "graph(%x: f32[2]) -> (%a: f32[2], %b: f32[2], %e: f32[2], %d: f32[2]) {\n"
                  "  %c = Constant() {value=[1, 2]} : f32[2]\n"
                  "  %a = Identity(%x) : f32[2]\n"
                  "  %b = Identity(%c) : f32[2]\n"
                  "  %e = Exp(%x) : f32[2]\n"
                  "  %d = Identity(%e) : f32[2]\n"
                  "}\n");
}

TEST(Simplify, NothingToSimplify) {
  expectUnchanged(simplify,
                  "graph(%x: f32[2x3]) -> (%y: f32[3x2]) {\n"
                  "  %t = Transpose(%x) : f32[3x2]\n"
                  "  %r = Reshape(%t) {allowzero=0, shape=[6]} : f32[6]\n"
                  "  %e = Exp(%r) : f32[6]\n"
                  "  %y = Reshape(%e) {allowzero=0, shape=[3, 2]} : f32[3x2]\n"
                  "}\n");
}

TEST(Simplify, RunToFixpointLeavesNoSimplifiableNode) {
  // A second call finds only dead nodes (left to DCE), so it must report no change — otherwise the
  // pipeline's run-to-fixpoint loop never settles.
  testing::PassResult first = runPassOnText(simplify,
                                            "graph(%x: f32[2x3x4]) -> (%y: f32[2x3x4]) {\n"
                                            "  %a = Transpose(%x) {perm=[1, 2, 0]} : f32[3x4x2]\n"
                                            "  %b = Transpose(%a) {perm=[1, 2, 0]} : f32[4x2x3]\n"
                                            "  %c = Transpose(%b) {perm=[1, 2, 0]} : f32[2x3x4]\n"
                                            "  %y = Neg(%c) : f32[2x3x4]\n"
                                            "}\n");
  ASSERT_TRUE(first.ok) << first.text;
  // p^3 = identity for a 3-cycle: %b composes to [2, 0, 1], then %c to the identity.
  EXPECT_NE(first.text.find("%y = Neg(%x)"), std::string::npos) << first.text;
  expectUnchanged(simplify, first.text);
}

TEST(Simplify, DeadNoOpsAreLeftToDce) {
  expectUnchanged(simplify,
                  "graph(%x: f32[2]) -> (%y: f32[2]) {\n"
                  "  %i = Identity(%x) : f32[2]\n"
                  "  %y = Exp(%x) : f32[2]\n"
                  "}\n");
}

}  // namespace
}  // namespace nnc::passes
