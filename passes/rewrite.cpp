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

Node* producerIf(Value* v, OpKind op, size_t users) {
  if (!v || v->isGraphOutput() || v->users().size() != users) return nullptr;
  Node* p = v->producer();
  return p && p->op() == op && p->numOutputs() == 1 ? p : nullptr;
}

std::optional<double> scalarConstant(const Value* v) {
  if (!v || !v->isConstant() || v->constant().numel() != 1 || !isFloat(v->dtype())) return std::nullopt;
  return v->constant().getDouble(0);
}

int trailingMeanAxis(const Node& n) {
  const Attributes& a = n.attrs();
  const int rank = n.input(0)->shape().rank();
  if (a.getInt("keepdims") != 1 || !a.has("axes") || rank == 0) return -1;
  std::vector<bool> reduced(static_cast<size_t>(rank), false);
  for (int64_t axis : a.getInts("axes")) {
    if (axis < -rank || axis >= rank) return -1;
    reduced[static_cast<size_t>(axis < 0 ? axis + rank : axis)] = true;
  }
  int first = rank;
  while (first > 0 && reduced[static_cast<size_t>(first - 1)]) --first;
  for (int i = 0; i < first; ++i)
    if (reduced[static_cast<size_t>(i)]) return -1;
  return first < rank ? first : -1;
}

Value* otherInput(const Node& n, const Value* known) {
  if (n.numInputs() != 2) return nullptr;
  if (n.input(0) == known && n.input(1) != known) return n.input(1);
  if (n.input(1) == known && n.input(0) != known) return n.input(0);
  return nullptr;
}

Node* soleUser(const Value* v) {
  return v && !v->isGraphOutput() && v->users().size() == 1 ? v->users()[0].node : nullptr;
}

bool broadcastsTo(const Value* v, const Shape& shape) {
  std::optional<Shape> b = broadcastShapes(shape, v->shape());
  return b && *b == shape;
}

Value* trailingOperand(Node** last, OpKind op, const Value* x) {
  Node* user = soleUser((*last)->output(0));
  if (!user || user->op() != op) return nullptr;
  Value* v = otherInput(*user, (*last)->output(0));
  if (!v || v->dtype() != x->dtype() || !broadcastsTo(v, x->shape()) || user->output(0)->shape() != x->shape())
    return nullptr;
  *last = user;
  return v;
}

Value* onesFrom(Graph& graph, const Value* x, int axis, const std::string& name) {
  const std::vector<int64_t> dims(x->shape().dims().begin() + axis, x->shape().dims().end());
  Tensor ones(x->dtype(), Shape(dims));
  for (int64_t i = 0; i < ones.numel(); ++i) ones.setDouble(i, 1.0);
  return graph.addConstant(graph.uniqueName(name), ones);
}

Expected<bool> replaceWithNormalization(Graph& graph, Node* last, OpKind op, std::vector<Value*> inputs, int axis,
                                        double epsilon, const char* pass) {
  Attributes attrs;
  attrs.set("axis", int64_t{axis});
  attrs.set("epsilon", epsilon);
  NNC_ASSIGN_OR_RETURN(Value * norm, insertBefore(graph, last, op, last->name(), std::move(inputs), std::move(attrs)));
  NNC_CHECK(norm->shape() == last->output(0)->shape() && norm->dtype() == last->output(0)->dtype(),
            last->diagPrefix() + pass + " changed the result's type");
  graph.replaceAllUsesWith(last->output(0), norm);
  return true;
}

}  // namespace nnc::passes
