#include "kir/affine.h"

namespace nnc::kir {

namespace {

bool isIntConst(const ExprNode& n) { return n.op == ExprOp::Const && !isFloat(n.dtype); }

class Collector {
 public:
  Collector(std::span<const ExprNode> exprs, const std::map<ExprId, ExprId>* substitute)
      : exprs_(exprs), substitute_(substitute) {}

  bool collect(ExprId e, int64_t scale, AffineForm& out) {
    if (++visits_ > kMaxVisits || e < 0 || static_cast<size_t>(e) >= exprs_.size()) return false;
    if (substitute_)
      if (auto it = substitute_->find(e); it != substitute_->end()) return collect(it->second, scale, out);
    const ExprNode& n = exprs_[e];
    int64_t scaled = 0;
    if (isIntConst(n)) {
      return !__builtin_mul_overflow(n.ival, scale, &scaled) &&
             !__builtin_add_overflow(out.constant, scaled, &out.constant);
    }
    if (n.op == ExprOp::Add || n.op == ExprOp::Sub) {
      if (!collect(n.a, scale, out)) return false;
      return !__builtin_mul_overflow(scale, n.op == ExprOp::Sub ? -1 : 1, &scaled) && collect(n.b, scaled, out);
    }
    if (n.op == ExprOp::Mul && (isIntConst(exprs_[n.a]) || isIntConst(exprs_[n.b]))) {
      const bool constFirst = isIntConst(exprs_[n.a]);
      const int64_t factor = exprs_[constFirst ? n.a : n.b].ival;
      return !__builtin_mul_overflow(scale, factor, &scaled) && collect(constFirst ? n.b : n.a, scaled, out);
    }
    int64_t& coef = out.terms[e];
    if (__builtin_add_overflow(coef, scale, &coef)) return false;
    if (coef == 0) out.terms.erase(e);
    return true;
  }

 private:
  static constexpr int kMaxVisits = 512;
  std::span<const ExprNode> exprs_;
  const std::map<ExprId, ExprId>* substitute_;
  int visits_ = 0;
};

}  // namespace

bool AffineForm::overVars(std::span<const ExprNode> exprs) const {
  for (const auto& [term, coef] : terms)
    if (exprs[term].op != ExprOp::Var) return false;
  return true;
}

std::optional<AffineForm> affineForm(std::span<const ExprNode> exprs, ExprId e,
                                     const std::map<ExprId, ExprId>* substitute) {
  if (e < 0 || static_cast<size_t>(e) >= exprs.size() || exprs[e].dtype != DType::I64) return std::nullopt;
  AffineForm form;
  if (!Collector(exprs, substitute).collect(e, 1, form)) return std::nullopt;
  return form;
}

}  // namespace nnc::kir
