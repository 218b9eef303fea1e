// Local simplifications, each a pattern on one node:
//   Identity(x)                      -> x
//   Cast(x) to x's own dtype         -> x
//   Reshape(x) to x's own shape      -> x
//   Reshape(Reshape(x))              -> Reshape(x)
//   Transpose(Transpose(x, p), q)    -> Transpose(x, p∘q), or x when the composition is the identity
// A node whose output is a graph output is rewritten only when its replacement is not a graph input
// or constant (materializeOutputs would otherwise have to add the copy back).
#include "ir/builder.h"
#include "passes/pass.h"

namespace nnc::passes {

namespace {

// Transpose's perm, with ONNX's default (reversed dims) when the attribute is absent.
std::vector<int64_t> permutationOf(const Node* n) {
  std::vector<int64_t> reversed;
  for (int d = n->input(0)->shape().rank() - 1; d >= 0; --d) reversed.push_back(d);
  return n->attrs().getInts("perm", reversed);
}

bool isIdentityPermutation(const std::vector<int64_t>& perm) {
  for (size_t i = 0; i < perm.size(); ++i)
    if (perm[i] != static_cast<int64_t>(i)) return false;
  return true;
}

// The value `n` can be replaced by, or nullptr.
Value* replacementFor(Node* n) {
  Value* x = n->input(0);
  if (!x || n->numOutputs() != 1) return nullptr;
  Value* y = n->output(0);
  switch (n->op()) {
    case OpKind::Identity: return x;
    case OpKind::Cast: return x->dtype() == y->dtype() ? x : nullptr;
    case OpKind::Reshape: return x->shape() == y->shape() ? x : nullptr;
    case OpKind::Transpose: return isIdentityPermutation(permutationOf(n)) ? x : nullptr;
    default: return nullptr;
  }
}

// Replaces `n`'s result by the value it equals, when there is one and the output rule allows it.
bool removeIfTrivial(Graph& graph, Node* n) {
  Value* x = replacementFor(n);
  if (!x) return false;
  Value* y = n->output(0);
  if (y->isGraphOutput() && (x->isGraphInput() || x->isConstant() || x->isGraphOutput())) return false;
  graph.replaceAllUsesWith(y, x);
  return true;
}

}  // namespace

Expected<bool> simplify(Graph& graph) {
  bool changed = false;
  for (Node* n : graph.nodes()) {
    Value* y = n->numOutputs() == 1 ? n->output(0) : nullptr;
    // Dead nodes (often ones an earlier round bypassed) are left to DCE: rewriting them changes
    // nothing, and reporting it would keep the fixpoint loop from ever settling.
    if (!y || (y->users().empty() && !y->isGraphOutput())) continue;
    if (replacementFor(n)) {
      changed |= removeIfTrivial(graph, n);
      continue;
    }
    Node* producer = n->input(0) ? n->input(0)->producer() : nullptr;
    if (!producer || producer->op() != n->op()) continue;
    if (n->op() == OpKind::Reshape) {
      // Reshape(Reshape(x), s) == Reshape(x, s): shapes here are static and fully resolved. A 0 in
      // them is an empty dim, not "copy the input's dim", so such shapes need allowzero.
      Attributes attrs;
      attrs.set("shape", y->shape().dims());
      bool hasZero = false;
      for (int64_t d : y->shape().dims()) hasZero |= d == 0;
      attrs.set("allowzero", int64_t{hasZero ? 1 : 0});
      graph.setNodeInput(n, 0, producer->input(0));
      n->attrs() = attrs;
      NNC_RETURN_IF_ERROR(inferNode(*n));
      changed = true;
    } else if (n->op() == OpKind::Transpose) {
      const std::vector<int64_t> inner = permutationOf(producer);
      const std::vector<int64_t> outer = permutationOf(n);
      std::vector<int64_t> composed(outer.size());
      for (size_t i = 0; i < outer.size(); ++i) composed[i] = inner[outer[i]];
      graph.setNodeInput(n, 0, producer->input(0));
      n->attrs().set("perm", composed);
      NNC_RETURN_IF_ERROR(inferNode(*n));
      changed = true;
    } else {
      continue;
    }
    // The merged node may now be a no-op (T(T(x)) with inverse perms, a reshape back to x's shape).
    removeIfTrivial(graph, n);
  }
  return changed;
}

}  // namespace nnc::passes
