// The graph passes only the cpu target runs (Target::passes(), before the shared table of
// passes/pipeline.cpp), each in its own file beside this one.
#pragma once

#include "passes/pipeline.h"

namespace nnc::passes {

// Chains of depthwise and pointwise Convs on channels-last data (DepthwiseConvNhwc, MatMul), with
// transposes only at the chains' edges (channels_last.cpp).
Expected<bool> channelsLast(Graph& graph);
// A padded Conv or Im2Col reads a zero Pad of its input, so its taps are affine loads
// (explicit_padding.cpp).
Expected<bool> explicitPadding(Graph& graph);

// A MatMul of a batched A and a 2-D B as one GEMM over all the batch's rows (batch_rows.cpp).
Expected<bool> batchRows(Graph& graph);

// As the cpu target lists them; the layout change only from -O1 (-O0 has no simplify to cancel its
// transposes), and the batch's rows too (-O0 runs the ops as the model has them).
inline constexpr TargetPass kChannelsLast = {
    "channels-last", channelsLast, 1, "depthwise-separable Conv chains on NHWC data: DepthwiseConvNhwc, 1x1 as MatMul"};
inline constexpr TargetPass kExplicitPadding = {"explicit-padding", explicitPadding, 0,
                                                "a padded Conv/Im2Col reads a zero Pad of its input (affine taps)"};
inline constexpr TargetPass kBatchRows = {"batch-rows", batchRows, 1,
                                          "MatMul of a batched A and a 2-D B as one GEMM over the batch's rows"};

}  // namespace nnc::passes
