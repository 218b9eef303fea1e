// LayerNorm recognition: the decomposed LayerNorm that exporters write below opset 17 (PyTorch's
// nn.LayerNorm, HuggingFace's BERT and GPT-2)
//   mean = ReduceMean(x, trailing axes, keepdims)    d   = Sub(x, mean)
//   sq   = Pow(d, 2) | Mul(d, d)                     var = ReduceMean(sq, the same axes, keepdims)
//   sd   = Sqrt(Add(var, eps))                       n   = Div(d, sd) | Mul(d, Reciprocal(sd))
//   [g   = Mul(n, gamma)]                            [y  = Add(g, beta)]
// becomes one LayerNormalization(x, gamma or ones, beta) {axis, epsilon}: one kernel whose row is read
// from cache for both statistics and the output, where the fusion policy alone makes four (d has two
// users, so it is materialised, and each ReduceMean anchors its own kernel). The intermediates must
// have no other users and not be graph outputs; eps must be a scalar constant, gamma and beta must
// broadcast to x (any value: LayerNormalization multiplies and adds them elementwise as the
// decomposed form does). The rewrite changes rounding by at most an ulp or two (n * (1 / sd) for
// d / sd).
#include <algorithm>
#include <optional>

#include "ir/builder.h"
#include "passes/pass.h"
#include "passes/rewrite.h"

namespace nnc::passes {

namespace {

// Matches the pattern with `sub` = Sub(x, mean) at its centre; rewrites it and returns true.
Expected<bool> rewriteAt(Graph& graph, Node* sub) {
  Value* x = sub->input(0);
  Value* d = sub->output(0);
  Node* mean = producerIf(sub->input(1), OpKind::ReduceMean);
  if (!mean || mean->input(0) != x || !isFloat(x->dtype()) || d->shape() != x->shape()) return false;
  const int axis = trailingMeanAxis(*mean);
  if (axis < 0 || d->isGraphOutput()) return false;
  // The square (Pow(d, 2) or Mul(d, d)) and the division (Div(d, sd) or Mul(d, Reciprocal(sd))).
  std::vector<Node*> users;
  for (const Use& u : d->users())
    if (std::find(users.begin(), users.end(), u.node) == users.end()) users.push_back(u.node);
  if (users.size() != 2) return false;
  Node* square = nullptr;
  Node* divide = nullptr;
  for (Node* n : users) {
    const bool isSquare = (n->op() == OpKind::Pow && n->input(0) == d && scalarConstant(n->input(1)) == 2.0) ||
                          (n->op() == OpKind::Mul && n->input(0) == d && n->input(1) == d);
    if (isSquare)
      square = n;
    else
      divide = n;
  }
  if (!square || !divide) return false;
  Node* var = soleUser(square->output(0));
  if (!var || var->op() != OpKind::ReduceMean || trailingMeanAxis(*var) != axis) return false;
  Node* addEps = soleUser(var->output(0));
  if (!addEps || addEps->op() != OpKind::Add) return false;
  const std::optional<double> eps = scalarConstant(otherInput(*addEps, var->output(0)));
  if (!eps || !(*eps >= 0)) return false;
  Node* sqrt = soleUser(addEps->output(0));
  if (!sqrt || sqrt->op() != OpKind::Sqrt) return false;
  if (divide->op() == OpKind::Div) {
    if (divide->input(0) != d || divide->input(1) != sqrt->output(0) || soleUser(sqrt->output(0)) != divide)
      return false;
  } else {
    Node* reciprocal = soleUser(sqrt->output(0));
    if (!reciprocal || reciprocal->op() != OpKind::Reciprocal || divide->op() != OpKind::Mul ||
        otherInput(*divide, d) != reciprocal->output(0) || soleUser(reciprocal->output(0)) != divide)
      return false;
  }
  // Optional scale and shift, each broadcasting to x.
  Node* last = divide;
  Value* gamma = trailingOperand(&last, OpKind::Mul, x);
  Value* beta = trailingOperand(&last, OpKind::Add, x);
  if (!gamma) gamma = onesFrom(graph, x, axis, last->name() + "_scale");
  std::vector<Value*> inputs = {x, gamma};
  if (beta) inputs.push_back(beta);
  return replaceWithNormalization(graph, last, OpKind::LayerNormalization, std::move(inputs), axis, *eps,
                                  "recognize-layer-norm");
}

}  // namespace

Expected<bool> recognizeLayerNorm(Graph& graph) {
  bool changed = false;
  for (Node* n : graph.nodes()) {
    if (n->op() != OpKind::Sub || n->numInputs() != 2) continue;
    NNC_ASSIGN_OR_RETURN(bool rewritten, rewriteAt(graph, n));
    changed |= rewritten;
  }
  return changed;
}

}  // namespace nnc::passes
