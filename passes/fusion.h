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
  bool enabled = true;               // false: one group per node (-O0, eager)
  std::ostream* debugLog = nullptr;  // receives one line per rejected candidate
};

// Groups in execution order; every node is in exactly one group. Opaque nodes are alone.
// Boundaries (inputs/outputs) are filled in.
std::vector<KernelGroup> partitionIntoKernels(const Graph& graph, const FusionOptions& options);

// Graphviz of the graph with each multi-node group as a cluster (--dump-graph).
std::string fusedGraphToDot(const Graph& graph, const std::vector<KernelGroup>& groups);
// The graph printed group by group (--emit=fused-ir).
std::string printFusedGraph(const Graph& graph, const std::vector<KernelGroup>& groups);

}  // namespace nnc::passes
