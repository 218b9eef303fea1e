// Constant folding: a node whose inputs are all constants (or whose result depends only on input
// shapes) is evaluated by the reference evaluator and its outputs become constants. Results above
// kMaxFoldedElements are left to run at inference time: folding them would bloat the weights; so are
// nodes that need more than kMaxFoldWork interpreter loop points (a big constant convolution would
// take the interpreter hours).
#include <optional>
#include <vector>

#include "ir/op_registry.h"
#include "ir/reference.h"
#include "passes/pass.h"

namespace nnc::passes {

namespace {

constexpr int64_t kMaxFoldedElements = int64_t{1} << 22;

bool foldable(const Node* n) {
  const OpDef& def = opDef(n->op());
  bool allConstant = true;
  for (const Value* v : n->inputs()) allConstant &= (!v || v->isConstant());
  if (!allConstant && !def.dependsOnlyOnShapes) return false;
  for (const Value* v : n->outputs())
    if (v->shape().numel() > kMaxFoldedElements) return false;
  return true;
}

}  // namespace

Expected<bool> foldConstants(Graph& graph) {
  bool changed = false;
  for (Node* n : graph.nodes()) {
    if (!foldable(n)) continue;
    std::vector<Tensor> inputs;
    for (const Value* v : n->inputs()) inputs.push_back(v && v->isConstant() ? v->constant() : Tensor());
    if (opDef(n->op()).dependsOnlyOnShapes) {
      // Data is never read: give the evaluator correctly typed placeholders.
      for (int i = 0; i < n->numInputs(); ++i)
        if (n->input(i) && inputs[i].isNull()) inputs[i] = Tensor(n->input(i)->dtype(), n->input(i)->shape());
    }
    NNC_ASSIGN_OR_RETURN(std::optional<std::vector<Tensor>> outputs, evaluateNodeWithin(*n, inputs, kMaxFoldWork));
    if (!outputs) continue;  // too costly to fold: it runs as compiled code
    for (int i = 0; i < n->numOutputs(); ++i) {
      Value* c = graph.addConstant(graph.uniqueName(n->output(i)->name()), std::move((*outputs)[i]));
      graph.replaceAllUsesWith(n->output(i), c);
    }
    graph.eraseNode(n);
    changed = true;
  }
  if (changed) graph.removeDeadValues();
  return changed;
}

}  // namespace nnc::passes
