// The kernel IR interpreter: evaluates a kernel point by point with plain C++ arithmetic.
// Slow and simple on purpose; it is the executable specification of kir semantics (expr_ops.def).
#include "kir/interpreter.h"

#include <cmath>
#include <cstring>
#include <limits>

namespace nnc::kir {

namespace {

// A scalar: floats live in f (already rounded to their dtype's precision), integers and bools in i
// (unsigned values as their bit pattern).
struct Scalar {
  double f = 0;
  int64_t i = 0;
};

int64_t wrap(DType t, int64_t v) {
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

double roundTo(DType t, double v) { return t == DType::F32 ? static_cast<double>(static_cast<float>(v)) : v; }

double asDouble(DType t, const Scalar& s) {
  if (isFloat(t)) return s.f;
  if (t == DType::U64) return static_cast<double>(static_cast<uint64_t>(s.i));
  return static_cast<double>(s.i);
}

// Float -> integer conversion: truncation toward zero, saturating, NaN -> 0 (the targets agree).
int64_t floatToInt(DType to, double v) {
  if (std::isnan(v)) return 0;
  double lo, hi;
  // clang-format off
  switch (to) {
    case DType::I8: lo = -128; hi = 127; break;
    case DType::U8: lo = 0; hi = 255; break;
    case DType::I16: lo = -32768; hi = 32767; break;
    case DType::U16: lo = 0; hi = 65535; break;
    case DType::I32: lo = -2147483648.0; hi = 2147483647.0; break;
    case DType::U32: lo = 0; hi = 4294967295.0; break;
    case DType::U64:
      if (v <= 0) return 0;
      if (v >= 18446744073709551615.0) return -1;
      return static_cast<int64_t>(static_cast<uint64_t>(v));
    default: lo = -9223372036854775808.0; hi = 9223372036854775807.0; break;
  }
  // clang-format on
  if (v <= lo) return static_cast<int64_t>(lo);
  // 2^63 (the I64 bound, and the default for a non-integer `to`) is not an int64: saturate.
  if (v >= hi) return hi >= 9223372036854775807.0 ? std::numeric_limits<int64_t>::max() : static_cast<int64_t>(hi);
  return static_cast<int64_t>(v);
}

int64_t floorDiv(int64_t a, int64_t b) {
  if (b == -1) return static_cast<int64_t>(0 - static_cast<uint64_t>(a));  // INT64_MIN / -1 wraps
  int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}

bool isUnsignedType(DType t) { return isUnsignedInt(t) || t == DType::Bool; }

class Interpreter {
 public:
  Interpreter(const Kernel& k, std::vector<Tensor*> buffers)
      : k_(k), buffers_(std::move(buffers)), cache_(k.exprs.size()), stamp_(k.exprs.size(), 0) {
    int maxVar = 0;
    for (const ExprNode& n : k.exprs)
      if (n.op == ExprOp::Var) maxVar = std::max<int>(maxVar, static_cast<int>(n.ival) + 1);
    vars_.assign(maxVar, 0);
    reduced_.resize(k.reductions.size());
  }

  Status run() {
    if (buffers_.size() != k_.params.size()) return Status::error("interpreter: wrong number of buffers");
    for (size_t s = 0; s < k_.params.size(); ++s) {
      const Param& p = k_.params[s];
      if (!buffers_[s] || buffers_[s]->dtype() != p.dtype || buffers_[s]->numel() != p.numel)
        return Status::error("interpreter: buffer " + std::to_string(s) + " does not match param '" + p.name + "'");
    }
    if (k_.as<Attention>())  // its generic form is only the score expression (see kir::Attention)
      return Status::error("interpreter: kernel '" + k_.name + "' is an attention kernel, which only a target runs");
    if (k_.writesNothing()) return Status::ok();
    const int64_t outerSize = k_.outer.size();
    for (int64_t o = 0; o < outerSize && error_.isOk(); ++o) {
      setLoopVars(k_.outer, o);
      for (size_t r = 0; r < k_.reductions.size() && error_.isOk(); ++r) reduced_[r] = runReduction(k_.reductions[r]);
      ++epoch_;
      for (const Store& s : k_.stores)
        if (!s.perInner) store(s);
      bool anyInner = false;
      for (const Store& s : k_.stores) anyInner |= s.perInner;
      if (!anyInner) continue;
      const int64_t innerSize = k_.inner.size();
      for (int64_t in = 0; in < innerSize && error_.isOk(); ++in) {
        setLoopVars(k_.inner, in);
        ++epoch_;
        for (const Store& s : k_.stores)
          if (s.perInner) store(s);
      }
    }
    return error_;
  }

 private:
  void setLoopVars(const Loop& loop, int64_t flat) {
    for (int d = static_cast<int>(loop.extents.size()) - 1; d >= 0; --d) {
      vars_[k_.exprs[loop.vars[d]].ival] = flat % loop.extents[d];
      flat /= loop.extents[d];
    }
  }

  Scalar runReduction(const Reduction& r) {
    const DType bodyType = k_.exprs[r.body].dtype;
    const bool isF = isFloat(bodyType);
    Scalar acc;
    int64_t bestIndex = 0;
    bool first = true;
    const int64_t n = r.loop.size();
    for (int64_t j = 0; j < n && error_.isOk(); ++j) {
      setLoopVars(r.loop, j);
      ++epoch_;
      Scalar v = eval(r.body);
      if (r.stashSlot >= 0) store(Store{r.stashSlot, r.stashIndex, r.body, false});
      if (r.op == ReduceOp::ArgMax || r.op == ReduceOp::ArgMin) {
        double x = asDouble(bodyType, v), best = asDouble(bodyType, acc);
        bool better;
        if (first) {
          better = true;
        } else if (r.op == ReduceOp::ArgMax) {
          better = r.selectLastIndex ? x >= best : x > best;
        } else {
          better = r.selectLastIndex ? x <= best : x < best;
        }
        if (better) {
          acc = v;
          bestIndex = j;
        }
        first = false;
        continue;
      }
      if (first) {
        acc = v;
        first = false;
        continue;
      }
      acc = combine(r.op, bodyType, isF, acc, v);
    }
    if (r.op == ReduceOp::ArgMax || r.op == ReduceOp::ArgMin) {
      Scalar s;
      s.i = bestIndex;
      return s;
    }
    if (first) {  // empty reduction: the identity
      if (r.op == ReduceOp::Prod) {
        acc.f = 1;
        acc.i = 1;
      } else if (r.op == ReduceOp::Max) {
        acc.f = -std::numeric_limits<double>::infinity();
        acc.i = isUnsignedType(bodyType) ? 0 : std::numeric_limits<int64_t>::min();
      } else if (r.op == ReduceOp::Min) {
        acc.f = std::numeric_limits<double>::infinity();
        acc.i = std::numeric_limits<int64_t>::max();
      }
    }
    return acc;
  }

  static Scalar combine(ReduceOp op, DType t, bool isF, Scalar a, Scalar b) {
    Scalar r;
    if (isF) {
      switch (op) {
        case ReduceOp::Sum: r.f = roundTo(t, a.f + b.f); break;
        case ReduceOp::Prod: r.f = roundTo(t, a.f * b.f); break;
        case ReduceOp::Max: r.f = (std::isnan(a.f) || std::isnan(b.f)) ? NAN : std::max(a.f, b.f); break;
        case ReduceOp::Min: r.f = (std::isnan(a.f) || std::isnan(b.f)) ? NAN : std::min(a.f, b.f); break;
        default: break;
      }
      return r;
    }
    const bool u = isUnsignedType(t);
    switch (op) {
      // In uint64 so that i64 overflow wraps like the targets' integer adds instead of being UB.
      case ReduceOp::Sum:
        r.i = wrap(t, static_cast<int64_t>(static_cast<uint64_t>(a.i) + static_cast<uint64_t>(b.i)));
        break;
      case ReduceOp::Prod:
        r.i = wrap(t, static_cast<int64_t>(static_cast<uint64_t>(a.i) * static_cast<uint64_t>(b.i)));
        break;
      case ReduceOp::Max: r.i = u ? static_cast<int64_t>(std::max<uint64_t>(a.i, b.i)) : std::max(a.i, b.i); break;
      case ReduceOp::Min: r.i = u ? static_cast<int64_t>(std::min<uint64_t>(a.i, b.i)) : std::min(a.i, b.i); break;
      default: break;
    }
    return r;
  }

  Scalar loadElement(int slot, int64_t index) {
    Tensor* t = buffers_[slot];
    Scalar s;
    if (index < 0 || index >= t->numel()) {
      if (error_.isOk())
        error_ = Status::error("interpreter: load of element " + std::to_string(index) + " from param '" +
                               k_.params[slot].name + "' of " + std::to_string(t->numel()) + " elements");
      return s;
    }
    const std::byte* p = t->data() + index * dtypeSize(t->dtype());
    switch (t->dtype()) {
      case DType::F32: {
        float v;
        std::memcpy(&v, p, 4);
        s.f = v;
        break;
      }
      case DType::F64: std::memcpy(&s.f, p, 8); break;
      case DType::F16: {
        uint16_t v;
        std::memcpy(&v, p, 2);
        s.f = f16ToF32(v);
        break;
      }
      case DType::BF16: {
        uint16_t v;
        std::memcpy(&v, p, 2);
        s.f = bf16ToF32(v);
        break;
      }
      case DType::I8: s.i = static_cast<int8_t>(*p); break;
      case DType::U8: s.i = static_cast<uint8_t>(*p); break;
      case DType::Bool: s.i = static_cast<uint8_t>(*p) != 0; break;
      case DType::I16: {
        int16_t v;
        std::memcpy(&v, p, 2);
        s.i = v;
        break;
      }
      case DType::U16: {
        uint16_t v;
        std::memcpy(&v, p, 2);
        s.i = v;
        break;
      }
      case DType::I32: {
        int32_t v;
        std::memcpy(&v, p, 4);
        s.i = v;
        break;
      }
      case DType::U32: {
        uint32_t v;
        std::memcpy(&v, p, 4);
        s.i = v;
        break;
      }
      case DType::I64:
      case DType::U64: std::memcpy(&s.i, p, 8); break;
    }
    return s;
  }

  void store(const Store& st) {
    const int64_t index = eval(st.index).i;
    Tensor* t = buffers_[st.slot];
    if (index < 0 || index >= t->numel()) {
      if (error_.isOk())
        error_ = Status::error("interpreter: store to element " + std::to_string(index) + " of param '" +
                               k_.params[st.slot].name + "' of " + std::to_string(t->numel()) + " elements");
      return;
    }
    const DType vt = k_.exprs[st.value].dtype;
    Scalar v = eval(st.value);
    std::byte* p = t->mutableData() + index * dtypeSize(t->dtype());
    const double d = asDouble(vt, v);
    const int64_t i = !isFloat(vt) ? v.i : isFloat(t->dtype()) ? 0 : floatToInt(t->dtype(), v.f);
    switch (t->dtype()) {
      case DType::F32: {
        float f = static_cast<float>(d);
        std::memcpy(p, &f, 4);
        break;
      }
      case DType::F64: std::memcpy(p, &d, 8); break;
      case DType::F16: {
        uint16_t h = f32ToF16(static_cast<float>(d));
        std::memcpy(p, &h, 2);
        break;
      }
      case DType::BF16: {
        uint16_t h = f32ToBF16(static_cast<float>(d));
        std::memcpy(p, &h, 2);
        break;
      }
      case DType::Bool: *p = static_cast<std::byte>(isFloat(vt) ? (d != 0) : (i != 0)); break;
      case DType::I8:
      case DType::U8: *p = static_cast<std::byte>(i & 0xff); break;
      case DType::I16:
      case DType::U16: {
        uint16_t x = static_cast<uint16_t>(i);
        std::memcpy(p, &x, 2);
        break;
      }
      case DType::I32:
      case DType::U32: {
        uint32_t x = static_cast<uint32_t>(i);
        std::memcpy(p, &x, 4);
        break;
      }
      case DType::I64:
      case DType::U64: std::memcpy(p, &i, 8); break;
    }
  }

  Scalar eval(ExprId id) {
    if (stamp_[id] == epoch_) return cache_[id];
    Scalar r = compute(k_.exprs[id]);
    cache_[id] = r;
    stamp_[id] = epoch_;
    return r;
  }

  Scalar compute(const ExprNode& n) {
    Scalar r;
    const DType t = n.dtype;
    switch (n.op) {
      case ExprOp::Const:
        r.f = n.fval;
        r.i = n.ival;
        return r;
      case ExprOp::Var: r.i = vars_[n.ival]; return r;
      case ExprOp::ReduceValue: return reduced_[n.ival];
      case ExprOp::Load: return loadElement(n.slot, eval(n.a).i);
      case ExprOp::Select: return eval(n.a).i ? eval(n.b) : eval(n.c);
      case ExprOp::Cast: return castValue(k_.exprs[n.a].dtype, t, eval(n.a));
      default: break;
    }
    if (exprOpArity(n.op) == 1) return unaryOp(n, eval(n.a));
    return binaryOp(n, eval(n.a), eval(n.b));
  }

  static Scalar castValue(DType from, DType to, Scalar v) {
    Scalar r;
    if (isFloat(to)) {
      r.f = roundTo(to, asDouble(from, v));
    } else if (to == DType::Bool) {
      r.i = isFloat(from) ? (v.f != 0) : (v.i != 0);
    } else if (isFloat(from)) {
      r.i = floatToInt(to, v.f);
    } else {
      r.i = wrap(to, v.i);
    }
    return r;
  }

  Scalar unaryOp(const ExprNode& n, Scalar a) {
    Scalar r;
    const DType t = n.dtype;
    const DType at = k_.exprs[n.a].dtype;
    if (isFloat(at)) {
      const double x = a.f;
      double y = 0;
      switch (n.op) {
        case ExprOp::Neg: y = -x; break;
        case ExprOp::Abs: y = std::fabs(x); break;
        case ExprOp::Exp: y = std::exp(x); break;
        case ExprOp::Log: y = std::log(x); break;
        case ExprOp::Sqrt: y = std::sqrt(x); break;
        case ExprOp::Sin: y = std::sin(x); break;
        case ExprOp::Cos: y = std::cos(x); break;
        case ExprOp::Tan: y = std::tan(x); break;
        case ExprOp::Asin: y = std::asin(x); break;
        case ExprOp::Acos: y = std::acos(x); break;
        case ExprOp::Atan: y = std::atan(x); break;
        case ExprOp::Sinh: y = std::sinh(x); break;
        case ExprOp::Cosh: y = std::cosh(x); break;
        case ExprOp::Tanh: y = std::tanh(x); break;
        case ExprOp::Asinh: y = std::asinh(x); break;
        case ExprOp::Acosh: y = std::acosh(x); break;
        case ExprOp::Atanh: y = std::atanh(x); break;
        case ExprOp::Erf: y = std::erf(x); break;
        case ExprOp::Floor: y = std::floor(x); break;
        case ExprOp::Ceil: y = std::ceil(x); break;
        case ExprOp::RoundEven: y = std::nearbyint(x); break;
        case ExprOp::Trunc: y = std::trunc(x); break;
        case ExprOp::IsNaN: r.i = std::isnan(x); return r;
        case ExprOp::IsInf: r.i = std::isinf(x) && ((x > 0 && (n.ival & 1)) || (x < 0 && (n.ival & 2))); return r;
        case ExprOp::RoundToF16: y = f16ToF32(f32ToF16(static_cast<float>(x))); break;
        case ExprOp::RoundToBF16: y = bf16ToF32(f32ToBF16(static_cast<float>(x))); break;
        default:
          if (error_.isOk()) error_ = Status::error(std::string("interpreter: ") + exprOpName(n.op) + " on a float");
          return r;
      }
      r.f = roundTo(t, y);
      return r;
    }
    const int64_t x = a.i;
    // Negation in uint64: INT64_MIN wraps to itself (as two's complement targets do), without UB.
    const int64_t negX = static_cast<int64_t>(0 - static_cast<uint64_t>(x));
    switch (n.op) {
      case ExprOp::Neg: r.i = wrap(t, negX); break;
      case ExprOp::Abs: r.i = isUnsignedType(t) ? x : wrap(t, x < 0 ? negX : x); break;
      case ExprOp::Not: r.i = !x; break;
      case ExprOp::BitNot: r.i = wrap(t, ~x); break;
      case ExprOp::Floor:
      case ExprOp::Ceil:
      case ExprOp::RoundEven:
      case ExprOp::Trunc: r.i = x; break;
      default:
        if (error_.isOk()) error_ = Status::error(std::string("interpreter: ") + exprOpName(n.op) + " on an integer");
    }
    return r;
  }

  Scalar binaryOp(const ExprNode& n, Scalar a, Scalar b) {
    Scalar r;
    const DType at = k_.exprs[n.a].dtype;
    if (isFloat(at)) {
      const double x = a.f, y = b.f;
      double z = 0;
      switch (n.op) {
        case ExprOp::Add: z = x + y; break;
        case ExprOp::Sub: z = x - y; break;
        case ExprOp::Mul: z = x * y; break;
        case ExprOp::Div: z = x / y; break;
        case ExprOp::FloorDiv: z = std::floor(x / y); break;
        case ExprOp::Rem: z = std::fmod(x, y); break;
        case ExprOp::FloorMod: {
          z = std::fmod(x, y);
          if (z != 0 && ((z < 0) != (y < 0))) z += y;
          break;
        }
        case ExprOp::Pow: z = std::pow(x, y); break;
        case ExprOp::Min: z = (std::isnan(x) || std::isnan(y)) ? NAN : std::min(x, y); break;
        case ExprOp::Max: z = (std::isnan(x) || std::isnan(y)) ? NAN : std::max(x, y); break;
        case ExprOp::Eq: r.i = x == y; return r;
        case ExprOp::Ne: r.i = x != y; return r;
        case ExprOp::Lt: r.i = x < y; return r;
        case ExprOp::Le: r.i = x <= y; return r;
        case ExprOp::Gt: r.i = x > y; return r;
        case ExprOp::Ge: r.i = x >= y; return r;
        default:
          if (error_.isOk()) error_ = Status::error(std::string("interpreter: ") + exprOpName(n.op) + " on floats");
          return r;
      }
      r.f = roundTo(n.dtype, z);
      return r;
    }
    const bool u = isUnsignedType(at);
    const int64_t x = a.i, y = b.i;
    const uint64_t ux = static_cast<uint64_t>(x), uy = static_cast<uint64_t>(y);
    const DType t = n.dtype;
    switch (n.op) {
      case ExprOp::Add: r.i = wrap(t, static_cast<int64_t>(ux + uy)); break;
      case ExprOp::Sub: r.i = wrap(t, static_cast<int64_t>(ux - uy)); break;
      case ExprOp::Mul: r.i = wrap(t, static_cast<int64_t>(ux * uy)); break;
      case ExprOp::Div:
        if (y == 0) break;
        if (u) {
          r.i = static_cast<int64_t>(ux / uy);
        } else {
          r.i = (x == std::numeric_limits<int64_t>::min() && y == -1) ? x : wrap(t, x / y);
        }
        break;
      case ExprOp::FloorDiv:
        if (y == 0) break;
        r.i = u ? static_cast<int64_t>(ux / uy) : wrap(t, floorDiv(x, y));
        break;
      case ExprOp::Rem:
        if (y == 0 || (!u && y == -1)) break;
        r.i = u ? static_cast<int64_t>(ux % uy) : x % y;
        break;
      case ExprOp::FloorMod:
        if (y == 0 || (!u && y == -1)) break;
        // In uint64: floorDiv(1, INT64_MIN) * INT64_MIN overflows int64 although the result fits.
        r.i = u ? static_cast<int64_t>(ux % uy) : static_cast<int64_t>(ux - static_cast<uint64_t>(floorDiv(x, y)) * uy);
        break;
      case ExprOp::Pow: {
        double d = std::pow(asDouble(at, a), asDouble(at, b));
        r.i = floatToInt(t, d);
        break;
      }
      case ExprOp::Min: r.i = u ? static_cast<int64_t>(std::min(ux, uy)) : std::min(x, y); break;
      case ExprOp::Max: r.i = u ? static_cast<int64_t>(std::max(ux, uy)) : std::max(x, y); break;
      case ExprOp::And: r.i = x && y; break;
      case ExprOp::Or: r.i = x || y; break;
      case ExprOp::Xor: r.i = (x != 0) != (y != 0); break;
      case ExprOp::BitAnd: r.i = x & y; break;
      case ExprOp::BitOr: r.i = x | y; break;
      case ExprOp::BitXor: r.i = x ^ y; break;
      case ExprOp::Shl: {
        const int width = static_cast<int>(dtypeSize(t) * 8);
        r.i = uy >= static_cast<uint64_t>(width) ? 0 : wrap(t, static_cast<int64_t>(ux << uy));
        break;
      }
      case ExprOp::Shr: {
        const int width = static_cast<int>(dtypeSize(t) * 8);
        r.i = uy >= static_cast<uint64_t>(width) ? 0 : static_cast<int64_t>(ux >> uy);
        break;
      }
      case ExprOp::Eq: r.i = x == y; break;
      case ExprOp::Ne: r.i = x != y; break;
      case ExprOp::Lt: r.i = u ? ux < uy : x < y; break;
      case ExprOp::Le: r.i = u ? ux <= uy : x <= y; break;
      case ExprOp::Gt: r.i = u ? ux > uy : x > y; break;
      case ExprOp::Ge: r.i = u ? ux >= uy : x >= y; break;
      default:
        if (error_.isOk()) error_ = Status::error(std::string("interpreter: ") + exprOpName(n.op) + " on integers");
    }
    return r;
  }

  const Kernel& k_;
  std::vector<Tensor*> buffers_;
  std::vector<Scalar> cache_;
  std::vector<uint32_t> stamp_;
  uint32_t epoch_ = 1;
  std::vector<int64_t> vars_;
  std::vector<Scalar> reduced_;
  Status error_;
};

}  // namespace

Status interpret(const Kernel& kernel, std::vector<Tensor*> buffers) {
  return Interpreter(kernel, std::move(buffers)).run();
}

}  // namespace nnc::kir
