// A set of a graph's nodes as a graph of its own, for compiling part of a model by itself (nnc bisect's
// kernel groups, fold-constant-subgraphs' constant cones).
#pragma once

#include <memory>
#include <vector>

#include "ir/graph.h"

namespace nnc {

// The nodes (in topological order) with their names, attributes and types; a constant they read stays
// a constant (its buffer shared, not copied), any other value they read from outside becomes a graph
// input, in order of first use, and *inputs gets the original of each. `outputs` (values the nodes
// compute) become the graph's outputs, in that order.
std::unique_ptr<Graph> extractSubgraph(const std::vector<const Node*>& nodes, const std::vector<const Value*>& outputs,
                                       std::vector<const Value*>* inputs);

}  // namespace nnc
