// Attention for the cpu target: a group holding one attention pattern (ir/attention_pattern.h) lowered
// to a kernel with a kir::Attention: the score matrix is never written (see kir/kernel_ir.h).
#pragma once

#include <string>

#include "ir/attention_pattern.h"
#include "ir/lower.h"

namespace nnc {

// The group (the nodes of one AttentionPattern) as one attention kernel shaped for `target`.
Expected<LoweredKernel> lowerAttention(const KernelGroup& group, const std::string& kernelName,
                                       const kir::TileTarget& target);

}  // namespace nnc
