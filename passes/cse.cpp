// Common subexpression elimination: a node is redundant when an earlier node has the same op, the
// same inputs (by identity, or equal constants of at most kMaxCompared elements) and equal
// attributes. Its outputs are replaced by the earlier node's.
#include <map>
#include <tuple>

#include "passes/pass.h"

namespace nnc::passes {

namespace {

constexpr int64_t kMaxCompared = 4096;

bool sameInput(const Value* a, const Value* b) {
  if (a == b) return true;
  if (!a || !b || !a->isConstant() || !b->isConstant()) return false;
  if (a->constant().numel() > kMaxCompared) return false;
  return a->constant().dtype() == b->constant().dtype() && a->constant().shape() == b->constant().shape() &&
         a->constant().bitwiseEqual(b->constant());
}

bool equivalent(const Node* a, const Node* b) {
  if (a->op() != b->op() || a->numInputs() != b->numInputs() || a->numOutputs() != b->numOutputs()) return false;
  for (int i = 0; i < a->numInputs(); ++i)
    if (!sameInput(a->input(i), b->input(i))) return false;
  return a->attrs() == b->attrs();
}

}  // namespace

Expected<bool> eliminateCommonSubexpressions(Graph& graph) {
  bool changed = false;
  // Candidates bucketed by (op, first input) keep the scan near-linear.
  std::map<std::pair<OpKind, const Value*>, std::vector<Node*>> seen;
  for (Node* n : graph.nodes()) {
    // A dead node (a twin merged by an earlier run) is left to DCE; merging it would change nothing.
    bool live = false;
    for (const Value* v : n->outputs()) live |= !v->users().empty() || v->isGraphOutput();
    if (!live) continue;
    const Value* key = n->numInputs() > 0 && n->input(0) && !n->input(0)->isConstant() ? n->input(0) : nullptr;
    auto& bucket = seen[{n->op(), key}];
    Node* twin = nullptr;
    for (Node* m : bucket)
      if (equivalent(m, n)) {
        twin = m;
        break;
      }
    if (!twin) {
      bucket.push_back(n);
      continue;
    }
    for (int i = 0; i < n->numOutputs(); ++i) graph.replaceAllUsesWith(n->output(i), twin->output(i));
    changed = true;
  }
  return changed;
}

}  // namespace nnc::passes
