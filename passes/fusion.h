// Fusion: partitions the graph's nodes into kernel groups (policy). ir/lower.h turns each group
// into kernel IR (mechanism).
#pragma once

#include <functional>
#include <ostream>
#include <string>
#include <vector>

#include "ir/attention_pattern.h"
#include "ir/graph.h"
#include "ir/lower.h"

namespace nnc::passes {

// A fusion decision that carries why not (collected as FusionRefusals; `nnc explain` prints them).
struct FusionDecision {
  bool ok;
  std::string reason;
  static FusionDecision yes() { return {true, ""}; }
  static FusionDecision no(std::string why) { return {false, std::move(why)}; }
};

// A target's fusion hooks for its contractions (targets/target.h supplies them): which nodes anchor a
// contraction group, and what such a group takes besides the anchor.
struct ContractionHooks {
  // The kind of the groups they anchor: Contraction (generated) or LibraryCall.
  GroupKind kind = GroupKind::Contraction;
  // Whether `n` anchors a contraction group. Empty: the target has none, and every anchor is
  // lowered as loop nests.
  std::function<bool(const Node& n)> isAnchor;
  // Prologue: whether `producer` folds into how the anchor reads its input `operand` (0 or 1; -1 for
  // an input of another node of the group). A producer group is inlined only when all of its nodes
  // fold; `noPrologue` says why not. Empty: nothing folds (the operands are read from memory).
  std::function<bool(const Node& producer, int operand)> foldsIntoOperand;
  std::string noPrologue = "the contraction reads its operands from memory";
  // Epilogue: besides the elementwise nodes every anchor takes, a node that keeps the element order
  // of the group's result (OpDef::keepsElementOrder: a Reshape) joins too.
  bool reshapeInEpilogue = false;
  // When set, every epilogue node must pass it as well: `n` reads the group's result `in`, after
  // `joined` epilogue nodes have joined the group.
  std::function<FusionDecision(const Node& anchor, const Node& n, const Value* in, int joined)> acceptsEpilogue;
  // Whether the target computes this attention pattern as one kernel (GroupKind::Attention, which
  // takes no prologue and no epilogue). Empty: attention is its MatMuls and softmax, fused as usual.
  std::function<bool(const AttentionPattern&)> acceptsAttention;
};

// A candidate the policy turned down: `consumer` did not take `value`'s producer into its group
// (prologue) or did not join the producer's group (epilogue), and why.
struct FusionRefusal {
  const Node* consumer = nullptr;
  const Value* value = nullptr;
  std::string reason;  // "no epilogue fusion: ..." or "not inlining V: ..."
};

struct FusionOptions {
  bool enabled = true;                             // false: one group per node (-O0, eager)
  ContractionHooks contractions;                   // the target's; none by default
  std::ostream* debugLog = nullptr;                // receives one line per rejected candidate
  std::vector<FusionRefusal>* refusals = nullptr;  // receives every rejected candidate
};

// A value computed in one group and read by a node of another: a round trip through memory, with why
// the two were not fused.
struct FusionCut {
  const Value* value = nullptr;
  size_t fromGroup = 0, toGroup = 0;  // indices into the groups
  const Node* consumer = nullptr;
  std::string reason;
};

// Every cut of `groups` (partitionIntoKernels' result), in group order, each with the reasons the
// policy recorded for that (consumer, value) pair, or why it was no candidate at all.
std::vector<FusionCut> fusionCuts(const std::vector<KernelGroup>& groups, const std::vector<FusionRefusal>& refusals,
                                  bool fusionEnabled);

// Groups in execution order; every node is in exactly one group. Opaque nodes are alone.
// Boundaries (inputs/outputs) and kinds are filled in.
std::vector<KernelGroup> partitionIntoKernels(const Graph& graph, const FusionOptions& options);

// Graphviz of the graph with each multi-node group as a cluster (--dump-graph).
std::string fusedGraphToDot(const Graph& graph, const std::vector<KernelGroup>& groups);
// The graph printed group by group (--emit=fused-ir).
std::string printFusedGraph(const Graph& graph, const std::vector<KernelGroup>& groups);

}  // namespace nnc::passes
