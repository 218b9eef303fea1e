#include "targets/cpu/stencil_rows.h"

#include <algorithm>
#include <bit>
#include <functional>
#include <map>
#include <set>
#include <tuple>

#include "kir/affine.h"

namespace nnc::kir {

namespace {

constexpr int64_t kMinRowLength = 8, kMaxFactor = 8;

class StencilRowBlocker {
 public:
  explicit StencilRowBlocker(Kernel& k) : k_(k) {
    for (size_t i = 0; i < k_.exprs.size(); ++i) interned_.emplace(key(k_.exprs[i]), static_cast<ExprId>(i));
  }

  int64_t run() {
    const size_t rank = k_.outer.extents.size();
    if (!k_.isLoopNest() || !k_.reductions.empty() || !k_.inner.extents.empty() || rank < 2 || k_.stores.empty())
      return 1;
    if (k_.outer.extents.back() < kMinRowLength) return 1;
    std::set<int32_t> stored;
    for (const Store& s : k_.stores) {
      if (s.perInner) return 1;
      stored.insert(s.slot);
    }
    // The copies' loads run before their stores: nothing may read what the kernel writes.
    for (const ExprNode& n : k_.exprs)
      if (n.op == ExprOp::Load && stored.count(n.slot)) return 1;
    const int64_t width = k_.outer.extents[rank - 2];
    int64_t factor = 1;
    for (int64_t s = kMaxFactor; s >= 2 && factor == 1; --s)
      if (width % s == 0) factor = s;
    if (factor == 1) return 1;

    const ExprId blocked = k_.outer.vars[rank - 2];
    const size_t originalExprs = k_.exprs.size();
    const std::vector<Store> originalStores = k_.stores;
    const std::set<ExprId> before = loadsOf(originalStores, blocked);

    int64_t varNumber = 0;
    for (const ExprNode& n : k_.exprs)
      if (n.op == ExprOp::Var) varNumber = std::max(varNumber, n.ival + 1);
    ExprNode var{ExprOp::Var, DType::I64};
    var.ival = varNumber;
    const ExprId strip = intern(var);

    std::vector<Store> stores;
    for (int64_t j = 0; j < factor; ++j) {
      std::map<ExprId, ExprId> memo;
      AffineForm at;
      at.terms[strip] = factor;
      at.constant = j;
      memo[blocked] = build(at);
      for (const Store& s : originalStores)
        stores.push_back({s.slot, rebuild(s.index, memo), rebuild(s.value, memo), false});
    }
    const std::set<ExprId> after = loadsOf(stores, strip);
    if (before.empty() || 4 * static_cast<int64_t>(after.size()) > 3 * factor * static_cast<int64_t>(before.size())) {
      k_.exprs.resize(originalExprs);  // nothing refers to the new nodes
      return 1;
    }
    k_.stores = std::move(stores);
    k_.outer.extents[rank - 2] = width / factor;
    k_.outer.vars[rank - 2] = strip;
    return factor;
  }

 private:
  using Key = std::tuple<int, int, ExprId, ExprId, ExprId, int64_t, uint64_t, int32_t>;
  static Key key(const ExprNode& n) {
    return {static_cast<int>(n.op),
            static_cast<int>(n.dtype),
            n.a,
            n.b,
            n.c,
            n.ival,
            std::bit_cast<uint64_t>(n.fval),
            n.slot};
  }

  ExprId intern(const ExprNode& n) {
    auto [it, added] = interned_.emplace(key(n), static_cast<ExprId>(k_.exprs.size()));
    if (added) k_.exprs.push_back(n);
    return it->second;
  }

  ExprId constant(int64_t v) {
    ExprNode n{ExprOp::Const, DType::I64};
    n.ival = v;
    return intern(n);
  }

  ExprId binary(ExprOp op, ExprId a, ExprId b) {
    ExprNode n{op, DType::I64};
    n.a = a;
    n.b = b;
    return intern(n);
  }

  // constant + sum(coefficient * term), terms in id order: one expression per affine value.
  ExprId build(const AffineForm& form) {
    ExprId sum = kNoExpr;
    for (const auto& [term, coefficient] : form.terms) {
      const ExprId scaled = coefficient == 1 ? term : binary(ExprOp::Mul, term, constant(coefficient));
      sum = sum == kNoExpr ? scaled : binary(ExprOp::Add, sum, scaled);
    }
    if (sum == kNoExpr) return constant(form.constant);
    return form.constant == 0 ? sum : binary(ExprOp::Add, sum, constant(form.constant));
  }

  // `e` with the memo's replacements, its i64 sums and products in affine normal form.
  ExprId rebuild(ExprId e, std::map<ExprId, ExprId>& memo) {
    if (e == kNoExpr) return kNoExpr;
    if (auto it = memo.find(e); it != memo.end()) return it->second;
    ExprNode n = k_.exprs[static_cast<size_t>(e)];
    n.a = rebuild(n.a, memo);
    n.b = rebuild(n.b, memo);
    n.c = rebuild(n.c, memo);
    ExprId result = intern(n);
    if (n.dtype == DType::I64 && (n.op == ExprOp::Add || n.op == ExprOp::Sub || n.op == ExprOp::Mul)) {
      if (std::optional<AffineForm> form = affineForm(k_.exprs, result)) result = build(*form);
    }
    memo[e] = result;
    return result;
  }

  // The distinct loads the stores read whose index depends on `var`.
  std::set<ExprId> loadsOf(const std::vector<Store>& stores, ExprId var) const {
    std::map<ExprId, bool> dependsOn;
    std::function<bool(ExprId)> depends = [&](ExprId e) -> bool {
      if (e == kNoExpr) return false;
      if (e == var) return true;
      if (auto it = dependsOn.find(e); it != dependsOn.end()) return it->second;
      const ExprNode& n = k_.exprs[static_cast<size_t>(e)];
      const bool d = depends(n.a) || depends(n.b) || depends(n.c);
      dependsOn[e] = d;
      return d;
    };
    std::set<ExprId> loads, seen;
    std::function<void(ExprId)> walk = [&](ExprId e) {
      if (e == kNoExpr || !seen.insert(e).second) return;
      const ExprNode& n = k_.exprs[static_cast<size_t>(e)];
      if (n.op == ExprOp::Load && depends(n.a)) loads.insert(e);
      walk(n.a);
      walk(n.b);
      walk(n.c);
    };
    for (const Store& s : stores) {
      walk(s.index);
      walk(s.value);
    }
    return loads;
  }

  Kernel& k_;
  std::map<Key, ExprId> interned_;
};

}  // namespace

int64_t blockStencilRows(Kernel& kernel) { return StencilRowBlocker(kernel).run(); }

}  // namespace nnc::kir
