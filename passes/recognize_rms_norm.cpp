// RMSNorm recognition: the RMS normalisation that exporters write as ops (PyTorch's nn.RMSNorm and
// the LLaMA/T5 RMSNorm modules below opset 23)
//   sq = Pow(x, 2) | Mul(x, x)          ms = ReduceMean(sq, trailing axes, keepdims)
//   r  = Sqrt(Add(ms, eps))             n  = Div(x, r) | Mul(x, Reciprocal(r)) | Mul(x, Div(1, r))
//   [y = Mul(n, weight)]
// becomes one RmsNormalization(x, weight or ones) {axis, epsilon}: one kernel that reads each row
// from cache for the statistic and the output, where the fusion policy alone makes two (the
// reduction's result is broadcast back over the row, which ends its kernel). The intermediates must
// have no other users and not be graph outputs; eps must be a scalar constant, the weight must
// broadcast to x. The rewrite changes rounding by at most an ulp or two (x * (1 / r) for x / r).
#include "ir/builder.h"
#include "passes/pass.h"
#include "passes/rewrite.h"

namespace nnc::passes {

namespace {

// The node that divides x by r (Div(x, r), Mul(x, Reciprocal(r)) or Mul(x, Div(1, r))), r having no
// other user; nullptr if `user` of r is none of these.
Node* divisionOf(const Value* x, Node* sqrt) {
  Node* user = soleUser(sqrt->output(0));
  if (!user) return nullptr;
  if (user->op() == OpKind::Div && user->input(0) == x && user->input(1) == sqrt->output(0)) return user;
  const bool reciprocal =
      user->op() == OpKind::Reciprocal ||
      (user->op() == OpKind::Div && user->input(1) == sqrt->output(0) && scalarConstant(user->input(0)) == 1.0);
  if (!reciprocal) return nullptr;
  Node* mul = soleUser(user->output(0));
  return mul && mul->op() == OpKind::Mul && otherInput(*mul, user->output(0)) == x ? mul : nullptr;
}

// Matches the pattern with `mean` = ReduceMean(square of x) at its centre; rewrites it and returns
// true.
Expected<bool> rewriteAt(Graph& graph, Node* mean) {
  const int axis = trailingMeanAxis(*mean);
  Node* square = mean->input(0)->producer();
  if (axis < 0 || !square || soleUser(square->output(0)) != mean) return false;
  Value* x = square->input(0);
  const bool isSquare = (square->op() == OpKind::Pow && scalarConstant(square->input(1)) == 2.0) ||
                        (square->op() == OpKind::Mul && square->input(1) == x);
  if (!isSquare || !isFloat(x->dtype()) || square->output(0)->shape() != x->shape()) return false;
  Node* addEps = soleUser(mean->output(0));
  if (!addEps || addEps->op() != OpKind::Add) return false;
  const std::optional<double> eps = scalarConstant(otherInput(*addEps, mean->output(0)));
  if (!eps || !(*eps >= 0)) return false;
  Node* sqrt = soleUser(addEps->output(0));
  if (!sqrt || sqrt->op() != OpKind::Sqrt) return false;
  Node* last = divisionOf(x, sqrt);
  if (!last || last->output(0)->shape() != x->shape()) return false;
  Value* weight = trailingOperand(&last, OpKind::Mul, x);
  if (!weight) weight = onesFrom(graph, x, axis, last->name() + "_scale");
  return replaceWithNormalization(graph, last, OpKind::RmsNormalization, {x, weight}, axis, *eps, "recognize-rms-norm");
}

}  // namespace

Expected<bool> recognizeRmsNorm(Graph& graph) {
  bool changed = false;
  for (Node* n : graph.nodes()) {
    if (n->op() != OpKind::ReduceMean || n->numInputs() < 1) continue;
    NNC_ASSIGN_OR_RETURN(bool rewritten, rewriteAt(graph, n));
    changed |= rewritten;
  }
  return changed;
}

}  // namespace nnc::passes
