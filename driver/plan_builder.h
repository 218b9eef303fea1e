// Turns an optimised graph into what the runtime executes: kernel groups lowered to kernel IR, the
// buffers (inputs, outputs, weights blob, arena offsets) and the ordered steps.
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "ir/lower.h"
#include "kir/kernel_ir.h"
#include "runtime/plan.h"

namespace nnc {

struct LoweredProgram {
  rt::Plan plan;
  std::vector<uint8_t> weights;
  std::vector<kir::Kernel> kernels;
  std::vector<KernelGroup> groups;
};

// outputNames: the user-visible names of the graph outputs (taken before passes renamed values).
// fuse == false gives one kernel per node (eager).
Expected<LoweredProgram> lowerProgram(const Graph& graph, const std::vector<std::string>& outputNames, bool fuse,
                                      std::ostream* fusionLog);

}  // namespace nnc
