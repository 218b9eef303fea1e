// Graph edits the rewriting passes share: a node inserted before another and shape-inferred, and the
// two data-movement nodes they insert most (a constant is reshaped in place, no node); and the
// small matchers of the pattern-recognising passes (recognize-layer-norm, recognize-rms-norm).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "nnc/status.h"

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

// The node producing `v` if it is `op` and `v` has exactly `users` uses and is no graph output.
Node* producerIf(Value* v, OpKind op, size_t users = 1);
// The value of a one-element float constant.
std::optional<double> scalarConstant(const Value* v);
// The first normalized axis of a ReduceMean over trailing axes with keepdims, or -1.
int trailingMeanAxis(const Node& n);
// Of a binary node, the input that is not `known` (nullptr if neither or both are).
Value* otherInput(const Node& n, const Value* known);
// The single user of `v`, if `v` has one and is no graph output.
Node* soleUser(const Value* v);
// Whether `v` broadcasts to exactly `shape`.
bool broadcastsTo(const Value* v, const Shape& shape);
// The other operand of `*last`'s sole user when that user is `op` (Mul: a scale, Add: a shift) and
// the operand has x's dtype and broadcasts to x's shape, as the result does; *last then becomes the
// user. nullptr (and *last unchanged) otherwise.
Value* trailingOperand(Node** last, OpKind op, const Value* x);
// A constant of ones over x's dims from `axis` on (a normalisation's scale when the graph has none).
Value* onesFrom(Graph& graph, const Value* x, int axis, const std::string& name);
// Replaces the uses of `last`'s result by `op`(inputs) {axis, epsilon} inserted before it (a
// recognised normalisation; the decomposed nodes are left to DCE); true. A new node of another type
// is a compiler bug in `pass` (NNC_CHECK).
Expected<bool> replaceWithNormalization(Graph& graph, Node* last, OpKind op, std::vector<Value*> inputs, int axis,
                                        double epsilon, const char* pass);

}  // namespace nnc::passes
