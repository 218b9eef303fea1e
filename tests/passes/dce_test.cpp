// Dead code elimination: text in, text out.
#include "tests/passes/pass_test_util.h"

namespace nnc::passes {
namespace {

using testing::expectRewrite;
using testing::expectUnchanged;

TEST(DeadCode, RemovesUnusedChainAndItsConstants) {
  // %b is unused, which makes %a unused; %c is read only by dead nodes and goes too.
  expectRewrite(eliminateDeadCode,
                "graph(%x: f32[2x3]) -> (%y: f32[2x3]) {\n"
                "  %c = Constant() {value=[1, 2, 3]} : f32[3]\n"
                "  %a = Add(%x, %c) : f32[2x3]\n"
                "  %b = Neg(%a) : f32[2x3]\n"
                "  %y = Relu(%x) : f32[2x3]\n"
                "}\n",
                "graph(%x: f32[2x3]) -> (%y: f32[2x3]) {\n"
                "  %y = Relu(%x) : f32[2x3]\n"
                "}\n");
}

TEST(DeadCode, KeepsMultiOutputNodeWithOneUsedOutput) {
  // Split's second result is unused but its first is live: the node stays. The dead Exp goes.
  expectRewrite(eliminateDeadCode,
                "graph(%x: f32[4]) -> (%y: f32[2]) {\n"
                "  %p, %q = Split(%x) {axis=0, split=[2, 2]} : f32[2], f32[2] @sp\n"
                "  %e = Exp(%q) : f32[2]\n"
                "  %y = Relu(%p) : f32[2]\n"
                "}\n",
                "graph(%x: f32[4]) -> (%y: f32[2]) {\n"
                "  %p, %q = Split(%x) {axis=0, split=[2, 2]} : f32[2], f32[2] @sp\n"
                "  %y = Relu(%p) : f32[2]\n"
                "}\n");
}

TEST(DeadCode, KeepsNodesThatFeedOnlyOtherGraphOutputs) {
  // %a has no users but is a graph output; %b feeds nothing but an output.
  expectUnchanged(eliminateDeadCode,
                  "graph(%x: f32[2]) -> (%a: f32[2], %b: f32[2]) {\n"
                  "  %a = Exp(%x) : f32[2]\n"
                  "  %b = Neg(%a) : f32[2]\n"
                  "}\n");
}

TEST(DeadCode, NothingToRemove) {
  expectUnchanged(eliminateDeadCode,
                  "graph(%x: f32[2x3]) -> (%y: f32[2x3]) {\n"
                  "  %w = Constant() {value=[1, 2, 3]} : f32[3]\n"
                  "  %a = Mul(%x, %w) : f32[2x3]\n"
                  "  %y = Sigmoid(%a) : f32[2x3]\n"
                  "}\n");
}

TEST(DeadCode, EverythingDeadWhenOutputIsAnInput) {
  expectRewrite(eliminateDeadCode,
                "graph(%x: f32[2]) -> (%x: f32[2]) {\n"
                "  %a = Exp(%x) : f32[2]\n"
                "  %b = Log(%a) : f32[2]\n"
                "}\n",
                "graph(%x: f32[2]) -> (%x: f32[2]) {\n"
                "}\n");
}

}  // namespace
}  // namespace nnc::passes
