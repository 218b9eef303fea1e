// Canonical forms, before the recognisers, folding and CSE look at the graph, so that each pattern
// is written in one form however an exporter spelt it:
//   a commutative binary op (Add, Mul, Max, Min, And, Or, Xor, Equal) whose first input is a
//   constant and whose second is not      -> the inputs swapped (constants second)
//   Pow(x, c), c a one-element constant:   1 -> Identity(x)    2 -> Mul(x, x)    3 -> Mul(Mul(x, x), x)
//                                          0.5 -> Sqrt(x)      -1 -> Reciprocal(x)
//                                          -0.5 -> Reciprocal(Sqrt(x))
//   Div(1, x)                             -> Reciprocal(x)
//   Sub(0, x)                             -> Neg(x)
// each only where the result keeps x's dtype and shape (a constant that broadcasts x to a larger
// shape is left alone). Pow with a constant exponent is a transcendental call per element, where a
// multiply is one instruction. x * x is pow(x, 2) exactly (one rounding either way), and 1 / x is
// pow(x, -1); x * x * x rounds twice where pow rounds once (within an ulp), Sqrt differs from
// pow(x, 0.5) only at -0 (-0 against +0) and -inf (NaN against +inf) — as ONNX Runtime's Pow kernel
// computes these exponents too.
#include <optional>

#include "ir/op_registry.h"
#include "passes/pass.h"
#include "passes/rewrite.h"

namespace nnc::passes {

namespace {

bool isCommutative(OpKind op) {
  switch (op) {
    case OpKind::Add:
    case OpKind::Mul:
    case OpKind::Max:
    case OpKind::Min:
    case OpKind::And:
    case OpKind::Or:
    case OpKind::Xor:
    case OpKind::Equal: return true;
    default: return false;
  }
}

// The value of a one-element constant of any numeric dtype.
std::optional<double> oneElementConstant(const Value* v) {
  if (!v || !v->isConstant() || v->constant().numel() != 1 || v->dtype() == DType::Bool) return std::nullopt;
  return v->constant().getDouble(0);
}

// Whether replacing `n`'s result by an elementwise function of `x` keeps its type.
bool keepsType(const Node& n, const Value* x) {
  return x->dtype() == n.output(0)->dtype() && x->shape() == n.output(0)->shape() && isFloat(x->dtype());
}

// `op`(inputs) before `n`, named after it.
Expected<Value*> before(Graph& graph, Node* n, OpKind op, std::vector<Value*> inputs) {
  return insertBefore(graph, n, op, n->name(), std::move(inputs));
}

// Pow(x, exponent) as multiplies, Sqrt or Reciprocal; nullptr for the other exponents.
Expected<Value*> powerOf(Graph& graph, Node* n, Value* x, double exponent) {
  if (exponent == 1) return before(graph, n, OpKind::Identity, {x});
  if (exponent == 2) return before(graph, n, OpKind::Mul, {x, x});
  if (exponent == 3) {
    NNC_ASSIGN_OR_RETURN(Value * square, before(graph, n, OpKind::Mul, {x, x}));
    return before(graph, n, OpKind::Mul, {square, x});
  }
  if (exponent == 0.5) return before(graph, n, OpKind::Sqrt, {x});
  if (exponent == -1) return before(graph, n, OpKind::Reciprocal, {x});
  if (exponent == -0.5) {
    NNC_ASSIGN_OR_RETURN(Value * root, before(graph, n, OpKind::Sqrt, {x}));
    return before(graph, n, OpKind::Reciprocal, {root});
  }
  return nullptr;
}

// The canonical form of `n`'s result, or nullptr where it has none (or is in it).
Expected<Value*> canonicalFormOf(Graph& graph, Node* n) {
  if (n->numInputs() != 2 || !n->input(0) || !n->input(1)) return nullptr;
  Value* a = n->input(0);
  Value* b = n->input(1);
  switch (n->op()) {
    case OpKind::Pow: {
      std::optional<double> exponent = oneElementConstant(b);
      if (!exponent || !keepsType(*n, a)) return nullptr;
      return powerOf(graph, n, a, *exponent);
    }
    case OpKind::Div:
      if (oneElementConstant(a) != std::optional<double>(1) || !keepsType(*n, b)) return nullptr;
      return before(graph, n, OpKind::Reciprocal, {b});
    case OpKind::Sub:
      if (oneElementConstant(a) != std::optional<double>(0) || !keepsType(*n, b)) return nullptr;
      return before(graph, n, OpKind::Neg, {b});
    default: return nullptr;
  }
}

}  // namespace

Expected<bool> canonicalize(Graph& graph) {
  bool changed = false;
  for (Node* n : graph.nodes()) {
    if (n->numOutputs() != 1) continue;
    Value* y = n->output(0);
    if (y->users().empty() && !y->isGraphOutput()) continue;  // dead: left to DCE
    if (isCommutative(n->op()) && n->numInputs() == 2 && n->input(0) && n->input(1) && n->input(0)->isConstant() &&
        !n->input(1)->isConstant()) {
      Value* constant = n->input(0);
      graph.setNodeInput(n, 0, n->input(1));
      graph.setNodeInput(n, 1, constant);
      changed = true;
      continue;
    }
    NNC_ASSIGN_OR_RETURN(Value * canonical, canonicalFormOf(graph, n));
    if (!canonical) continue;
    NNC_CHECK(canonical->shape() == y->shape() && canonical->dtype() == y->dtype(),
              n->diagPrefix() + "canonicalize changed the result's type");
    graph.replaceAllUsesWith(y, canonical);
    // Erased now, not left to DCE: the recognisers after this pass count a value's users, and the
    // replaced node would still be one.
    if (y->users().empty() && !y->isGraphOutput()) graph.eraseNode(n);
    changed = true;
  }
  return changed;
}

}  // namespace nnc::passes
