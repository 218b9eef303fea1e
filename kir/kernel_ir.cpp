// KernelBuilder: hash-consed construction of kernel IR with light integer folding, and the dump.
#include "kir/kernel_ir.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <numeric>
#include <sstream>

#include "kir/affine.h"
#include "nnc/status.h"
#include "nnc/tensor.h"

namespace nnc::kir {

namespace {

struct ExprOpInfo {
  const char* name;
  int arity;
};

constexpr ExprOpInfo kExprOpInfo[] = {
#define NNC_EXPR_OP(e, name, arity) {name, arity},
#include "kir/expr_ops.def"
#undef NNC_EXPR_OP
};

bool isComparison(ExprOp op) {
  return op == ExprOp::Eq || op == ExprOp::Ne || op == ExprOp::Lt || op == ExprOp::Le || op == ExprOp::Gt ||
         op == ExprOp::Ge;
}

// Wraps v to the width of integer type t (two's complement), as the targets do.
int64_t wrapInt(DType t, int64_t v) {
  switch (t) {
    case DType::I8: return static_cast<int8_t>(v);
    case DType::U8: return static_cast<uint8_t>(v);
    case DType::I16: return static_cast<int16_t>(v);
    case DType::U16: return static_cast<uint16_t>(v);
    case DType::I32: return static_cast<int32_t>(v);
    case DType::U32: return static_cast<uint32_t>(v);
    case DType::Bool: return v != 0;
    default: return v;
  }
}

int64_t floorDiv(int64_t a, int64_t b) {
  if (b == -1) return static_cast<int64_t>(0 - static_cast<uint64_t>(a));  // INT64_MIN / -1 wraps
  int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}

}  // namespace

const char* exprOpName(ExprOp op) { return kExprOpInfo[static_cast<int>(op)].name; }
int exprOpArity(ExprOp op) { return kExprOpInfo[static_cast<int>(op)].arity; }

const char* reduceOpName(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum: return "sum";
    case ReduceOp::Prod: return "prod";
    case ReduceOp::Max: return "max";
    case ReduceOp::Min: return "min";
    case ReduceOp::ArgMax: return "argmax";
    case ReduceOp::ArgMin: return "argmin";
  }
  return "?";
}

bool ExprNode::operator==(const ExprNode& o) const {
  return op == o.op && dtype == o.dtype && a == o.a && b == o.b && c == o.c && ival == o.ival &&
         std::bit_cast<uint64_t>(fval) == std::bit_cast<uint64_t>(o.fval) && slot == o.slot;
}

size_t KernelBuilder::NodeHash::operator()(const ExprNode& n) const {
  uint64_t h = static_cast<uint64_t>(n.op) * 0x9E3779B97F4A7C15ull;
  auto mix = [&h](uint64_t v) { h ^= v + 0x9E3779B97F4A7C15ull + (h << 6) + (h >> 2); };
  mix(static_cast<uint64_t>(n.dtype));
  mix(static_cast<uint64_t>(n.a));
  mix(static_cast<uint64_t>(n.b));
  mix(static_cast<uint64_t>(n.c));
  mix(static_cast<uint64_t>(n.ival));
  mix(std::bit_cast<uint64_t>(n.fval));
  mix(static_cast<uint64_t>(n.slot));
  return h;
}

bool Kernel::writesNothing() const {
  for (const Store& s : stores)
    if (params[s.slot].numel != 0) return false;
  return true;
}

int64_t Kernel::workPerOuterPoint() const {
  int64_t perPoint = inner.size();
  for (const Reduction& r : reductions)
    if (__builtin_add_overflow(perPoint, r.loop.size(), &perPoint)) return INT64_MAX;
  return std::max<int64_t>(1, perPoint);
}

int64_t Kernel::work() const {
  if (writesNothing()) return 0;
  int64_t total = 0;
  return __builtin_mul_overflow(outer.size(), workPerOuterPoint(), &total) ? INT64_MAX : total;
}

int64_t Loop::size() const {
  // A zero extent first: an empty tensor may have other dims of up to 2^40 whose product overflows
  // (found by fuzz_shape_inference). Loops follow tensor dims, so without a zero the product is at
  // most 2^40; saturate anyway rather than overflow.
  for (int64_t e : extents)
    if (e == 0) return 0;
  int64_t n = 1;
  for (int64_t e : extents)
    if (__builtin_mul_overflow(n, e, &n)) return INT64_MAX;
  return n;
}

