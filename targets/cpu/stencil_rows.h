// Register blocking of stencil kernels along their rows: a channels-last depthwise conv or pool
// (outer loop [N, H, W, C], C innermost and vectorised) reads, for one output pixel, its taps' input
// vectors and the weight vectors, and computes one output vector per channel vector: 18 loads for 9
// FMAs at 3 x 3, bound by the load ports. Computing S adjacent pixels of a row per point instead
// (outer [N, H, W / S, C], S stores) lets the S pixels share the weight vectors and the input
// columns their windows overlap in: 9 + 3 (S + 2) loads for 9 S FMAs at stride 1. Each output is
// the same sum in the same order as before: the kernel's meaning and results are unchanged.
#pragma once

#include "kir/kernel_ir.h"

namespace nnc::kir {

// Rewrites a loop kernel without reductions or inner loop (only per-point stores) whose innermost
// outer extent is at least 8 and whose next one, W, has a divisor S in [2, 8]: the largest such S,
// where the S copies' loads that depend on the blocked variable share at least a quarter of
// themselves (a stencil's overlapping windows; an elementwise kernel shares none and is left
// alone). Index arithmetic of the copies is rebuilt in affine normal form so that equal addresses
// are one expression. Returns the factor S, or 1 when the kernel is unchanged. The caller keeps a
// plan's step in step with the kernel's new outer size.
int64_t blockStencilRows(Kernel& kernel);

}  // namespace nnc::kir
