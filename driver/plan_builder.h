// Turns an optimised graph into what the runtime executes: kernel groups lowered to kernel IR, the
// buffers (inputs, outputs, weights blob, arena offsets) and the ordered steps.
#pragma once

#include <ostream>
#include <set>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "targets/target.h"

namespace nnc {

struct LoweringOptions {
  bool fuse = true;                   // false: one kernel per node (eager, -O0)
  std::ostream* fusionLog = nullptr;  // one line per rejected fusion candidate
  std::string faultNode;              // tests only: CompileOptions::faultNode
  // Groups holding any of these nodes keep f32 contractions (KernelGroup::keepF32).
  std::set<const Node*> keepF32;
};

// Partitions the graph with the target's fusion hooks and builds the plan, asking the target for each
// group's kernels (Target::lower). outputNames: the user-visible names of the graph outputs (taken before
// passes renamed values).
Expected<LoweredProgram> lowerProgram(const Graph& graph, const std::vector<std::string>& outputNames,
                                      const Target& target, const LoweringOptions& options = {});

}  // namespace nnc