KernelBuilder::KernelBuilder(std::string name) { kernel_.name = std::move(name); }

int KernelBuilder::addParam(std::string name, DType storage, int64_t numel, bool isOutput) {
  kernel_.params.push_back({std::move(name), storage, numel, isOutput});
  return static_cast<int>(kernel_.params.size()) - 1;
}

ExprId KernelBuilder::intern(const ExprNode& n) {
  NNC_CHECK(n.dtype != DType::F16 && n.dtype != DType::BF16, "kernel IR expression typed f16/bf16");
  auto it = interned_.find(n);
  if (it != interned_.end()) return it->second;
  kernel_.exprs.push_back(n);
  ExprId id = static_cast<ExprId>(kernel_.exprs.size()) - 1;
  interned_.emplace(n, id);
  return id;
}

ExprId KernelBuilder::constant(DType t, double v) {
  if (isHalfLike(t)) t = DType::F32;
  ExprNode n{ExprOp::Const, t};
  if (t == DType::F32) {
    n.fval = static_cast<double>(static_cast<float>(v));
  } else if (t == DType::F64) {
    n.fval = v;
  } else if (t == DType::Bool) {
    n.ival = v != 0 ? 1 : 0;
  } else {
    // The one float-to-integer rule (Tensor::setDouble: truncate, saturate at the type's range,
    // NaN -> 0): a plain cast is undefined for NaN or out-of-range values (a fuzzer finding: a Pad of
    // integers with a NaN constant_value).
    Tensor scalar(t, Shape{});
    scalar.setDouble(0, v);
    n.ival = scalar.getInt(0);
  }
  return intern(n);
}

ExprId KernelBuilder::constantInt(DType t, int64_t v) {
  if (isFloat(t)) return constant(t, static_cast<double>(v));
  ExprNode n{ExprOp::Const, t};
  n.ival = wrapInt(t, v);
  return intern(n);
}

ExprId KernelBuilder::load(int slot, ExprId flatIndex) {
  NNC_CHECK(slot >= 0 && slot < static_cast<int>(kernel_.params.size()), "load from unknown param slot");
  NNC_CHECK(dtypeOf(flatIndex) == DType::I64, "load index must be i64");
  DType t = kernel_.params[slot].dtype;
  ExprNode n{ExprOp::Load, isHalfLike(t) ? DType::F32 : t};
  n.a = flatIndex;
  n.slot = slot;
  return intern(n);
}

bool KernelBuilder::isConstInt(ExprId e, int64_t* value) const {
  const ExprNode& n = kernel_.exprs[e];
  if (n.op != ExprOp::Const || isFloat(n.dtype)) return false;
  if (value) *value = n.ival;
  return true;
}

ExprId KernelBuilder::unary(ExprOp op, ExprId a) {
  NNC_CHECK(exprOpArity(op) == 1 && op != ExprOp::Load && op != ExprOp::Cast, "unary() given a non-unary op");
  DType t = dtypeOf(a);
  if (op == ExprOp::IsNaN || op == ExprOp::IsInf) {
    NNC_CHECK(isFloat(t), "isnan/isinf need a float operand");
    t = DType::Bool;
  }
  if (op == ExprOp::Not) NNC_CHECK(t == DType::Bool, "not needs a bool operand");
  int64_t v;
  if (op == ExprOp::Neg && isConstInt(a, &v) && t != DType::Bool) return constantInt(t, -v);
  ExprNode n{op, t};
  n.a = a;
  return intern(n);
}

ExprId KernelBuilder::expOfNonPositive(ExprId a) {
  NNC_CHECK(isFloat(dtypeOf(a)), "exp needs a float operand");
  ExprNode n{ExprOp::Exp, dtypeOf(a)};
  n.a = a;
  n.ival = kExpOfNonPositive;
  return intern(n);
}

ExprId KernelBuilder::isInf(ExprId a, bool detectPositive, bool detectNegative) {
  NNC_CHECK(isFloat(dtypeOf(a)), "isinf needs a float operand");
  ExprNode n{ExprOp::IsInf, DType::Bool};
  n.a = a;
  n.ival = (detectPositive ? 1 : 0) | (detectNegative ? 2 : 0);
  return intern(n);
}

