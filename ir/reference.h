// The reference evaluator: runs one node on host tensors. It lowers the node alone to kernel IR and
// interprets it (kir/interpreter.h); opaque ops call their host kernel. Used for constant folding
// and as the oracle of codegen tests (the backends are checked against the interpreter; op
// semantics are checked against the ONNX backend test data).
#pragma once

#include <vector>

#include "ir/graph.h"
#include "ir/tensor.h"

namespace nnc {

Expected<std::vector<Tensor>> evaluateNode(const Node& node, const std::vector<Tensor>& inputs);
// Runs a whole graph on host tensors (inputs in graph-input order).
Expected<std::vector<Tensor>> evaluateGraph(const Graph& graph, const std::vector<Tensor>& inputs);

}  // namespace nnc
