#include "kir/affine.h"

#include <algorithm>
#include <vector>

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
  Collector collector(exprs, substitute);
  if (!collector.collect(e, 1, form)) return std::nullopt;
  // k * c * floordiv(x, c) + k * floormod(x, c) is k * x (for every integer x): a flat index that
  // was split into a multi-index and flattened again (a transpose read through a reshape) becomes
  // affine in x once more.
  for (bool merged = true; merged;) {
    merged = false;
    for (const auto& [term, coef] : form.terms) {
      const ExprNode& mod = exprs[term];
      if (mod.op != ExprOp::FloorMod || !isIntConst(exprs[mod.b])) continue;
      const int64_t c = exprs[mod.b].ival;
      int64_t divCoef = 0;
      if (c <= 1 || __builtin_mul_overflow(coef, c, &divCoef)) continue;
      auto div = std::find_if(form.terms.begin(), form.terms.end(), [&](const auto& t) {
        const ExprNode& n = exprs[t.first];
        return t.second == divCoef && n.op == ExprOp::FloorDiv && n.a == mod.a && isIntConst(exprs[n.b]) &&
               exprs[n.b].ival == c;
      });
      if (div == form.terms.end()) continue;
      const ExprId x = mod.a;
      const int64_t k = coef;
      form.terms.erase(div);
      form.terms.erase(term);
      if (!collector.collect(x, k, form)) return std::nullopt;
      merged = true;
      break;
    }
  }
  return form;
}

std::optional<std::set<ExprId>> varsOf(std::span<const ExprNode> exprs, ExprId e) {
  std::set<ExprId> vars, seen;
  std::vector<ExprId> work = {e};
  while (!work.empty()) {
    const ExprId x = work.back();
    work.pop_back();
    if (x == kNoExpr || !seen.insert(x).second) continue;
    const ExprNode& n = exprs[static_cast<size_t>(x)];
    if (n.op == ExprOp::Load || n.op == ExprOp::ReduceValue) return std::nullopt;
    if (n.op == ExprOp::Var) vars.insert(x);
    work.insert(work.end(), {n.a, n.b, n.c});
  }
  return vars;
}

}  // namespace nnc::kir
