// conv-to-gemm (every target's group-1 Conv lowering) as text: the rewrite, and what it leaves alone. The
// numerics are in tests/driver/conv_to_gemm_numerics_test.cpp.
#include "tests/passes/pass_test_util.h"

namespace nnc::passes {
namespace {

using testing::expectRewrite;
using testing::expectUnchanged;

TEST(ConvToGemm, RewritesAConvIntoIm2ColMatMulAndBias) {
  expectRewrite(convToGemm,
                "graph(%x: f32[1x2x5x5], %w: f32[3x2x3x3], %b: f32[3]) -> (%y: f32[1x3x2x2]) {\n"
                "  %y = Conv(%x, %w, %b) {auto_pad=\"NOTSET\", group=1, pads=[1, 0, 0, 1], strides=[2, 2]} : "
                "f32[1x3x2x2]\n"
                "}\n",
                "graph(%x: f32[1x2x5x5], %w: f32[3x2x3x3], %b: f32[3]) -> (%y_add_bias_out0: f32[1x3x2x2]) {\n"
                "  %y_im2col_out0 = Im2Col(%x) {auto_pad=\"NOTSET\", kernel_shape=[3, 3], pads=[1, 0, 0, 1], "
                "patch_rows=0, strides=[2, 2]} : f32[1x18x4]\n"
                "  %y_weights_out0 = Reshape(%w) {allowzero=0, shape=[3, 18]} : f32[3x18]\n"
                "  %y_gemm_out0 = MatMul(%y_weights_out0, %y_im2col_out0) : f32[1x3x4]\n"
                "  %y_out_out0 = Reshape(%y_gemm_out0) {allowzero=0, shape=[1, 3, 2, 2]} : f32[1x3x2x2]\n"
                "  %y_bias_out0 = Reshape(%b) {allowzero=0, shape=[3, 1, 1]} : f32[3x1x1]\n"
                "  %y_add_bias_out0 = Add(%y_out_out0, %y_bias_out0) : f32[1x3x2x2]\n"
                "}\n");
}

TEST(ConvToGemm, APointwiseConvNeedsNoIm2Col) {
  expectRewrite(convToGemm,
                "graph(%x: f32[2x4x3x3], %w: f32[8x4x1x1]) -> (%y: f32[2x8x3x3]) {\n"
                "  %y = Conv(%x, %w) {auto_pad=\"NOTSET\", group=1} : f32[2x8x3x3]\n"
                "}\n",
                "graph(%x: f32[2x4x3x3], %w: f32[8x4x1x1]) -> (%y_out_out0: f32[2x8x3x3]) {\n"
                "  %y_cols_out0 = Reshape(%x) {allowzero=0, shape=[2, 4, 9]} : f32[2x4x9]\n"
                "  %y_weights_out0 = Reshape(%w) {allowzero=0, shape=[8, 4]} : f32[8x4]\n"
                "  %y_gemm_out0 = MatMul(%y_weights_out0, %y_cols_out0) : f32[2x8x9]\n"
                "  %y_out_out0 = Reshape(%y_gemm_out0) {allowzero=0, shape=[2, 8, 3, 3]} : f32[2x8x3x3]\n"
                "}\n");
}

TEST(ConvToGemm, AGroupedConvIsOneGemmPerGroup) {
  expectRewrite(convToGemm,
                "graph(%x: f32[1x4x5x5], %w: f32[6x2x3x3]) -> (%y: f32[1x6x3x3]) {\n"
                "  %y = Conv(%x, %w) {auto_pad=\"NOTSET\", group=2} : f32[1x6x3x3]\n"
                "}\n",
                "graph(%x: f32[1x4x5x5], %w: f32[6x2x3x3]) -> (%y_out_out0: f32[1x6x3x3]) {\n"
                "  %y_im2col_out0 = Im2Col(%x) {auto_pad=\"NOTSET\", kernel_shape=[3, 3], patch_rows=0} : f32[1x36x9]\n"
                "  %y_groups_out0 = Reshape(%y_im2col_out0) {allowzero=0, shape=[2, 18, 9]} : f32[2x18x9]\n"
                "  %y_weights_out0 = Reshape(%w) {allowzero=0, shape=[2, 3, 18]} : f32[2x3x18]\n"
                "  %y_gemm_out0 = MatMul(%y_weights_out0, %y_groups_out0) : f32[2x3x9]\n"
                "  %y_out_out0 = Reshape(%y_gemm_out0) {allowzero=0, shape=[1, 6, 3, 3]} : f32[1x6x3x3]\n"
                "}\n");
}

TEST(ConvToGemm, LeavesDepthwiseSmallGroupedBatchedAndNonFloatConvsAlone) {
  expectUnchanged(convToGemm,
                  "graph(%x: f32[1x4x5x5], %w: f32[4x1x3x3]) -> (%y: f32[1x4x3x3]) {\n"
                  "  %y = Conv(%x, %w) {auto_pad=\"NOTSET\", group=4} : f32[1x4x3x3]\n"
                  "}\n");
  // Groups of 2 channels x 2 x 2 taps: 8 products each.
  expectUnchanged(convToGemm,
                  "graph(%x: f32[1x4x5x5], %w: f32[4x2x2x2]) -> (%y: f32[1x4x4x4]) {\n"
                  "  %y = Conv(%x, %w) {auto_pad=\"NOTSET\", group=2} : f32[1x4x4x4]\n"
                  "}\n");
  // Two images: the groups of both are no single batched GEMM.
  expectUnchanged(convToGemm,
                  "graph(%x: f32[2x4x5x5], %w: f32[6x2x3x3]) -> (%y: f32[2x6x3x3]) {\n"
                  "  %y = Conv(%x, %w) {auto_pad=\"NOTSET\", group=2} : f32[2x6x3x3]\n"
                  "}\n");
  expectUnchanged(convToGemm,
                  "graph(%x: f16[1x2x5x5], %w: f16[3x2x3x3]) -> (%y: f16[1x3x3x3]) {\n"
                  "  %y = Conv(%x, %w) {auto_pad=\"NOTSET\", group=1} : f16[1x3x3x3]\n"
                  "}\n");
}

}  // namespace
}  // namespace nnc::passes
