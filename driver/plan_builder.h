// Turns an optimised graph into what the runtime executes: kernel groups lowered to kernel IR, the
// buffers (inputs, outputs, weights blob, arena offsets) and the ordered steps.
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include "ir/aligned_vector.h"
#include "ir/graph.h"
#include "ir/lower.h"
#include "kir/kernel_ir.h"
#include "passes/fusion.h"
#include "runtime/plan.h"

namespace nnc {

struct LoweredProgram {
  rt::Plan plan;
  WeightsBlob weights;
  std::vector<kir::Kernel> kernels;
  std::vector<KernelGroup> groups;
  std::vector<size_t> stepGroup;        // per plan step: the group it computes (an index into groups)
  std::vector<passes::FusionCut> cuts;  // values crossing groups, with the policy's reasons
};

struct LoweringOptions {
  bool fuse = true;                   // false: one kernel per node (eager, -O0)
  std::ostream* fusionLog = nullptr;  // one line per rejected fusion candidate
};

class Target;

// Partitions the graph with the target's fusion hooks and builds the plan, asking the target for its
// contraction groups' steps. outputNames: the user-visible names of the graph outputs (taken before
// passes renamed values).
Expected<LoweredProgram> lowerProgram(const Graph& graph, const std::vector<std::string>& outputNames,
                                      const Target& target, const LoweringOptions& options = {});

}  // namespace nnc
