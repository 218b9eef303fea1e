// Lowering a group of graph nodes to one kir::Kernel — the mechanism of fusion. The fusion pass
// decides the groups (policy); this builds them. A group of one node is the eager (-O0) kernel.
#pragma once

#include <vector>

#include "ir/graph.h"
#include "ir/status.h"
#include "kir/kernel_ir.h"

namespace nnc {

struct KernelGroup {
  std::vector<Node*> nodes;    // in topological order; at most one Reduction-class anchor
  std::vector<Value*> inputs;  // values read from memory (graph inputs, constants, other groups)
  std::vector<Value*> outputs; // values written to memory
};

// Fills group.inputs/outputs from the nodes and the graph: an output is any value produced in the
// group and used outside it (or a graph output).
void computeGroupBoundary(KernelGroup& group);

// Builds the kernel. Param slots: inputs first (in group.inputs order), then outputs.
// Fails (with a message naming the node) when the group is not lowerable as one kernel.
Expected<kir::Kernel> lowerGroup(const KernelGroup& group, const std::string& kernelName);

}  // namespace nnc
