#include "targets/cpu/stash.h"

#include <functional>
#include <map>
#include <set>

namespace nnc::kir {

namespace {

bool expensive(ExprOp op) {
  switch (op) {
    case ExprOp::Exp:
    case ExprOp::Log:
    case ExprOp::Div:
    case ExprOp::Sqrt:
    case ExprOp::Pow:
    case ExprOp::Tanh:
    case ExprOp::Erf:
    case ExprOp::Sin:
    case ExprOp::Cos: return true;
    default: return false;
  }
}

class Stasher {
 public:
  explicit Stasher(Kernel& k) : k_(k) {}

  bool run() {
    if (!k_.isLoopNest() || k_.inner.extents.empty()) return false;
    const Store* store = nullptr;
    for (const Store& s : k_.stores) {
      if (!s.perInner) continue;
      if (store) return false;
      store = &s;
    }
    if (!store) return false;
    const Param& out = k_.params[static_cast<size_t>(store->slot)];
    const DType t = k_.expr(store->value).dtype;
    if (!out.isOutput || out.dtype != t || (t != DType::F32 && t != DType::F64) || readsSlot(store->slot)) return false;
    for (Reduction& r : k_.reductions) {
      if (r.op == ReduceOp::ArgMax || r.op == ReduceOp::ArgMin || r.loop.extents != k_.inner.extents ||
          k_.expr(r.body).dtype != t || !containsExpensive(r.body))
        continue;
      varMap_.clear();
      for (size_t i = 0; i < r.loop.vars.size(); ++i) varMap_[r.loop.vars[i]] = k_.inner.vars[i];
      same_.clear();
      const ExprId found = findInValue(r.body, store->value);
      if (found == kNoExpr) continue;
      // The inner loop reads the stashed element back; the reduction writes it at the same place.
      ExprNode load{ExprOp::Load, t};
      load.a = store->index;
      load.slot = store->slot;
      const ExprId loaded = append(load);
      const int32_t slot = store->slot;
      const ExprId index = store->index;
      const ExprId value = substitute(store->value, {{found, loaded}});
      std::map<ExprId, ExprId> toReductionVars;
      for (size_t i = 0; i < r.loop.vars.size(); ++i) toReductionVars[k_.inner.vars[i]] = r.loop.vars[i];
      const ExprId stashIndex = substitute(index, toReductionVars);
      for (Store& s : k_.stores)
        if (s.perInner) s.value = value;
      r.stashSlot = slot;
      r.stashIndex = stashIndex;
      return true;
    }
    return false;
  }

 private:
  bool readsSlot(int32_t slot) const {
    for (const ExprNode& n : k_.exprs)
      if (n.op == ExprOp::Load && n.slot == slot) return true;
    return false;
  }

  bool containsExpensive(ExprId root) const {
    std::set<ExprId> seen;
    std::function<bool(ExprId)> walk = [&](ExprId e) {
      if (e == kNoExpr || !seen.insert(e).second) return false;
      const ExprNode& n = k_.expr(e);
      return expensive(n.op) || walk(n.a) || walk(n.b) || walk(n.c);
    };
    return walk(root);
  }

  // Whether `a` (over the reduction's variables) computes what `b` (over the inner ones) does.
  bool sameUnderVarMap(ExprId a, ExprId b) {
    if (a == b) return a == kNoExpr || !usesMappedVar(a);
    if (a == kNoExpr || b == kNoExpr) return false;
    const auto key = std::make_pair(a, b);
    if (auto it = same_.find(key); it != same_.end()) return it->second;
    const ExprNode& x = k_.expr(a);
    const ExprNode& y = k_.expr(b);
    bool same;
    if (x.op == ExprOp::Var) {
      auto it = varMap_.find(a);
      same = it != varMap_.end() && it->second == b;
    } else {
      same = x.op == y.op && x.dtype == y.dtype && x.ival == y.ival && x.fval == y.fval && x.slot == y.slot &&
             sameUnderVarMap(x.a, y.a) && sameUnderVarMap(x.b, y.b) && sameUnderVarMap(x.c, y.c);
    }
    same_[key] = same;
    return same;
  }

  bool usesMappedVar(ExprId e) {
    if (e == kNoExpr) return false;
    if (auto it = usesVar_.find(e); it != usesVar_.end()) return it->second;
    const ExprNode& n = k_.expr(e);
    const bool uses =
        (n.op == ExprOp::Var && varMap_.count(e)) || usesMappedVar(n.a) || usesMappedVar(n.b) || usesMappedVar(n.c);
    usesVar_[e] = uses;
    return uses;
  }

  // The node of `value`'s DAG that computes `body` at the inner point, or kNoExpr.
  ExprId findInValue(ExprId body, ExprId value) {
    usesVar_.clear();
    std::set<ExprId> seen;
    std::function<ExprId(ExprId)> walk = [&](ExprId e) -> ExprId {
      if (e == kNoExpr || !seen.insert(e).second) return kNoExpr;
      if (sameUnderVarMap(body, e)) return e;
      const ExprNode n = k_.expr(e);
      for (ExprId child : {n.a, n.b, n.c})
        if (ExprId f = walk(child); f != kNoExpr) return f;
      return kNoExpr;
    };
    return walk(value);
  }

  ExprId append(const ExprNode& n) {
    k_.exprs.push_back(n);
    return static_cast<ExprId>(k_.exprs.size() - 1);
  }

  // `e` with the nodes of `replace` replaced (a copy of each node above them).
  ExprId substitute(ExprId e, const std::map<ExprId, ExprId>& replace) {
    std::map<ExprId, ExprId> memo;
    std::function<ExprId(ExprId)> walk = [&](ExprId id) -> ExprId {
      if (id == kNoExpr) return kNoExpr;
      if (auto it = replace.find(id); it != replace.end()) return it->second;
      if (auto it = memo.find(id); it != memo.end()) return it->second;
      ExprNode n = k_.expr(id);
      const ExprId a = walk(n.a), b = walk(n.b), c = walk(n.c);
      ExprId result = id;
      if (a != n.a || b != n.b || c != n.c) {
        n.a = a;
        n.b = b;
        n.c = c;
        result = append(n);
      }
      memo[id] = result;
      return result;
    };
    return walk(e);
  }

  Kernel& k_;
  std::map<ExprId, ExprId> varMap_;  // reduction var -> inner var
  std::map<std::pair<ExprId, ExprId>, bool> same_;
  std::map<ExprId, bool> usesVar_;
};

}  // namespace

bool stashReductionBodies(Kernel& kernel) { return Stasher(kernel).run(); }

}  // namespace nnc::kir