ExprId KernelBuilder::binary(ExprOp op, ExprId a, ExprId b) {
  NNC_CHECK(exprOpArity(op) == 2, "binary() given a non-binary op");
  DType t = dtypeOf(a);
  NNC_CHECK(t == dtypeOf(b), std::string("operand dtypes differ in ") + exprOpName(op) + ": " +
                                 std::string(dtypeName(t)) + " vs " + std::string(dtypeName(dtypeOf(b))));
  DType resultType = isComparison(op) ? DType::Bool : t;
  // pow(x, 2) as x * x: the correctly rounded square (libm's powf is within an ulp of it), and a
  // decomposed LayerNorm's variance squares millions of elements: no libm call per element.
  if (op == ExprOp::Pow && isFloat(t) && kernel_.exprs[b].op == ExprOp::Const) {
    if (kernel_.exprs[b].fval == 2.0) return binary(ExprOp::Mul, a, a);
    if (kernel_.exprs[b].fval == 1.0) return a;
  }
  int64_t x = 0, y = 0;
  bool ca = isConstInt(a, &x), cb = isConstInt(b, &y);
  if (!isFloat(t) && t != DType::Bool && t != DType::U64) {
    // Integer folding and identities keep index arithmetic small.
    if (ca && cb) {
      switch (op) {
        case ExprOp::Add: return constantInt(t, x + y);
        case ExprOp::Sub: return constantInt(t, x - y);
        case ExprOp::Mul: return constantInt(t, x * y);
        case ExprOp::Div: return constantInt(t, y == 0 ? 0 : x / y);
        case ExprOp::FloorDiv: return constantInt(t, y == 0 ? 0 : floorDiv(x, y));
        case ExprOp::Rem: return constantInt(t, y == 0 ? 0 : x % y);
        case ExprOp::FloorMod: return constantInt(t, y == 0 ? 0 : x - floorDiv(x, y) * y);
        case ExprOp::Min: return constantInt(t, std::min(x, y));
        case ExprOp::Max: return constantInt(t, std::max(x, y));
        case ExprOp::Eq: return boolean(x == y);
        case ExprOp::Ne: return boolean(x != y);
        case ExprOp::Lt: return boolean(x < y);
        case ExprOp::Le: return boolean(x <= y);
        case ExprOp::Gt: return boolean(x > y);
        case ExprOp::Ge: return boolean(x >= y);
        default: break;
      }
    }
    if (op == ExprOp::Add && ca && x == 0) return b;
    if ((op == ExprOp::Add || op == ExprOp::Sub) && cb && y == 0) return a;
    if (op == ExprOp::Mul && ((ca && x == 0) || (cb && y == 0))) return constantInt(t, 0);
    if (op == ExprOp::Mul && ca && x == 1) return b;
    if ((op == ExprOp::Mul || op == ExprOp::Div || op == ExprOp::FloorDiv) && cb && y == 1) return a;
    if ((op == ExprOp::FloorMod || op == ExprOp::Rem) && cb && y == 1) return constantInt(t, 0);
    if ((op == ExprOp::FloorDiv || op == ExprOp::FloorMod) && t == DType::I64 && cb && y > 1 && !ca) {
      if (ExprId simplified = simplifyDivMod(op, a, y); simplified != kNoExpr) return simplified;
    }
  }
  if (t == DType::Bool && ca && cb) {
    if (op == ExprOp::And) return boolean(x && y);
    if (op == ExprOp::Or) return boolean(x || y);
  }
  if (t == DType::Bool && op == ExprOp::And) {
    if (ca) return x ? b : boolean(false);
    if (cb) return y ? a : boolean(false);
  }
  ExprNode n{op, resultType};
  n.a = a;
  n.b = b;
  const ExprId id = intern(n);
  // The range of an unsimplified div/mod by a constant, so that a later div/mod of it can fold
  // (floormod(floordiv(pixel, 112), 112) is floordiv(pixel, 112) when pixel < 112 * 112).
  if ((op == ExprOp::FloorDiv || op == ExprOp::FloorMod) && t == DType::I64 && cb && y > 1 && !ca) {
    if (op == ExprOp::FloorMod) {
      termExtent_.emplace(id, y);
    } else if (std::optional<std::pair<int64_t, int64_t>> r = rangeOf(a); r && r->first >= 0) {
      termExtent_.emplace(id, r->second / y + 1);
    }
  }
  return id;
}

