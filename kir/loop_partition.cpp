#include "kir/loop_partition.h"

#include <algorithm>
#include <optional>
#include <unordered_map>

#include "kir/affine.h"

namespace nnc::kir {

namespace {

using Int = __int128;  // bounds of sums of int64 products: no overflow to guard

Int floorDiv(Int a, Int b) { return a / b - ((a % b != 0) && ((a < 0) != (b < 0))); }
Int ceilDiv(Int a, Int b) { return -floorDiv(-a, b); }

// A half-line of the innermost variable j: j >= bound (atLeast) or j <= bound.
struct HalfLine {
  bool atLeast;
  Int bound;
  bool contains(Int j) const { return atLeast ? j >= bound : j <= bound; }
  Int breakpoint() const { return atLeast ? bound : bound + 1; }  // first j on the other side
};

// A test whose value is known on a half-line each way: `whenTrue` where it is true for every value
// of the other variables, `whenFalse` where it is false for every one.
struct Test {
  ExprId expr;
  HalfLine whenTrue, whenFalse;
};

// { j : c * j + k <= 0 } (lessEqual) or { j : c * j + k >= 0 }, c != 0.
HalfLine solve(Int c, Int k, bool lessEqual) {
  if (c < 0) {
    c = -c;
    k = -k;
    lessEqual = !lessEqual;
  }
  // c * j <= -k  <=>  j <= floor(-k / c);  c * j >= -k  <=>  j >= ceil(-k / c)
  return lessEqual ? HalfLine{false, floorDiv(-k, c)} : HalfLine{true, ceilDiv(-k, c)};
}

std::optional<Test> analyse(const Kernel& k, ExprId e, ExprId j, const std::unordered_map<ExprId, int64_t>& ranged,
                            const std::map<ExprId, ExprId>& substitute) {
  const ExprNode& n = k.exprs[e];
  const bool compare = n.op == ExprOp::Lt || n.op == ExprOp::Le || n.op == ExprOp::Gt || n.op == ExprOp::Ge;
  const bool minMax = (n.op == ExprOp::Min || n.op == ExprOp::Max) && n.dtype == DType::I64;
  if (!compare && !minMax) return std::nullopt;
  std::optional<AffineForm> a = affineForm(k.exprs, n.a, &substitute), b = affineForm(k.exprs, n.b, &substitute);
  if (!a || !b) return std::nullopt;
  // d = a - b = cj * j + constant + sum over ranged vars, bounded by [lo, hi] besides cj * j.
  Int cj = 0, lo = Int(a->constant) - b->constant, hi = lo;
  std::map<ExprId, Int> d;
  for (const auto& [term, coef] : a->terms) d[term] += coef;
  for (const auto& [term, coef] : b->terms) d[term] -= coef;
  for (const auto& [term, coef] : d) {
    if (coef == 0) continue;
    if (term == j) {
      cj = coef;
      continue;
    }
    auto extent = ranged.find(term);
    if (extent == ranged.end() || extent->second < 1) return std::nullopt;  // an outer var: unknown here
    const Int span = coef * Int(extent->second - 1);
    (span < 0 ? lo : hi) += span;
  }
  if (cj == 0) return std::nullopt;
  // dMax(j) = cj*j + hi <= t  and  dMin(j) = cj*j + lo >= t, for the thresholds of each op.
  auto below = [&](Int t) { return solve(cj, hi - t, true); };   // d <= t for all others
  auto above = [&](Int t) { return solve(cj, lo - t, false); };  // d >= t for all others
  switch (n.op) {
    case ExprOp::Lt: return Test{e, below(-1), above(0)};
    case ExprOp::Le: return Test{e, below(0), above(1)};
    case ExprOp::Gt: return Test{e, above(1), below(0)};
    case ExprOp::Ge: return Test{e, above(0), below(-1)};
    case ExprOp::Min: return Test{e, below(0), above(0)};  // min(a, b) == a when a - b <= 0
    default: return Test{e, above(0), below(0)};           // max(a, b) == a when a - b >= 0
  }
}

// The facts of the piece [first, last] of j, adding to `cuts` the breakpoints of the tests seen.
// Expressions are visited in id order, operands before users (the builder appends), so a clamp
// folded here is substituted into the tests built on it: max(min(x, W - 1), 0) is analysed as
// max(x, 0) where min(x, W - 1) == x.
std::map<ExprId, bool> pieceFacts(const Kernel& kernel, ExprId j, const std::unordered_map<ExprId, int64_t>& ranged,
                                  Int first, Int last, Int extent, std::vector<Int>& cuts) {
  std::map<ExprId, bool> facts;
  std::map<ExprId, ExprId> substitute;
  for (ExprId e = 0; e < static_cast<ExprId>(kernel.exprs.size()); ++e) {
    std::optional<Test> t = analyse(kernel, e, j, ranged, substitute);
    if (!t) continue;
    for (const HalfLine& h : {t->whenTrue, t->whenFalse})
      if (h.breakpoint() > 0 && h.breakpoint() < extent) cuts.push_back(h.breakpoint());
    bool holds;
    if (t->whenTrue.contains(first) && t->whenTrue.contains(last))
      holds = true;
    else if (t->whenFalse.contains(first) && t->whenFalse.contains(last))
      holds = false;
    else
      continue;
    facts[e] = holds;
    const ExprNode& n = kernel.exprs[e];
    if (n.op == ExprOp::Min || n.op == ExprOp::Max) substitute[e] = holds ? n.a : n.b;
  }
  return facts;
}

}  // namespace

std::vector<LoopPiece> partitionInnermostLoop(const Kernel& kernel, size_t maxPieces) {
  if (kernel.outer.vars.empty() || kernel.as<Contraction>()) return {};
  const ExprId j = kernel.outer.vars.back();
  const int64_t extent = kernel.outer.extents.back();
  if (extent < 2) return {};
  std::unordered_map<ExprId, int64_t> ranged;
  for (const Reduction& r : kernel.reductions)
    for (size_t i = 0; i < r.loop.vars.size(); ++i) ranged[r.loop.vars[i]] = r.loop.extents[i];
  for (size_t i = 0; i < kernel.inner.vars.size(); ++i) ranged[kernel.inner.vars[i]] = kernel.inner.extents[i];

  // Cut at every test's breakpoints, then again at those of the tests a folded clamp exposes,
  // until no new cut appears (nested clamps are rarely deeper than two).
  std::vector<Int> cuts = {0, extent};
  std::vector<LoopPiece> pieces;
  for (int round = 0; round < 4; ++round) {
    std::vector<Int> found;
    pieces.clear();
    for (size_t i = 0; i + 1 < cuts.size(); ++i) {
      LoopPiece piece{static_cast<int64_t>(cuts[i]), static_cast<int64_t>(cuts[i + 1]), {}};
      piece.facts = pieceFacts(kernel, j, ranged, cuts[i], cuts[i + 1] - 1, extent, found);
      pieces.push_back(std::move(piece));
    }
    const size_t before = cuts.size();
    cuts.insert(cuts.end(), found.begin(), found.end());
    std::sort(cuts.begin(), cuts.end());
    cuts.erase(std::unique(cuts.begin(), cuts.end()), cuts.end());
    if (cuts.size() == before) break;
    if (cuts.size() > 4 * maxPieces + 1) return {};  // too many to merge back below maxPieces
  }
  std::vector<LoopPiece> merged;
  bool anyFact = false;
  for (LoopPiece& piece : pieces) {
    anyFact |= !piece.facts.empty();
    if (!merged.empty() && merged.back().facts == piece.facts)
      merged.back().end = piece.end;
    else
      merged.push_back(std::move(piece));
  }
  if (!anyFact || merged.size() > maxPieces) return {};
  int64_t longest = 0;
  for (const LoopPiece& piece : merged) longest = std::max(longest, piece.end - piece.begin);
  if (longest < kMinVectorPiece) return {};
  return merged;
}

std::optional<RowInterior> rowInterior(const Kernel& kernel) {
  const size_t rank = kernel.outer.vars.size();
  if (rank < 2 || kernel.as<Contraction>()) return std::nullopt;
  std::unordered_map<ExprId, int64_t> ranged;
  for (const Reduction& r : kernel.reductions)
    for (size_t i = 0; i < r.loop.vars.size(); ++i) ranged[r.loop.vars[i]] = r.loop.extents[i];
  for (size_t i = 0; i < kernel.inner.vars.size(); ++i) ranged[kernel.inner.vars[i]] = kernel.inner.extents[i];
  std::vector<Int> lo(rank - 1, 0), hi(rank - 1);  // the box, inclusive
  for (size_t d = 0; d + 1 < rank; ++d) hi[d] = kernel.outer.extents[d] - 1;
  RowInterior interior;
  std::map<ExprId, ExprId> substitute;
  for (ExprId e = 0; e < static_cast<ExprId>(kernel.exprs.size()); ++e) {
    for (size_t d = 0; d + 1 < rank; ++d) {
      const int64_t extent = kernel.outer.extents[d];
      if (extent < 2) continue;
      std::optional<Test> t = analyse(kernel, e, kernel.outer.vars[d], ranged, substitute);
      if (!t) continue;
      const Int centre = extent / 2;
      const bool holds = t->whenTrue.contains(centre);
      if (!holds && !t->whenFalse.contains(centre)) break;  // mixed at the centre: no fact
      const HalfLine& side = holds ? t->whenTrue : t->whenFalse;
      if (side.atLeast)
        lo[d] = std::max(lo[d], side.bound);
      else
        hi[d] = std::min(hi[d], side.bound);
      interior.facts[e] = holds;
      const ExprNode& n = kernel.exprs[e];
      if (n.op == ExprOp::Min || n.op == ExprOp::Max) substitute[e] = holds ? n.a : n.b;
      break;  // a test depends on one outer variable at most (analyse refuses the others)
    }
  }
  if (interior.facts.empty()) return std::nullopt;
  double share = 1.0;
  for (size_t d = 0; d + 1 < rank; ++d) {
    const int64_t extent = kernel.outer.extents[d];
    if (lo[d] > hi[d]) return std::nullopt;
    share *= static_cast<double>(hi[d] - lo[d] + 1) / static_cast<double>(extent);
    if (lo[d] > 0 || hi[d] < extent - 1)
      interior.ranges.push_back({d, static_cast<int64_t>(lo[d]), static_cast<int64_t>(hi[d] + 1)});
  }
  if (share < 0.5) return std::nullopt;
  return interior;
}

}  // namespace nnc::kir
