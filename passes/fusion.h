// Fusion: partitions the graph's nodes into kernel groups (policy). ir/lower.h turns each group
// into kernel IR (mechanism).
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "ir/lower.h"

namespace nnc::passes {

// A fusion decision that carries why not (printed with --debug-fusion).
struct FusionDecision {
  bool ok;
  std::string reason;
  static FusionDecision yes() { return {true, ""}; }
  static FusionDecision no(std::string why) { return {false, std::move(why)}; }
};

struct FusionOptions {
  bool enabled = true;  // false: one group per node (-O0, eager)
  // A MatMul that OpDef::asGemm describes becomes a library call (the cuda target's cuBLASLt): its
  // group takes no prologue (the library reads its operands from memory) and only the epilogue the
  // library applies itself: an f32 Add of a bias over the product's columns.
  bool libraryGemm = false;
  // A MatMul that OpDef::asGemm describes is a packed contraction (the cpu target's GEMM,
  // ir/lower_contraction.h): it reads its operands from memory, so its group takes no prologue but
  // strided views (Transpose, Slice, Reshape: folded into its operand strides); any elementwise
  // epilogue still fuses.
  bool packedContractions = false;
  std::ostream* debugLog = nullptr;  // receives one line per rejected candidate
};

// Whether `n` is a library GEMM under `options` (the partitioner and the plan builder agree on it).
bool isLibraryGemm(const Node& n, const FusionOptions& options);
// Whether `n` is a packed contraction under `options`.
bool isPackedContraction(const Node& n, const FusionOptions& options);

// Groups in execution order; every node is in exactly one group. Opaque nodes are alone.
// Boundaries (inputs/outputs) are filled in.
std::vector<KernelGroup> partitionIntoKernels(const Graph& graph, const FusionOptions& options);

// Graphviz of the graph with each multi-node group as a cluster (--dump-graph).
std::string fusedGraphToDot(const Graph& graph, const std::vector<KernelGroup>& groups);
// The graph printed group by group (--emit=fused-ir).
std::string printFusedGraph(const Graph& graph, const std::vector<KernelGroup>& groups);

}  // namespace nnc::passes