std::optional<std::pair<int64_t, int64_t>> KernelBuilder::rangeOf(ExprId e) const {
  std::optional<AffineForm> form = affineForm(kernel_.exprs, e);
  if (!form) return std::nullopt;
  return termsRange(form->terms, form->constant, 0);
}

std::optional<std::pair<int64_t, int64_t>> KernelBuilder::termsRange(const std::map<ExprId, int64_t>& terms,
                                                                     int64_t constant, int64_t skipMultiplesOf) const {
  int64_t lo = constant, hi = constant;
  for (const auto& [term, coef] : terms) {
    if (skipMultiplesOf != 0 && coef % skipMultiplesOf == 0) continue;
    auto extent = termExtent_.find(term);
    int64_t span = 0;
    if (extent == termExtent_.end() || extent->second < 1 || __builtin_mul_overflow(coef, extent->second - 1, &span) ||
        __builtin_add_overflow(span < 0 ? lo : hi, span, span < 0 ? &lo : &hi))
      return std::nullopt;
  }
  return std::make_pair(lo, hi);
}

ExprId KernelBuilder::select(ExprId cond, ExprId thenValue, ExprId elseValue) {
  NNC_CHECK(dtypeOf(cond) == DType::Bool, "select condition must be bool");
  NNC_CHECK(dtypeOf(thenValue) == dtypeOf(elseValue), "select branches must have one dtype");
  int64_t c;
  if (isConstInt(cond, &c)) return c ? thenValue : elseValue;
  if (thenValue == elseValue) return thenValue;
  ExprNode n{ExprOp::Select, dtypeOf(thenValue)};
  n.a = cond;
  n.b = thenValue;
  n.c = elseValue;
  return intern(n);
}

ExprId KernelBuilder::cast(DType to, ExprId a) {
  if (isHalfLike(to)) {
    ExprId f = cast(DType::F32, a);
    return unary(to == DType::F16 ? ExprOp::RoundToF16 : ExprOp::RoundToBF16, f);
  }
  DType from = dtypeOf(a);
  if (from == to) return a;
  int64_t v;
  if (isConstInt(a, &v) && !isFloat(to) && from != DType::U64 && to != DType::Bool) return constantInt(to, v);
  ExprNode n{ExprOp::Cast, to};
  n.a = a;
  return intern(n);
}

ExprId KernelBuilder::clamp(ExprId x, int64_t lo, int64_t hi) {
  return binary(ExprOp::Max, binary(ExprOp::Min, x, i64(hi)), i64(lo));
}

ExprId KernelBuilder::flatIndex(std::span<const ExprId> index, const Shape& shape) {
  NNC_CHECK(static_cast<int>(index.size()) == shape.rank(), "flatIndex: index rank differs from shape rank");
  // Re-flattening what unflatten() made for the same shape gives the flat index back (a Reshape of
  // a Reshape, or of a value read from memory, then costs no div/mod and stays affine).
  auto roundTrip = unflattened_.find({std::vector<ExprId>(index.begin(), index.end()), shape.dims()});
  if (roundTrip != unflattened_.end()) return roundTrip->second;
  // Wrapping, as Shape::strides: past a zero dim (an empty tensor) strides are meaningless and may
  // exceed int64; such an index is never evaluated.
  std::vector<int64_t> strides(shape.rank());
  uint64_t stride = 1;
  for (int d = shape.rank() - 1; d >= 0; --d) {
    strides[d] = static_cast<int64_t>(stride);
    stride *= static_cast<uint64_t>(shape[d]);
  }
  // (term, stride) per non-unit dim, or per run of dims that one unflatten() made (a flat reduction
  // variable over a pool's H x W): that run is its flat index times the stride of its last dim.
  std::vector<std::pair<ExprId, int64_t>> terms;
  for (int d = 0; d < shape.rank();) {
    if (shape[d] == 1) {
      ++d;
      continue;
    }
    int runLength = 1;
    ExprId term = index[d];
    auto [first, last] = unflattenedRuns_.equal_range(index[d]);
    for (auto it = first; it != last; ++it) {
      const UnflattenedRun& run = it->second;
      const auto length = static_cast<int>(run.dims.size());
      if (d + length > shape.rank() || !std::equal(run.index.begin(), run.index.end(), index.begin() + d) ||
          !std::equal(run.dims.begin(), run.dims.end(), shape.dims().begin() + d))
        continue;
      runLength = length;
      term = run.flat;
      break;
    }
    terms.emplace_back(term, strides[d + runLength - 1]);
    d += runLength;
  }
  ExprId flat = i64(0);
  for (auto it = terms.rbegin(); it != terms.rend(); ++it) flat = add(flat, mul(it->first, i64(it->second)));
  return flat;
}

