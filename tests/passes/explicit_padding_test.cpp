// explicit-padding (cpu) as text: which padded depthwise convs read a zero Pad of their input (the
// numerics are in tests/driver/strided_window_test.cpp and the conformance suite).
#include "targets/cpu/cpu_passes.h"
#include "tests/passes/pass_test_util.h"

namespace nnc::passes {
namespace {

// Runs the pass and reports whether it inserted a Pad.
bool padsInput(std::string_view text) {
  Expected<std::unique_ptr<Graph>> g = parseGraph(text);
  EXPECT_TRUE(g.isOk()) << g.status().message();
  if (!g) return false;
  Expected<bool> changed = explicitPadding(**g);
  EXPECT_TRUE(changed.isOk()) << changed.status().message();
  bool pad = false;
  for (const Node* n : (*g)->nodes()) pad |= n->op() == OpKind::Pad;
  EXPECT_EQ(pad, changed.isOk() && *changed);
  return pad;
}

TEST(ExplicitPadding, ShortRowsOfADepthwiseConvArePadded) {
  // 8-point output rows, stride 2: the border pieces would be most of each row.
  EXPECT_TRUE(
      padsInput("graph(%x: f32[1x4x16x16], %w: f32[4x1x3x3]) -> (%y: f32[1x4x8x8]) {\n"
                "  %y = Conv(%x, %w) {group=4, kernel_shape=[3, 3], pads=[1, 1, 1, 1], strides=[2, 2]} : f32[1x4x8x8]\n"
                "}\n"));
}

TEST(ExplicitPadding, LongUnitStrideRowsArePadded) {
  EXPECT_TRUE(padsInput(
      "graph(%x: f32[1x4x40x40], %w: f32[4x1x3x3]) -> (%y: f32[1x4x40x40]) {\n"
      "  %y = Conv(%x, %w) {group=4, kernel_shape=[3, 3], pads=[1, 1, 1, 1], strides=[1, 1]} : f32[1x4x40x40]\n"
      "}\n"));
}

TEST(ExplicitPadding, LongStridedRowsKeepTheImplicitPadding) {
  // 40-point rows, stride 2: the partitioned interior vectorises; a copy of the input costs more.
  EXPECT_FALSE(padsInput(
      "graph(%x: f32[1x4x80x80], %w: f32[4x1x3x3]) -> (%y: f32[1x4x40x40]) {\n"
      "  %y = Conv(%x, %w) {group=4, kernel_shape=[3, 3], pads=[1, 1, 1, 1], strides=[2, 2]} : f32[1x4x40x40]\n"
      "}\n"));
}

}  // namespace
}  // namespace nnc::passes
