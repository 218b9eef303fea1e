#include "passes/rewrite.h"

#include "ir/builder.h"

namespace nnc::passes {

Expected<Value*> insertBefore(Graph& graph, Node* before, OpKind op, const std::string& name,
                              std::vector<Value*> inputs, Attributes attrs) {
  Node* n = graph.insertNodeBefore(before, op, graph.uniqueName(name), std::move(inputs), 1, std::move(attrs));
  NNC_RETURN_IF_ERROR(inferNode(*n));
  return n->output(0);
}

Expected<Value*> reshapeBefore(Graph& graph, Node* before, Value* v, std::vector<int64_t> dims,
                               const std::string& name) {
  if (v->isConstant()) return graph.addConstant(graph.uniqueName(name), v->constant().reshaped(Shape(dims)));
  Attributes attrs;
  attrs.set("shape", std::move(dims));
  return insertBefore(graph, before, OpKind::Reshape, name, {v}, std::move(attrs));
}

Expected<Value*> transposeBefore(Graph& graph, Node* before, Value* v, std::vector<int64_t> perm,
                                 const std::string& name) {
  Attributes attrs;
  attrs.set("perm", std::move(perm));
  return insertBefore(graph, before, OpKind::Transpose, name, {v}, std::move(attrs));
}

}  // namespace nnc::passes