std::vector<ExprId> KernelBuilder::unflatten(ExprId flat, const Shape& shape) {
  std::vector<ExprId> index(shape.rank());
  std::vector<int64_t> strides = shape.strides();
  for (int d = 0; d < shape.rank(); ++d) {
    if (shape[d] == 1) {
      index[d] = i64(0);
      continue;
    }
    ExprId q = binary(ExprOp::FloorDiv, flat, i64(strides[d]));
    index[d] = d == 0 ? q : binary(ExprOp::FloorMod, q, i64(shape[d]));
  }
  unflattened_.emplace(std::make_pair(index, shape.dims()), flat);
  const auto firstNonUnit = std::find_if(shape.dims().begin(), shape.dims().end(), [](int64_t n) { return n != 1; });
  if (std::count_if(firstNonUnit, shape.dims().end(), [](int64_t n) { return n != 1; }) >= 2) {
    const auto at = firstNonUnit - shape.dims().begin();
    unflattenedRuns_.emplace(index[at], UnflattenedRun{std::vector<ExprId>(index.begin() + at, index.end()),
                                                       std::vector<int64_t>(firstNonUnit, shape.dims().end()), flat});
  }
  return index;
}

ExprId KernelBuilder::newVar(int64_t extent) {
  ExprNode n{ExprOp::Var, DType::I64};
  n.ival = nextVar_++;
  const ExprId v = intern(n);
  termExtent_[v] = extent;
  return v;
}

ExprId KernelBuilder::simplifyDivMod(ExprOp op, ExprId a, int64_t divisor) {
  // a as constant + sum(coefficient * term); terms are any subexpressions.
  std::optional<AffineForm> form = affineForm(kernel_.exprs, a);
  if (!form || form->terms.size() > 16) return kNoExpr;
  const int64_t constant = form->constant;
  const std::map<ExprId, int64_t>& terms = form->terms;
  // Split into a multiple of the divisor and a remainder part whose range must be [0, divisor).
  const int64_t quotientConstant = floorDiv(constant, divisor);
  const int64_t remainderConstant = constant - quotientConstant * divisor;
  const bool splittable = quotientConstant != 0 || std::any_of(terms.begin(), terms.end(),
                                                               [&](const auto& t) { return t.second % divisor == 0; });
  const std::optional<std::pair<int64_t, int64_t>> remainderRange = termsRange(terms, remainderConstant, divisor);
  const bool inRange = remainderRange && remainderRange->first >= 0 && remainderRange->second < divisor;
  // (the multiples of `factor` divided by it, plus qConstant; the other terms, plus rConstant)
  auto split = [&](int64_t factor, int64_t qConstant, int64_t rConstant) {
    ExprId q = i64(qConstant), r = i64(rConstant);
    for (const auto& [term, coef] : terms) {
      if (coef % factor == 0)
        q = add(q, mul(term, i64(coef / factor)));
      else
        r = add(r, mul(term, i64(coef)));
    }
    return std::make_pair(q, r);
  };
  const bool quotient = op == ExprOp::FloorDiv;
  if (!inRange) {
    // A common factor g of the divisor and the large coefficients, the small terms ranging within
    // [0, g): (g * q + r) / (g * d) = q / d and % (g * d) = (q % d) * g + r, for r in [0, g)
    // ((pixel * 32 + channel) / 3584 with channel < 32 -> pixel / 112).
    for (const auto& [candidate, candidateCoef] : terms) {
      const int64_t g = std::gcd(candidateCoef, divisor);
      if (g <= 1 || g >= divisor) continue;
      const int64_t qConstant = floorDiv(constant, g), rConstant = constant - qConstant * g;
      const std::optional<std::pair<int64_t, int64_t>> small = termsRange(terms, rConstant, g);
      if (!small || small->first < 0 || small->second >= g) continue;
      const auto [q, r] = split(g, qConstant, rConstant);
      const ExprId reduced = binary(op, q, i64(divisor / g));
      return quotient ? reduced : add(mul(reduced, i64(g)), r);
    }
    // Still exact for any integers: (d * q + r) / d = q + r / d and (d * q + r) % d = r % d, which
    // leaves each variable's own div/mod ((v1 * 64 + v3) / 16 with v3 < 64 -> v1 * 4 + v3 / 16): an
    // index separable by variable, as packed contractions read them.
    if (!splittable) return kNoExpr;
    const auto [multiple, rest] = split(divisor, quotientConstant, remainderConstant);
    const ExprId inner = binary(op, rest, i64(divisor));
    return quotient ? add(multiple, inner) : inner;
  }
  ExprId result = i64(quotient ? quotientConstant : remainderConstant);
  for (const auto& [term, coef] : terms) {
    if ((coef % divisor == 0) != quotient) continue;
    result = add(result, mul(term, i64(quotient ? coef / divisor : coef)));
  }
  return result;
}

