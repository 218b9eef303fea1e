// Row pipelines (rt::Pipeline) for the cpu target: chains of kernel steps over the rows of one
// channels-last image — 1 x 1 convs as packed GEMMs whose tasks are whole image rows, depthwise
// convs (DepthwiseConvNhwc) — each intermediate output read by the next step only. MobileNetV2's
// inverted residual blocks at 112 x 112 and 56 x 56 write 1.2 to 4.8 MB per expanded tensor, read
// back by the depthwise conv from memory; run band by band, the rows go from one kernel to the next
// through L2 (bench/NOTES.md).
#pragma once

#include <cstdint>

#include "targets/target.h"

namespace nnc {

// Adds a pipeline to program.plan for each maximal chain of two or more such steps that passes an
// intermediate tensor of at least minIntermediateBytes; the steps and kernels are unchanged. Runs
// after the target's kernel rewrites (a depthwise conv's outer points are final then).
void formRowPipelines(LoweredProgram& program, uint64_t minIntermediateBytes);

}  // namespace nnc
