// GELU recognition: the exact (erf) GELU that exporters write as ops below opset 20 (PyTorch's
// nn.GELU, HuggingFace's BERT, ConvNeXt)
//   d = Div(x, sqrt 2) | Mul(x, 1 / sqrt 2)     e = Erf(d)     p = Add(e, 1)
//   y = Mul(Mul(x, p), 0.5) | Mul(Mul(x, 0.5), p) | Mul(Mul(p, 0.5), x)    (operands in either order)
// becomes one Gelu(x) {approximate = "none"}, which multiplies by 1 / sqrt 2 where the export divides:
// a vector division costs ~10 cycles where a multiply costs half of one (a measurable share of
// ConvNeXt's 1.2 M-element GELU; bench/NOTES.md), and the rounding changes by at most an ulp. The
// intermediates must have no other users and not be graph outputs; the constants must be scalars
// within a few ulp of sqrt 2 (or its reciprocal), 1 and 0.5.
#include <cmath>
#include <numbers>
#include <optional>

#include "ir/builder.h"
#include "passes/pass.h"
#include "passes/rewrite.h"

namespace nnc::passes {

namespace {

bool near(std::optional<double> v, double want) { return v && std::abs(*v - want) <= 1e-6 * want; }

// The scalar-constant operand of binary node n and its other operand, or nullptr when n has none.
Value* withConstant(const Node& n, double want) {
  if (n.numInputs() != 2) return nullptr;
  if (near(scalarConstant(n.input(1)), want)) return n.input(0);
  if (near(scalarConstant(n.input(0)), want)) return n.input(1);
  return nullptr;
}

// The node computing x * p * 0.5 from p (p's sole user being the first Mul), or nullptr.
Node* halfProduct(const Value* x, Value* p) {
  Node* first = soleUser(p);
  if (!first || first->op() != OpKind::Mul) return nullptr;
  Value* other = otherInput(*first, p);
  if (other == x) {  // Mul(Mul(x, p), 0.5)
    Node* half = soleUser(first->output(0));
    return half && half->op() == OpKind::Mul && withConstant(*half, 0.5) == first->output(0) ? half : nullptr;
  }
  if (Node* scaled = other ? producerIf(other, OpKind::Mul) : nullptr)  // Mul(Mul(x, 0.5), p)
    return withConstant(*scaled, 0.5) == x ? first : nullptr;
  if (withConstant(*first, 0.5) == p) {  // Mul(Mul(p, 0.5), x)
    Node* times = soleUser(first->output(0));
    return times && times->op() == OpKind::Mul && otherInput(*times, first->output(0)) == x ? times : nullptr;
  }
  return nullptr;
}

Expected<bool> rewriteAt(Graph& graph, Node* erf) {
  Node* scale = erf->input(0)->producer();
  if (!scale || soleUser(erf->input(0)) != erf) return false;
  Value* x = scale->op() == OpKind::Div && scale->numInputs() == 2 &&
                     near(scalarConstant(scale->input(1)), std::numbers::sqrt2)
                 ? scale->input(0)
             : scale->op() == OpKind::Mul ? withConstant(*scale, 1 / std::numbers::sqrt2)
                                          : nullptr;
  if (!x || !isFloat(x->dtype()) || scale->output(0)->shape() != x->shape()) return false;
  Node* plusOne = soleUser(erf->output(0));
  if (!plusOne || plusOne->op() != OpKind::Add || withConstant(*plusOne, 1.0) != erf->output(0)) return false;
  Node* last = halfProduct(x, plusOne->output(0));
  if (!last || last->output(0)->shape() != x->shape() || last->output(0)->dtype() != x->dtype()) return false;
  Attributes attrs;
  attrs.set("approximate", std::string("none"));
  NNC_ASSIGN_OR_RETURN(Value * gelu, insertBefore(graph, last, OpKind::Gelu, last->name(), {x}, std::move(attrs)));
  graph.replaceAllUsesWith(last->output(0), gelu);
  return true;
}

}  // namespace

Expected<bool> recognizeGelu(Graph& graph) {
  bool changed = false;
  for (Node* n : graph.nodes()) {
    if (n->op() != OpKind::Erf || n->numInputs() != 1 || !n->input(0)) continue;
    NNC_ASSIGN_OR_RETURN(bool rewritten, rewriteAt(graph, n));
    changed |= rewritten;
  }
  return changed;
}

}  // namespace nnc::passes