std::vector<ExprId> KernelBuilder::setOuter(const std::vector<int64_t>& extents) {
  NNC_CHECK(!outerSet_, "outer loop set twice");
  outerSet_ = true;
  kernel_.outer.extents = extents;
  for (size_t i = 0; i < extents.size(); ++i) kernel_.outer.vars.push_back(newVar(extents[i]));
  return kernel_.outer.vars;
}

std::vector<ExprId> KernelBuilder::setInner(const std::vector<int64_t>& extents) {
  NNC_CHECK(kernel_.inner.vars.empty() && kernel_.inner.extents.empty(), "inner loop set twice");
  kernel_.inner.extents = extents;
  for (size_t i = 0; i < extents.size(); ++i) kernel_.inner.vars.push_back(newVar(extents[i]));
  return kernel_.inner.vars;
}

std::vector<ExprId> KernelBuilder::reductionVars(const std::vector<int64_t>& extents) {
  Loop loop;
  loop.extents = extents;
  for (size_t i = 0; i < extents.size(); ++i) loop.vars.push_back(newVar(extents[i]));
  pendingLoops_.push_back({loop, loop.vars});
  return loop.vars;
}

std::vector<ExprId> KernelBuilder::flatReductionVars(const std::vector<int64_t>& extents) {
  const int64_t points = saturatingProduct(extents);
  // An empty loop keeps its dims (a zero dim would make unflatten() divide by a zero stride).
  if (extents.size() < 2 || points == 0 || points == std::numeric_limits<int64_t>::max()) return reductionVars(extents);
  const ExprId flat = newVar(points);
  std::vector<ExprId> index = unflatten(flat, Shape(extents));
  pendingLoops_.push_back({Loop{{points}, {flat}}, index});
  return index;
}

ExprId KernelBuilder::reduce(ReduceOp op, const std::vector<ExprId>& vars, ExprId body, bool selectLastIndex) {
  auto it =
      std::find_if(pendingLoops_.begin(), pendingLoops_.end(), [&](const PendingLoop& l) { return l.index == vars; });
  NNC_CHECK(it != pendingLoops_.end(), "reduce() over vars not made by reductionVars()");
  Reduction r;
  r.op = op;
  r.dtype = (op == ReduceOp::ArgMax || op == ReduceOp::ArgMin) ? DType::I64 : dtypeOf(body);
  r.loop = it->loop;
  r.body = body;
  r.selectLastIndex = selectLastIndex;
  pendingLoops_.erase(it);
  kernel_.reductions.push_back(r);
  ExprNode n{ExprOp::ReduceValue, r.dtype};
  n.ival = static_cast<int64_t>(kernel_.reductions.size()) - 1;
  return intern(n);
}

void KernelBuilder::unrollWindow(ExprId reduced) {
  const ExprNode& n = node(reduced);
  NNC_CHECK(n.op == ExprOp::ReduceValue, "unrollWindow() of a value that is no reduction");
  Reduction& r = kernel_.reductions[static_cast<size_t>(n.ival)];
  r.unroll = r.loop.size() <= kMaxUnrolledWindow;
}

void KernelBuilder::addStore(int slot, ExprId flatIndex, ExprId value, bool perInner) {
  NNC_CHECK(slot >= 0 && slot < static_cast<int>(kernel_.params.size()), "store to unknown param slot");
  NNC_CHECK(kernel_.params[slot].isOutput, "store to an input param");
  NNC_CHECK(dtypeOf(flatIndex) == DType::I64, "store index must be i64");
  kernel_.stores.push_back({slot, flatIndex, value, perInner});
}

