// Common subexpression elimination: text in, text out. CSE only redirects uses; the duplicate
// node stays until DCE, which the expected texts show.
#include "tests/passes/pass_test_util.h"

namespace nnc::passes {
namespace {

using testing::expectRewrite;
using testing::expectUnchanged;

TEST(Cse, MergesIdenticalNodesAndTheirConsumers) {
  // After %b becomes %a, %nb becomes a duplicate of %na in the same walk.
  expectRewrite(eliminateCommonSubexpressions,
                "graph(%x: f32[2x3]) -> (%y: f32[2x3]) {\n"
                "  %a = Exp(%x) : f32[2x3]\n"
                "  %b = Exp(%x) : f32[2x3]\n"
                "  %na = Neg(%a) : f32[2x3]\n"
                "  %nb = Neg(%b) : f32[2x3]\n"
                "  %y = Add(%na, %nb) : f32[2x3]\n"
                "}\n",
                "graph(%x: f32[2x3]) -> (%y: f32[2x3]) {\n"
                "  %a = Exp(%x) : f32[2x3]\n"
                "  %b = Exp(%x) : f32[2x3]\n"
                "  %na = Neg(%a) : f32[2x3]\n"
                "  %nb = Neg(%a) : f32[2x3]\n"
                "  %y = Add(%na, %na) : f32[2x3]\n"
                "}\n");
}

TEST(Cse, EqualSmallConstantsCountAsTheSameInput) {
  expectRewrite(eliminateCommonSubexpressions,
                "graph(%x: f32[2]) -> (%y: f32[2]) {\n"
                "  %c1 = Constant() {value=[1, 2]} : f32[2]\n"
                "  %c2 = Constant() {value=[1, 2]} : f32[2]\n"
                "  %a = Add(%c1, %x) : f32[2]\n"
                "  %b = Add(%c2, %x) : f32[2]\n"
                "  %y = Mul(%a, %b) : f32[2]\n"
                "}\n",
                "graph(%x: f32[2]) -> (%y: f32[2]) {\n"
                "  %c1 = Constant() {value=[1, 2]} : f32[2]\n"
                "  %c2 = Constant() {value=[1, 2]} : f32[2]\n"
                "  %a = Add(%c1, %x) : f32[2]\n"
                "  %b = Add(%c2, %x) : f32[2]\n"
                "  %y = Mul(%a, %a) : f32[2]\n"
                "}\n");
}

TEST(Cse, MergesMultiOutputNodes) {
  expectRewrite(eliminateCommonSubexpressions,
                "graph(%x: f32[4]) -> (%y: f32[2], %z: f32[2]) {\n"
                "  %p, %q = Split(%x) {axis=0, split=[2, 2]} : f32[2], f32[2] @s1\n"
                "  %r, %s = Split(%x) {axis=0, split=[2, 2]} : f32[2], f32[2] @s2\n"
                "  %y = Sub(%p, %r) : f32[2]\n"
                "  %z = Sub(%s, %q) : f32[2]\n"
                "}\n",
                "graph(%x: f32[4]) -> (%y: f32[2], %z: f32[2]) {\n"
                "  %p, %q = Split(%x) {axis=0, split=[2, 2]} : f32[2], f32[2] @s1\n"
                "  %r, %s = Split(%x) {axis=0, split=[2, 2]} : f32[2], f32[2] @s2\n"
                "  %y = Sub(%p, %p) : f32[2]\n"
                "  %z = Sub(%q, %q) : f32[2]\n"
                "}\n");
}

TEST(Cse, DuplicateGraphOutputBecomesTheSurvivor) {
  // Both outputs now name %a; materializeOutputs gives the second its own copy later.
  expectRewrite(eliminateCommonSubexpressions,
                "graph(%x: f32[2]) -> (%a: f32[2], %b: f32[2]) {\n"
                "  %a = Tanh(%x) : f32[2]\n"
                "  %b = Tanh(%x) : f32[2]\n"
                "}\n",
                "graph(%x: f32[2]) -> (%a: f32[2], %a: f32[2]) {\n"
                "  %a = Tanh(%x) : f32[2]\n"
                "  %b = Tanh(%x) : f32[2]\n"
                "}\n");
}

TEST(Cse, SecondRunFindsNothing) {
  // The duplicate left behind by the first run is dead; merging it again would change nothing.
  expectUnchanged(eliminateCommonSubexpressions,
                  "graph(%x: f32[2]) -> (%y: f32[2]) {\n"
                  "  %a = Exp(%x) : f32[2]\n"
                  "  %b = Exp(%x) : f32[2]\n"
                  "  %y = Neg(%a) : f32[2]\n"
                  "}\n");
}

TEST(Cse, DifferentAttributesInputsOrConstantsAreKept) {
  expectUnchanged(eliminateCommonSubexpressions,
                  "graph(%x: f32[2], %z: f32[2]) -> (%y: f32[2]) {\n"
                  "  %c1 = Constant() {value=[1, 2]} : f32[2]\n"
                  "  %c2 = Constant() {value=[1, 3]} : f32[2]\n"
                  "  %a = LeakyRelu(%x) {alpha=0.1} : f32[2]\n"
                  "  %b = LeakyRelu(%x) {alpha=0.2} : f32[2]\n"
                  "  %e1 = Exp(%x) : f32[2]\n"
                  "  %e2 = Exp(%z) : f32[2]\n"
                  "  %m1 = Mul(%c1, %x) : f32[2]\n"
                  "  %m2 = Mul(%c2, %x) : f32[2]\n"
                  "  %s1 = Sub(%x, %z) : f32[2]\n"
                  "  %s2 = Sub(%z, %x) : f32[2]\n"
                  "  %y = Sum(%a, %b, %e1, %e2, %m1, %m2, %s1, %s2) : f32[2]\n"
                  "}\n");
}

}  // namespace
}  // namespace nnc::passes
