// Turns an optimised graph into what the runtime executes: kernel groups lowered to kernel IR, the
// buffers (inputs, outputs, weights blob, arena offsets) and the ordered steps.
#pragma once

#include <optional>
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

struct LoweringOptions {
  bool fuse = true;                   // false: one kernel per node (eager, -O0)
  bool libraryGemm = false;           // MatMuls as library GEMM steps (the cuda target's cuBLASLt; passes/fusion.h)
  bool allowTf32 = false;             // f32 library GEMMs may round their inputs to TF32 (--allow-tf32)
  std::ostream* fusionLog = nullptr;  // one line per rejected fusion candidate
  // Set: f32 MatMuls become packed, register-tiled contractions shaped for this CPU
  // (ir/lower_contraction.h); their constant B operands are packed into the weights.
  std::optional<kir::TileTarget> contractionTarget;
};

// outputNames: the user-visible names of the graph outputs (taken before passes renamed values).
Expected<LoweredProgram> lowerProgram(const Graph& graph, const std::vector<std::string>& outputNames,
                                      const LoweringOptions& options = {});

}  // namespace nnc