Kernel KernelBuilder::finish() {
  if (!outerSet_) setOuter({});
  return std::move(kernel_);
}

std::string Kernel::str() const {
  std::ostringstream os;
  auto loopStr = [&](const Loop& l) {
    std::ostringstream ls;  // a stream, not string +: GCC 12 -Wrestrict false positive at -O3
    ls << "[";
    for (size_t i = 0; i < l.extents.size(); ++i)
      ls << (i ? ", " : "") << "v" << exprs[l.vars[i]].ival << "<" << l.extents[i];
    ls << "]";
    return ls.str();
  };
  os << "kernel " << name << "(";
  for (size_t i = 0; i < params.size(); ++i) {
    if (i) os << ", ";
    os << (params[i].isOutput ? "out " : "") << "%" << i << ":" << dtypeName(params[i].dtype) << "[" << params[i].numel
       << "]";
  }
  os << ") outer " << loopStr(outer) << " {\n";
  for (size_t i = 0; i < exprs.size(); ++i) {
    const ExprNode& n = exprs[i];
    os << "  e" << i << ": " << dtypeName(n.dtype) << " = " << exprOpName(n.op);
    switch (n.op) {
      case ExprOp::Const:
        if (isFloat(n.dtype)) {
          os << " " << n.fval;
        } else {
          os << " " << n.ival;
        }
        break;
      case ExprOp::Var: os << " v" << n.ival; break;
      case ExprOp::Load: os << " %" << n.slot << "[e" << n.a << "]"; break;
      case ExprOp::ReduceValue: os << " r" << n.ival; break;
      default:
        if (n.a >= 0) os << " e" << n.a;
        if (n.b >= 0) os << ", e" << n.b;
        if (n.c >= 0) os << ", e" << n.c;
        if (n.op == ExprOp::IsInf) os << " flags=" << n.ival;
        if (n.op == ExprOp::Exp && n.ival == kExpOfNonPositive) os << " (of a value <= 0)";
    }
    os << "\n";
  }
  for (size_t i = 0; i < reductions.size(); ++i) {
    const Reduction& r = reductions[i];
    os << "  r" << i << " = " << reduceOpName(r.op) << " over " << loopStr(r.loop) << " of e" << r.body
       << (r.selectLastIndex ? " (last)" : "");
    if (r.stashSlot >= 0) os << ", stashed to %" << r.stashSlot << "[e" << r.stashIndex << "]";
    if (r.unroll) os << " (unrolled)";
    os << "\n";
  }
  if (!inner.extents.empty()) os << "  inner " << loopStr(inner) << "\n";
  for (const Store& s : stores) {
    os << "  store" << (s.perInner ? ".inner" : "") << " %" << s.slot << "[e" << s.index << "] = e" << s.value << "\n";
  }
  std::visit(Overloaded{[](const LoopNest&) {}, [&](const auto& k) { os << "  " << k.str() << "\n"; }}, kind);
  os << "}\n";
  return os.str();
}

// The kind's own answer, or a loop nest's from the generic form.
int64_t Kernel::numTasks() const {
  return std::visit(
      Overloaded{[&](const LoopNest&) { return outer.size(); }, [](const auto& k) { return k.numTasks(); }}, kind);
}

int64_t Kernel::workPerTask() const {
  return std::visit(
      Overloaded{[&](const LoopNest&) { return workPerOuterPoint(); }, [](const auto& k) { return k.workPerTask(); }},
      kind);
}

int64_t Kernel::chunkGranule() const {
  return std::visit(
      Overloaded{[](const LoopNest&) { return int64_t{1}; }, [](const auto& k) { return k.chunkGranule(); }}, kind);
}

double Kernel::flops() const {
  return std::visit(Overloaded{[](const LoopNest&) { return 0.0; }, [](const auto& k) { return k.flops(); }}, kind);
}

std::string Kernel::summary() const {
  return std::visit(
      Overloaded{[](const LoopNest&) { return std::string(); }, [](const auto& k) { return k.summary(); }}, kind);
}

int64_t Contraction::workPerTask() const {
  int64_t work = 0;
  if (__builtin_mul_overflow(mc, nc, &work) || __builtin_mul_overflow(work, k, &work)) work = INT64_MAX;
  return std::max<int64_t>(1, work);
}

