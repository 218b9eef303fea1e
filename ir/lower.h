// Lowering a group of graph nodes to one kir::Kernel — the mechanism of fusion. The fusion pass
// decides the groups (policy); this builds them. A group of one node is the eager (-O0) kernel.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <vector>

#include "ir/graph.h"
#include "kir/kernel_ir.h"
#include "nnc/status.h"

namespace nnc {

// How the plan runs a kernel group: the fusion policy (passes/fusion.h) decides, the plan builder
// (driver/plan_builder.cpp) switches on it.
enum class GroupKind {
  LoopKernel,   // generated loop nests (lowerGroup)
  Contraction,  // anchored by a contraction the target generates as a tiled GEMM running the group's
                // epilogue on its tiles (cpu: targets/cpu/lower_contraction.h); loop nests where that declines
  LibraryCall,  // anchored by a contraction the target's library runs, with the epilogue it applies
                // itself (cuda: a cuBLASLt GEMM)
  Attention,    // one attention pattern (ir/attention_pattern.h) the target computes without writing its
                // scores (cpu: flash-style, kir::Attention)
  HostBuiltin,  // one opaque op's host kernel
  InPlace,      // one Concat that runs no step: the plan places its inputs inside its output, so their
                // producers write it (passes/fusion.cpp, rule 4)
};

struct KernelGroup {
  GroupKind kind = GroupKind::LoopKernel;
  std::vector<Node*> nodes;     // in topological order; at most one Reduction-class anchor
  std::vector<Value*> inputs;   // values read from memory (graph inputs, constants, other groups)
  std::vector<Value*> outputs;  // values written to memory
  // Its contractions compute in f32 whatever CompileOptions::precision asks (--precision=auto kept it
  // there: driver/precision_choice.h).
  bool keepF32 = false;
};

// Fills group.inputs/outputs from the nodes and the graph: an output is any value produced in the
// group and used outside it (or a graph output).
void computeGroupBoundary(KernelGroup& group);
// The source (ONNX) nodes the group's nodes compute (their Node::origins), each once, in node order.
std::vector<std::string> groupSources(const KernelGroup& group);

struct LoweredKernel {
  kir::Kernel kernel;
  std::vector<Value*> params;  // the value bound to each param slot: group inputs, then outputs
  // Non-empty for a check kernel (an IndexCheck of a node in the group, see ir/op_registry.h): its
  // last param (params.back() == nullptr) is the check result (ir/check_result.h), and `check`
  // says what was required: "node 'g' (Gather): input 1 ('idx', 12 elements) must be in [-5, 4]".
  std::string check;
};

// Builds the group's kernel(s): one kernel, except that a group without an anchor whose outputs
// differ in shape (Split) gets one kernel per output shape; check kernels for the IndexChecks of
// the group's nodes come first (a check kernel recomputes the checked input when it is fused). Fails, naming the node,
// when the group cannot be lowered (two anchors, an opaque op, an epilogue not at the anchor's index).
// `layouts` re-lays out group inputs: the kernel reads such a value from a param of `numel` elements
// holding it in another layout (a contraction's compile-time packed weights), at `flatIndex`.
struct InputLayout {
  int64_t numel = 0;
  std::function<kir::ExprId(kir::KernelBuilder&, const std::vector<kir::ExprId>& index)> flatIndex;
  std::optional<DType> dtype = std::nullopt;  // the param's element type where the layout rounds it (bf16 weights)
};
Expected<std::vector<LoweredKernel>> lowerGroup(const KernelGroup& group, const std::string& kernelName,
                                                const std::map<const Value*, InputLayout>& layouts = {});

}  // namespace nnc
