// Graph edits the rewriting passes share: a node inserted before another and shape-inferred, and the
// two data-movement nodes they insert most (a constant is reshaped in place, no node).
#pragma once

#include <string>
#include <vector>

#include "ir/graph.h"
#include "ir/status.h"

namespace nnc::passes {

// Inserts `op` (one output) before `before`, named uniquely after `name`, infers its type and returns
// its output.
Expected<Value*> insertBefore(Graph& graph, Node* before, OpKind op, const std::string& name,
                              std::vector<Value*> inputs, Attributes attrs = {});
// `v` with shape `dims`: a reshaped constant, or a Reshape node inserted before `before`.
Expected<Value*> reshapeBefore(Graph& graph, Node* before, Value* v, std::vector<int64_t> dims,
                               const std::string& name);
// Transpose(v, perm) inserted before `before`.
Expected<Value*> transposeBefore(Graph& graph, Node* before, Value* v, std::vector<int64_t> perm,
                                 const std::string& name);

}  // namespace nnc::passes
