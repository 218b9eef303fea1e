// channels-last (cpu) as text: which Conv chains it converts, the rewrite of each Conv, the transposes
// sunk through the ops between them; and, through the -O2 pipeline, that only a chain's edges keep a
// transpose. The numerics are in tests/driver/channels_last_numerics_test.cpp.
#include "ir/parser.h"
#include "passes/pipeline.h"
#include "targets/cpu/cpu_passes.h"
#include "tests/passes/pass_test_util.h"

namespace nnc::passes {
namespace {

using testing::expectRewrite;
using testing::expectUnchanged;
using testing::PassResult;

TEST(ChannelsLast, ConvertsAPointwiseDepthwiseChainAndSinksTheTransposes) {
  // The Relu now runs on the pointwise Conv's channels-last result; its to-NCHW transpose meets the
  // depthwise Conv's to-NHWC one (simplify cancels the pair; DCE drops the Conv's unused one).
  expectRewrite(
      channelsLast,
      "graph(%x: f32[1x8x4x4], %w1: f32[16x8x1x1], %wd: f32[16x1x3x3], %bd: f32[16]) -> (%y: f32[1x16x4x4]) {\n"
      "  %a = Conv(%x, %w1) {auto_pad=\"NOTSET\", group=1} : f32[1x16x4x4]\n"
      "  %r = Relu(%a) : f32[1x16x4x4]\n"
      "  %y = Conv(%r, %wd, %bd) {auto_pad=\"NOTSET\", group=16, pads=[1, 1, 1, 1]} : f32[1x16x4x4]\n"
      "}\n",
      "graph(%x: f32[1x8x4x4], %w1: f32[16x8x1x1], %wd: f32[16x1x3x3], %bd: f32[16]) -> (%y_nchw_out0: "
      "f32[1x16x4x4]) {\n"
      "  %a_nhwc_out0 = Transpose(%x) {perm=[0, 2, 3, 1]} : f32[1x4x4x8]\n"
      "  %a_rows_out0 = Reshape(%a_nhwc_out0) {allowzero=0, shape=[16, 8]} : f32[16x8]\n"
      "  %a_weights_out0 = Reshape(%w1) {allowzero=0, shape=[16, 8]} : f32[16x8]\n"
      "  %a_weights_t_out0 = Transpose(%a_weights_out0) {perm=[1, 0]} : f32[8x16]\n"
      "  %a_gemm_out0 = MatMul(%a_rows_out0, %a_weights_t_out0) : f32[16x16]\n"
      "  %a_out_out0 = Reshape(%a_gemm_out0) {allowzero=0, shape=[1, 4, 4, 16]} : f32[1x4x4x16]\n"
      "  %a_nchw_out0 = Transpose(%a_out_out0) {perm=[0, 3, 1, 2]} : f32[1x16x4x4]\n"
      "  %r_1_out0 = Relu(%a_out_out0) : f32[1x4x4x16]\n"
      "  %r_nchw_out0 = Transpose(%r_1_out0) {perm=[0, 3, 1, 2]} : f32[1x16x4x4]\n"
      "  %y_nhwc_out0 = Transpose(%r_nchw_out0) {perm=[0, 2, 3, 1]} : f32[1x4x4x16]\n"
      "  %y_weights_out0 = Reshape(%wd) {allowzero=0, shape=[16, 3, 3]} : f32[16x3x3]\n"
      "  %y_weights_nhwc_out0 = Transpose(%y_weights_out0) {perm=[1, 2, 0]} : f32[3x3x16]\n"
      "  %y_depthwise_out0 = DepthwiseConvNhwc(%y_nhwc_out0, %y_weights_nhwc_out0, %bd) {auto_pad=\"NOTSET\", "
      "pads=[1, 1, 1, 1]} : f32[1x4x4x16]\n"
      "  %y_nchw_out0 = Transpose(%y_depthwise_out0) {perm=[0, 3, 1, 2]} : f32[1x16x4x4]\n"
      "}\n");
}

TEST(ChannelsLast, ConvertsAStemAsTheChainsHeadThroughPatchRows) {
  PassResult r = testing::runPassOnText(
      channelsLast,
      "graph(%x: f32[1x3x8x8], %ws: f32[8x3x3x3], %wd: f32[8x1x3x3]) -> (%y: f32[1x8x4x4]) {\n"
      "  %a = Conv(%x, %ws) {auto_pad=\"NOTSET\", group=1, pads=[1, 1, 1, 1], strides=[2, 2]} : f32[1x8x4x4]\n"
      "  %y = Conv(%a, %wd) {auto_pad=\"NOTSET\", group=8, pads=[1, 1, 1, 1]} : f32[1x8x4x4]\n"
      "}\n");
  ASSERT_TRUE(r.ok && r.changed) << r.text;
  EXPECT_NE(r.text.find("Im2Col(%x) {auto_pad=\"NOTSET\", kernel_shape=[3, 3], pads=[1, 1, 1, 1], patch_rows=1, "
                        "strides=[2, 2]} : f32[1x16x27]"),
            std::string::npos)
      << r.text;
  EXPECT_EQ(r.text.find("Transpose(%x)"), std::string::npos) << "the head reads its channel-first input\n" << r.text;
}

TEST(ChannelsLast, SinksThroughResidualAddsConstantsSmallTensorsAndConcat) {
  PassResult r = testing::runPassOnText(
      channelsLast,
      "graph(%x: f32[1x8x4x4], %s: f32[1x8x1x1], %w1: f32[8x8x1x1], %wd: f32[8x1x3x3], %c: f32[8x1x1]) -> (%y: "
      "f32[1x16x4x4]) {\n"
      "  %a = Conv(%x, %w1) {auto_pad=\"NOTSET\", group=1} : f32[1x8x4x4]\n"
      "  %b = Add(%a, %c) : f32[1x8x4x4]\n"
      "  %d = Conv(%b, %wd) {auto_pad=\"NOTSET\", group=8, pads=[1, 1, 1, 1]} : f32[1x8x4x4]\n"
      "  %e = Mul(%d, %s) : f32[1x8x4x4]\n"
      "  %f = Add(%e, %a) : f32[1x8x4x4]\n"
      "  %y = Concat(%f, %a) {axis=1} : f32[1x16x4x4]\n"
      "}\n");
  ASSERT_TRUE(r.ok && r.changed) << r.text;
  // The constant bias and the small scale are transposed to match; the residual Add and the Concat
  // (on the channel axis, now the last) run channels-last.
  for (const char* expected :
       {"Add(%a_out_out0, %c_nhwc_out0) : f32[1x4x4x8]", "Mul(%d_depthwise_out0, %s_nhwc_out0) : f32[1x4x4x8]",
        "Add(%e_1_out0, %a_out_out0) : f32[1x4x4x8]", "Concat(%f_1_out0, %a_out_out0) {axis=3} : f32[1x4x4x16]"})
    EXPECT_NE(r.text.find(expected), std::string::npos) << expected << "\n" << r.text;
}

TEST(ChannelsLast, LeavesIsolatedNarrowAndPointwiseOnlyChainsAlone) {
  // One depthwise Conv alone: its two edge transposes would cost more than its vectors save.
  expectUnchanged(channelsLast,
                  "graph(%x: f32[1x16x8x8], %w: f32[16x1x3x3]) -> (%y: f32[1x16x8x8]) {\n"
                  "  %y = Conv(%x, %w) {auto_pad=\"NOTSET\", group=16, pads=[1, 1, 1, 1]} : f32[1x16x8x8]\n"
                  "}\n");
  // Four channels: less than a vector.
  expectUnchanged(channelsLast,
                  "graph(%x: f32[1x4x8x8], %w1: f32[4x4x1x1], %wd: f32[4x1x3x3]) -> (%y: f32[1x4x8x8]) {\n"
                  "  %a = Conv(%x, %w1) {auto_pad=\"NOTSET\", group=1} : f32[1x4x8x8]\n"
                  "  %y = Conv(%a, %wd) {auto_pad=\"NOTSET\", group=4, pads=[1, 1, 1, 1]} : f32[1x4x8x8]\n"
                  "}\n");
  // Pointwise Convs without a depthwise one (a ResNet bottleneck's 1x1s stay channel-first GEMMs).
  expectUnchanged(channelsLast,
                  "graph(%x: f32[1x8x4x4], %w1: f32[16x8x1x1], %w2: f32[8x16x1x1]) -> (%y: f32[1x8x4x4]) {\n"
                  "  %a = Conv(%x, %w1) {auto_pad=\"NOTSET\", group=1} : f32[1x16x4x4]\n"
                  "  %y = Conv(%a, %w2) {auto_pad=\"NOTSET\", group=1} : f32[1x8x4x4]\n"
                  "}\n");
  // A channel multiplier (two outputs per input channel) and f16 are not depthwise candidates.
  expectUnchanged(channelsLast,
                  "graph(%x: f32[1x8x4x4], %w1: f32[8x8x1x1], %wd: f32[16x1x3x3]) -> (%y: f32[1x16x4x4]) {\n"
                  "  %a = Conv(%x, %w1) {auto_pad=\"NOTSET\", group=1} : f32[1x8x4x4]\n"
                  "  %y = Conv(%a, %wd) {auto_pad=\"NOTSET\", group=8, pads=[1, 1, 1, 1]} : f32[1x16x4x4]\n"
                  "}\n");
  expectUnchanged(channelsLast,
                  "graph(%x: f16[1x8x4x4], %w1: f16[8x8x1x1], %wd: f16[8x1x3x3]) -> (%y: f16[1x8x4x4]) {\n"
                  "  %a = Conv(%x, %w1) {auto_pad=\"NOTSET\", group=1} : f16[1x8x4x4]\n"
                  "  %y = Conv(%a, %wd) {auto_pad=\"NOTSET\", group=8, pads=[1, 1, 1, 1]} : f16[1x8x4x4]\n"
                  "}\n");
}

int countOps(const Graph& g, OpKind op) {
  int n = 0;
  for (const Node* node : g.nodes()) n += node->op() == op;
  return n;
}

TEST(ChannelsLast, AfterThePipelineOnlyTheChainsEdgesAreTransposed) {
  // An inverted-residual block (1x1 expand, depthwise, 1x1 project, residual Add) twice: every
  // transpose inside the chain cancels; one to NHWC at the input and one to NCHW at the output stay.
  auto g = parseGraph(
      "graph(%x: f32[1x8x6x6], %we: f32[32x8x1x1], %wd: f32[32x1x3x3], %wp: f32[8x32x1x1]) -> (%y: f32[1x8x6x6]) {\n"
      "  %e1 = Conv(%x, %we) {auto_pad=\"NOTSET\", group=1} : f32[1x32x6x6]\n"
      "  %r1 = Relu(%e1) : f32[1x32x6x6]\n"
      "  %d1 = Conv(%r1, %wd) {auto_pad=\"NOTSET\", group=32, pads=[1, 1, 1, 1]} : f32[1x32x6x6]\n"
      "  %p1 = Conv(%d1, %wp) {auto_pad=\"NOTSET\", group=1} : f32[1x8x6x6]\n"
      "  %o1 = Add(%p1, %x) : f32[1x8x6x6]\n"
      "  %e2 = Conv(%o1, %we) {auto_pad=\"NOTSET\", group=1} : f32[1x32x6x6]\n"
      "  %r2 = Relu(%e2) : f32[1x32x6x6]\n"
      "  %d2 = Conv(%r2, %wd) {auto_pad=\"NOTSET\", group=32, pads=[1, 1, 1, 1]} : f32[1x32x6x6]\n"
      "  %p2 = Conv(%d2, %wp) {auto_pad=\"NOTSET\", group=1} : f32[1x8x6x6]\n"
      "  %y = Add(%p2, %o1) : f32[1x8x6x6]\n"
      "}\n");
  ASSERT_TRUE(g.isOk()) << g.status().message();
  PipelineOptions options;
  options.optLevel = 2;
  options.targetPasses = {kChannelsLast, kConvToGemm, kExplicitPadding};
  options.verifyEachPass = true;
  ASSERT_TRUE(runPipeline(**g, options).isOk());
  EXPECT_EQ(countOps(**g, OpKind::Conv), 0);
  EXPECT_EQ(countOps(**g, OpKind::DepthwiseConvNhwc), 2);
  EXPECT_EQ(countOps(**g, OpKind::MatMul), 4);
  // The weights here are inputs (their transposes run at run time): count the activations' only.
  int activationTransposes = 0;
  for (const Node* n : (*g)->nodes())
    activationTransposes += n->op() == OpKind::Transpose && n->output(0)->shape().rank() == 4;
  EXPECT_EQ(activationTransposes, 2) << printGraph(**g);
}

}  // namespace
}  // namespace nnc::passes
