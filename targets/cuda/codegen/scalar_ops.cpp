// Scalar kernel-IR operations as CUDA C++ expressions; semantics follow kir/interpreter.cpp (integer
// division by zero yields 0, wrapping integer arithmetic, saturating float->int, NaN-propagating
// min/max, shifts >= width give 0). The helpers named nnc_* live in prelude.cuh.
#include "targets/cuda/codegen/scalar_ops.h"

#include <cmath>
#include <cstdio>
#include <limits>

#include "nnc/status.h"

namespace nnc::codegen::cuda {

using kir::ExprOp;

bool isUnsignedLike(DType t) { return isUnsignedInt(t) || t == DType::Bool; }

const char* valueTypeName(DType t) {
  switch (t) {
    case DType::Bool: return "bool";
    case DType::I8: return "i8";
    case DType::U8: return "u8";
    case DType::I16: return "i16";
    case DType::U16: return "u16";
    case DType::I32: return "i32";
    case DType::U32: return "u32";
    case DType::I64: return "i64";
    case DType::U64: return "u64";
    case DType::F32: return "float";
    case DType::F64: return "double";
    case DType::F16:
    case DType::BF16: break;
  }
  NNC_CHECK(false, "kernel IR value typed f16/bf16");
  return "";
}

const char* storageTypeName(DType t) {
  if (t == DType::Bool) return "u8";
  if (isHalfLike(t)) return "u16";
  return valueTypeName(t);
}

const char* wideUnsignedName(DType t) { return dtypeSize(t) > 4 ? "u64" : "u32"; }

namespace {

std::string paren(const std::string& s) { return "(" + s + ")"; }

std::string floatLiteral(DType t, double v) {
  const bool f32 = t == DType::F32;
  if (std::isnan(v)) return f32 ? "NNC_F32_NAN" : "NNC_F64_NAN";
  if (std::isinf(v)) return std::string(v < 0 ? "(-" : "(") + (f32 ? "NNC_F32_INF" : "NNC_F64_INF") + ")";
  char buf[64];
  std::snprintf(buf, sizeof buf, f32 ? "%.9g" : "%.17g", v);
  std::string s = buf;
  if (s.find_first_of(".e") == std::string::npos) s += ".0";
  if (f32) s += "f";
  return std::signbit(v) ? paren(s) : s;
}

bool isFloatValue(DType t) { return t == DType::F32 || t == DType::F64; }

// The C math function `fname` (double) or `fname` + "f" (float). The CUDA emulator declares these
// names itself (targets/cuda/emulator/emulation.cuh), as it does fmod and pow below: a new one goes there too.
std::string mathCall(const char* fname, DType t, const std::string& a) {
  return std::string(fname) + (t == DType::F32 ? "f" : "") + "(" + a + ")";
}

// Wrapping integer arithmetic: through the wide unsigned type, truncated back.
std::string wrapArith(DType t, const std::string& a, const char* op, const std::string& b) {
  const std::string w = wideUnsignedName(t);
  return "(" + std::string(valueTypeName(t)) + ")((" + w + ")" + a + " " + op + " (" + w + ")" + b + ")";
}

}  // namespace

std::string intLiteral(DType t, int64_t v) {
  switch (t) {
    case DType::Bool: return v ? "true" : "false";
    case DType::I64:
      if (v == std::numeric_limits<int64_t>::min()) return "(-9223372036854775807LL - 1)";
      return v < 0 ? "(" + std::to_string(v) + "LL)" : std::to_string(v) + "LL";
    case DType::U64: return std::to_string(static_cast<uint64_t>(v)) + "ULL";
    case DType::I32:
      if (v == std::numeric_limits<int32_t>::min()) return "(-2147483647 - 1)";
      return v < 0 ? "(" + std::to_string(v) + ")" : std::to_string(v);
    case DType::U32: return std::to_string(static_cast<uint32_t>(v)) + "u";
    default: return "((" + std::string(valueTypeName(t)) + ")" + std::to_string(v) + ")";
  }
}

std::string literal(const kir::ExprNode& n) {
  if (isFloatValue(n.dtype)) return floatLiteral(n.dtype, n.fval);
  return intLiteral(n.dtype, n.ival);
}

std::string castExpr(const std::string& x, DType from, DType to) {
  if (from == to) return x;
  if (to == DType::Bool) return "(" + x + (isFloatValue(from) ? " != 0.0)" : " != 0)");
  const std::string tn = valueTypeName(to);
  if (isFloatValue(to)) {
    // The interpreter converts integers through f64 first: for 64-bit integers to f32 that is a
    // double rounding, kept here so that the results agree bit for bit.
    if (to == DType::F32 && dtypeSize(from) == 8 && !isFloatValue(from)) return "(float)(double)" + x;
    return "(" + tn + ")" + x;
  }
  if (isFloatValue(from)) return "nnc_sat_" + tn + "(" + x + ")";
  return "(" + tn + ")" + x;
}

std::string fromStorage(const std::string& raw, DType storage) {
  switch (storage) {
    case DType::F16: return "nnc_f16_to_f32(" + raw + ")";
    case DType::BF16: return "nnc_bf16_to_f32(" + raw + ")";
    case DType::Bool: return "(" + raw + " != 0)";
    default: return raw;
  }
}

std::string toStorage(const std::string& v, DType valueType, DType storage) {
  switch (storage) {
    case DType::F16: return "nnc_f32_to_f16(" + castExpr(v, valueType, DType::F32) + ")";
    case DType::BF16: return "nnc_f32_to_bf16(" + castExpr(v, valueType, DType::F32) + ")";
    case DType::Bool: return "(u8)" + castExpr(v, valueType, DType::Bool);
    default: return castExpr(v, valueType, storage);
  }
}

std::string unaryExpr(const kir::ExprNode& n, const std::string& a, DType at, std::string* error) {
  if (isFloatValue(at)) {
    std::string r;
    switch (n.op) {
      case ExprOp::Neg: r = "-" + a; break;
      case ExprOp::Abs: r = mathCall("fabs", at, a); break;
      case ExprOp::Exp: r = mathCall("exp", at, a); break;
      case ExprOp::Log: r = mathCall("log", at, a); break;
      case ExprOp::Sqrt: r = mathCall("sqrt", at, a); break;
      case ExprOp::Sin: r = mathCall("sin", at, a); break;
      case ExprOp::Cos: r = mathCall("cos", at, a); break;
      case ExprOp::Tan: r = mathCall("tan", at, a); break;
      case ExprOp::Asin: r = mathCall("asin", at, a); break;
      case ExprOp::Acos: r = mathCall("acos", at, a); break;
      case ExprOp::Atan: r = mathCall("atan", at, a); break;
      case ExprOp::Sinh: r = mathCall("sinh", at, a); break;
      case ExprOp::Cosh: r = mathCall("cosh", at, a); break;
      case ExprOp::Tanh: r = mathCall("tanh", at, a); break;
      case ExprOp::Asinh: r = mathCall("asinh", at, a); break;
      case ExprOp::Acosh: r = mathCall("acosh", at, a); break;
      case ExprOp::Atanh: r = mathCall("atanh", at, a); break;
      case ExprOp::Erf: r = mathCall("erf", at, a); break;
      case ExprOp::Floor: r = mathCall("floor", at, a); break;
      case ExprOp::Ceil: r = mathCall("ceil", at, a); break;
      case ExprOp::RoundEven: r = mathCall("rint", at, a); break;  // round-to-nearest-even mode
      case ExprOp::Trunc: r = mathCall("trunc", at, a); break;
      case ExprOp::IsNaN: return "nnc_isnan(" + a + ")";
      case ExprOp::IsInf: {
        const std::string inf = at == DType::F32 ? "NNC_F32_INF" : "NNC_F64_INF";
        std::string s;
        if (n.ival & 1) s = a + " == " + inf;
        if (n.ival & 2) s += (s.empty() ? "" : " || ") + a + " == -" + inf;
        return s.empty() ? "false" : paren(s);
      }
      case ExprOp::RoundToF16:
        r = "nnc_round_f16(" + castExpr(a, at, DType::F32) + ")";
        at = DType::F32;
        break;
      case ExprOp::RoundToBF16:
        r = "nnc_round_bf16(" + castExpr(a, at, DType::F32) + ")";
        at = DType::F32;
        break;
      default: break;
    }
    if (!r.empty()) return castExpr(r, at, n.dtype);
  } else {
    const std::string tn = valueTypeName(at);
    switch (n.op) {
      case ExprOp::Neg: return wrapArith(at, intLiteral(at, 0), "-", a);
      case ExprOp::Abs:
        if (isUnsignedLike(at)) return a;
        return "(" + a + " < 0 ? " + wrapArith(at, intLiteral(at, 0), "-", a) + " : " + a + ")";  // MIN stays MIN
      case ExprOp::Not: return "!" + a;
      case ExprOp::BitNot: return "(" + tn + ")~" + a;
      case ExprOp::Floor:
      case ExprOp::Ceil:
      case ExprOp::RoundEven:
      case ExprOp::Trunc: return a;
      default: break;
    }
  }
  *error = std::string(kir::exprOpName(n.op)) + " on " + std::string(dtypeName(at)) +
           " is not supported by the cuda backend";
  return "";
}

std::string binaryExpr(const kir::ExprNode& n, const std::string& a, DType at, const std::string& b, DType bt,
                       std::string* error) {
  auto infix = [&](const char* op) { return a + " " + op + " " + b; };
  auto call = [&](const char* fname) { return std::string(fname) + "(" + a + ", " + b + ")"; };
  if (n.op == ExprOp::Shl || n.op == ExprOp::Shr) {
    if (isInteger(at) && (isInteger(bt) || bt == DType::Bool)) {
      // The amount as an unsigned 64-bit value (a negative signed amount is huge, so gives 0).
      const std::string amount = isSignedInt(bt) ? "(u64)(i64)" + b : "(u64)" + b;
      return std::string(n.op == ExprOp::Shl ? "nnc_shl(" : "nnc_shr(") + a + ", " + amount + ")";
    }
  } else if (isFloatValue(at)) {
    std::string r;
    switch (n.op) {
      case ExprOp::Add: r = infix("+"); break;
      case ExprOp::Sub: r = infix("-"); break;
      case ExprOp::Mul: r = infix("*"); break;
      case ExprOp::Div: r = infix("/"); break;
      case ExprOp::FloorDiv: r = mathCall("floor", at, infix("/")); break;
      case ExprOp::Rem: r = at == DType::F32 ? call("fmodf") : call("fmod"); break;
      case ExprOp::FloorMod: r = call("nnc_fmod_floor"); break;
      case ExprOp::Pow: r = at == DType::F32 ? call("powf") : call("pow"); break;
      case ExprOp::Min: r = call("nnc_fmin"); break;
      case ExprOp::Max: r = call("nnc_fmax"); break;
      case ExprOp::Eq: return infix("==");
      case ExprOp::Ne: return infix("!=");
      case ExprOp::Lt: return infix("<");
      case ExprOp::Le: return infix("<=");
      case ExprOp::Gt: return infix(">");
      case ExprOp::Ge: return infix(">=");
      default: break;
    }
    if (!r.empty()) return castExpr(r, at, n.dtype);
  } else {
    const std::string tn = valueTypeName(at);
    switch (n.op) {
      case ExprOp::Add: return wrapArith(at, a, "+", b);
      case ExprOp::Sub: return wrapArith(at, a, "-", b);
      case ExprOp::Mul: return wrapArith(at, a, "*", b);
      case ExprOp::Div: return call("nnc_div");
      case ExprOp::FloorDiv: return call("nnc_floordiv");
      case ExprOp::Rem: return call("nnc_rem");
      case ExprOp::FloorMod: return call("nnc_floormod");
      case ExprOp::Pow:  // through f64, saturating back like the interpreter
        return castExpr("pow(" + castExpr(a, at, DType::F64) + ", " + castExpr(b, bt, DType::F64) + ")", DType::F64,
                        n.dtype);
      case ExprOp::Min: return "(" + b + " < " + a + " ? " + b + " : " + a + ")";
      case ExprOp::Max: return "(" + a + " < " + b + " ? " + b + " : " + a + ")";
      case ExprOp::And: return at == DType::Bool ? infix("&&") : "(" + a + " != 0) && (" + b + " != 0)";
      case ExprOp::Or: return at == DType::Bool ? infix("||") : "(" + a + " != 0) || (" + b + " != 0)";
      case ExprOp::Xor: return at == DType::Bool ? infix("!=") : "(" + a + " != 0) != (" + b + " != 0)";
      case ExprOp::BitAnd: return "(" + tn + ")(" + infix("&") + ")";
      case ExprOp::BitOr: return "(" + tn + ")(" + infix("|") + ")";
      case ExprOp::BitXor: return "(" + tn + ")(" + infix("^") + ")";
      case ExprOp::Eq: return infix("==");
      case ExprOp::Ne: return infix("!=");
      case ExprOp::Lt: return infix("<");
      case ExprOp::Le: return infix("<=");
      case ExprOp::Gt: return infix(">");
      case ExprOp::Ge: return infix(">=");
      default: break;
    }
  }
  *error = std::string(kir::exprOpName(n.op)) + " on " + std::string(dtypeName(at)) +
           " is not supported by the cuda backend";
  return "";
}

}  // namespace nnc::codegen::cuda
