// The reference evaluator: runs one node on host tensors. It lowers the node alone to kernel IR and
// interprets it (kir/interpreter.h); opaque ops call their host kernel. Used for constant folding
// and as the oracle of codegen tests (the backends are checked against the interpreter; op
// semantics are checked against the ONNX backend test data).
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "ir/graph.h"
#include "nnc/tensor.h"

namespace nnc {

Expected<std::vector<Tensor>> evaluateNode(const Node& node, const std::vector<Tensor>& inputs);

// The budget of constant folding (GraphBuilder and the fold-constants pass), in loop points: about a
// second of the interpreter at most (as measured per point of a conv in a Release build; bench/NOTES.md).
// Larger nodes stay in the graph and run as compiled code.
inline constexpr int64_t kMaxFoldWork = int64_t{1} << 22;

// evaluateNode within a budget of kernel-IR loop points (kir::Kernel::work): nullopt, without
// running anything, when the node's kernels need more. The interpreter is slow (far slower per
// point than compiled code), so constant folding must not hand it a 10^10-point
// convolution that a model file can ask for.
Expected<std::optional<std::vector<Tensor>>> evaluateNodeWithin(const Node& node, const std::vector<Tensor>& inputs,
                                                                int64_t maxWork);

// The kernel-IR loop points of the node's kernels (what maxWork bounds); 0 for an opaque op, whose host
// kernel is fast.
Expected<int64_t> loopPoints(const Node& node);

// Runs a whole graph on host tensors (inputs in graph-input order). With maxWork, a node over that
// budget is an error.
Expected<std::vector<Tensor>> evaluateGraph(const Graph& graph, const std::vector<Tensor>& inputs,
                                            int64_t maxWork = INT64_MAX);

}  // namespace nnc