// A bf16 task's products run several times faster than f32 FMAs, and the row block's pack is a larger
// share of it: one task per chunk (the thread pool's choice for so few tasks) packed A once per task
// (BERT's 128 x 768 x 768 output projection at 2 threads: twice the 1-thread time). Groups of a row
// block's column blocks, as many as leave four groups (two per thread on two cores; the pool uses
// groups only where there are two per thread).
int64_t Contraction::chunkGranule() const {
  if (columnBlocksOuter) return mBlocks();
  if (operands != DType::BF16) return 1;
  const int64_t most = std::max<int64_t>(1, numTasks() / 4);
  int64_t granule = 1;
  for (int64_t g = 1; g <= std::min(most, nBlocks()); ++g)
    if (nBlocks() % g == 0) granule = g;
  return granule;
}

int64_t Contraction::kPadded() const { return (k + kBf16TileK - 1) / kBf16TileK * kBf16TileK; }
int64_t Contraction::kcPadded() const { return (std::min(kc, k) + kBf16TileK - 1) / kBf16TileK * kBf16TileK; }

double Contraction::flops() const {
  return 2.0 * static_cast<double>(batch) * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k);
}

std::string Contraction::summary() const {
  return std::to_string(batch) + "x" + std::to_string(m) + "x" + std::to_string(n) + "x" + std::to_string(k) +
         " tile " + std::to_string(mr) + "x" + std::to_string(nr) + (operands == DType::BF16 ? " bf16" : "");
}

double Attention::flops() const {
  return 2.0 * static_cast<double>(batch) * static_cast<double>(lq) * static_cast<double>(lk) *
         static_cast<double>(d + dv);
}

std::string Attention::summary() const {
  return "attention " + std::to_string(batch) + "x" + std::to_string(lq) + "x" + std::to_string(lk) + " d " +
         std::to_string(d) + "/" + std::to_string(dv);
}

std::string Contraction::str() const {
  std::ostringstream os;
  const char* layout = bLayout == BLayout::Packed ? "packed" : bLayout == BLayout::Direct ? "direct" : "copied";
  os << "contraction batch=" << batch << " m=" << m << " n=" << n << " k=" << k << (transposed ? " transposed" : "")
     << " A=%" << aSlot << " offset=" << aOffset;
  if (aRowIndex != kNoExpr)
    os << " batch-stride=" << aBatchStride << " separable rows=e" << aRowIndex << " cols=e" << aColIndex;
  else
    os << " strides=(" << aBatchStride << ", " << aRowStride << ", " << aColStride << ")";
  os << " B=%" << bSlot << " " << layout;
  if (bLayout != BLayout::Packed)
    os << " offset=" << bOffset << " strides=(" << bBatchStride << ", " << bRowStride << ", " << bColStride << ")";
  os << " tile=" << mr << "x" << nr << " (" << lanes << " lanes) blocks mc=" << mc << " nc=" << nc << " kc=" << kc
     << " tasks=" << numTasks() << (partialsInOutput ? " partials-in-output" : "") << (aPacked ? " A-packed" : "")
     << (rowTilesOuter ? " row-tiles-outer" : "") << (columnBlocksOuter ? " column-blocks-outer" : "")
     << (operands == DType::BF16 ? " operands=bf16" : "");
  if (imageWidth) os << " image-rows=" << imageWidth;
  return os.str();
}

std::string Attention::str() const {
  std::ostringstream os;
  os << "attention batch=" << batch << " lq=" << lq << " lk=" << lk << " d=" << d << " dv=" << dv << " Q=%" << qSlot
     << " Kt=%" << ktSlot << " V=%" << vSlot << " O=%" << oSlot << " dot=e" << dot << " tile=" << mr << "x" << nr
     << " (" << lanes << " lanes) blocks q=" << qBlock << " k=" << kBlock << " tasks=" << numTasks();
  return os.str();
}

std::vector<bool> tileRowCounts(int64_t rows, int64_t blockRows, int64_t mr) {
  std::vector<bool> used(static_cast<size_t>(mr) + 1, false);
  auto block = [&](int64_t blockSize) {
    if (blockSize >= mr) used[static_cast<size_t>(mr)] = true;
    if (blockSize % mr != 0) used[static_cast<size_t>(blockSize % mr)] = true;
  };
  const int64_t blocks = (rows + blockRows - 1) / blockRows;
  if (blocks > 1) block(blockRows);
  if (blocks > 0) block(rows - (blocks - 1) * blockRows);
  return used;
}

}  // namespace nnc::kir
