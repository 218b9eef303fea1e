// The graph verifier: structural invariants every pass must preserve. Run between passes in tests
// and debug builds; a failure after a pass is a bug in that pass.
#pragma once

#include "ir/graph.h"
#include "nnc/status.h"

namespace nnc {

// Checks, reporting the first violation with a message that names the node or value:
//  - every node input is produced by an earlier node, is a graph input or a constant (topological
//    order), and belongs to this graph;
//  - use lists agree with node inputs in both directions;
//  - each node's arity and attributes match its OpDef (defaults filled), and its output types equal
//    what re-running type inference gives;
//  - every graph output exists and is defined; value names are unique.
Status verifyGraph(const Graph& graph);

}  // namespace nnc
