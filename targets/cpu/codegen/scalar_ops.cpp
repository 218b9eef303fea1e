// Scalar kernel-IR operations lowered to LLVM IR; semantics follow kir/interpreter.cpp exactly
// (integer division by zero yields 0, saturating float->int, NaN-propagating min/max, ...).
#include "targets/cpu/codegen/scalar_ops.h"

#include <llvm/IR/Intrinsics.h>

#include <cmath>
#include <limits>

#include "nnc/status.h"

namespace nnc::codegen::llvmcpu {

using kir::ExprOp;
using llvm::Value;

bool isUnsignedLike(DType t) { return isUnsignedInt(t) || t == DType::Bool; }

llvm::Type* ScalarOps::valueType(DType t) const {
  llvm::LLVMContext& c = m_.getContext();
  switch (t) {
    case DType::F32: return llvm::Type::getFloatTy(c);
    case DType::F64: return llvm::Type::getDoubleTy(c);
    case DType::Bool: return llvm::Type::getInt1Ty(c);
    case DType::F16:
    case DType::BF16: NNC_CHECK(false, "kernel IR value typed f16/bf16"); return nullptr;
    default: return llvm::Type::getIntNTy(c, static_cast<unsigned>(dtypeSize(t) * 8));
  }
}

llvm::Type* ScalarOps::storageType(DType t) const {
  llvm::LLVMContext& c = m_.getContext();
  if (t == DType::Bool) return llvm::Type::getInt8Ty(c);
  if (isHalfLike(t)) return llvm::Type::getInt16Ty(c);
  return valueType(t);
}

Value* ScalarOps::constant(const kir::ExprNode& n) const {
  llvm::Type* ty = valueType(n.dtype);
  if (isFloat(n.dtype)) return llvm::ConstantFP::get(ty, n.fval);
  // ival holds the value (or the bit pattern of an unsigned one); truncate to the type's width.
  unsigned bits = ty->getIntegerBitWidth();
  uint64_t v = static_cast<uint64_t>(n.ival);
  if (bits < 64) v &= (uint64_t{1} << bits) - 1;
  return llvm::ConstantInt::get(ty, v);
}

Value* ScalarOps::toBool(Value* v) {
  if (v->getType()->isIntegerTy(1)) return v;
  if (v->getType()->isFloatingPointTy()) return b_.CreateFCmpUNE(v, llvm::ConstantFP::get(v->getType(), 0.0));
  return b_.CreateICmpNE(v, llvm::ConstantInt::get(v->getType(), 0));
}

Value* ScalarOps::cast(Value* v, DType from, DType to) {
  if (from == to) return v;
  if (to == DType::Bool) return toBool(v);
  llvm::Type* ty = valueType(to);
  if (isFloat(to)) {
    if (isFloat(from)) return b_.CreateFPCast(v, ty);
    return isUnsignedLike(from) ? b_.CreateUIToFP(v, ty) : b_.CreateSIToFP(v, ty);
  }
  if (isFloat(from)) {
    // Saturating, NaN -> 0: exactly the interpreter's floatToInt.
    auto id = isUnsignedInt(to) ? llvm::Intrinsic::fptoui_sat : llvm::Intrinsic::fptosi_sat;
    return b_.CreateIntrinsic(id, {ty, v->getType()}, {v});
  }
  return b_.CreateIntCast(v, ty, /*isSigned=*/!isUnsignedLike(from));
}

Value* ScalarOps::fromStorage(Value* v, DType storage) {
  switch (storage) {
    case DType::F16: return f16BitsToF32(v);
    case DType::BF16: return bf16BitsToF32(v);
    case DType::Bool: return b_.CreateICmpNE(v, b_.getInt8(0));
    default: return v;
  }
}

Value* ScalarOps::toStorage(Value* v, DType valueDType, DType storage) {
  switch (storage) {
    case DType::F16: return f32ToF16Bits(cast(v, valueDType, DType::F32));
    case DType::BF16: return f32ToBF16Bits(cast(v, valueDType, DType::F32));
    case DType::Bool: return b_.CreateZExt(cast(v, valueDType, DType::Bool), b_.getInt8Ty());
    default: return cast(v, valueDType, storage);
  }
}

// f16 -> f32 with integer ops: normals re-bias the exponent, inf/nan keep the mantissa, and
// subnormals are mantissa * 2^-24 (exact in f32).
Value* ScalarOps::f16BitsToF32(Value* bits) {
  Value* h = b_.CreateZExt(bits, b_.getInt32Ty());
  Value* sign = b_.CreateShl(b_.CreateAnd(h, i32c(0x8000)), 16);
  Value* exp = b_.CreateAnd(b_.CreateLShr(h, 10), i32c(0x1f));
  Value* mant = b_.CreateAnd(h, i32c(0x3ff));
  Value* mantHi = b_.CreateShl(mant, 13);
  Value* normal = b_.CreateOr(b_.CreateOr(sign, b_.CreateShl(b_.CreateAdd(exp, i32c(112)), 23)), mantHi);
  Value* special = b_.CreateOr(b_.CreateOr(sign, i32c(0x7f800000)), mantHi);
  Value* subF = b_.CreateFMul(b_.CreateSIToFP(mant, b_.getFloatTy()), llvm::ConstantFP::get(b_.getFloatTy(), 0x1p-24));
  Value* sub = b_.CreateOr(b_.CreateBitCast(subF, b_.getInt32Ty()), sign);
  Value* r = b_.CreateSelect(b_.CreateICmpEQ(exp, i32c(31)), special, normal);
  r = b_.CreateSelect(b_.CreateICmpEQ(exp, i32c(0)), sub, r);
  return b_.CreateBitCast(r, b_.getFloatTy());
}

// f32 -> f16 bits, round to nearest even, with integer ops only.
Value* ScalarOps::f32ToF16Bits(Value* f) {
  Value* x = b_.CreateBitCast(f, b_.getInt32Ty());
  Value* sign = b_.CreateAnd(b_.CreateLShr(x, 16), i32c(0x8000));
  Value* a = b_.CreateAnd(x, i32c(0x7fffffff));
  // NaN: quiet, keeping the top mantissa bits.
  Value* nan = b_.CreateOr(i32c(0x7e00), b_.CreateAnd(b_.CreateLShr(a, 13), i32c(0x3ff)));
  // Normal range: re-bias, round on the 13 dropped bits; overflow saturates to inf (0x7c00).
  Value* lsb = b_.CreateAnd(b_.CreateLShr(a, 13), i32c(1));
  Value* normal = b_.CreateLShr(b_.CreateAdd(b_.CreateAdd(b_.CreateSub(a, i32c(0x38000000)), i32c(0xfff)), lsb), 13);
  normal = b_.CreateSelect(b_.CreateICmpUGT(normal, i32c(0x7c00)), i32c(0x7c00), normal);
  // Subnormal range (|f| < 2^-14): the value in units of 2^-24 is m >> (126 - e), rounded to even.
  Value* e = b_.CreateLShr(a, 23);
  Value* m = b_.CreateOr(b_.CreateAnd(a, i32c(0x7fffff)), i32c(0x800000));
  Value* s = b_.CreateSub(i32c(126), e);
  s = b_.CreateSelect(b_.CreateICmpUGT(s, i32c(25)), i32c(25), s);
  Value* q = b_.CreateLShr(m, s);
  Value* rem = b_.CreateAnd(m, b_.CreateSub(b_.CreateShl(i32c(1), s), i32c(1)));
  Value* half = b_.CreateShl(i32c(1), b_.CreateSub(s, i32c(1)));
  Value* up = b_.CreateOr(b_.CreateICmpUGT(rem, half),
                          b_.CreateAnd(b_.CreateICmpEQ(rem, half), b_.CreateICmpNE(b_.CreateAnd(q, i32c(1)), i32c(0))));
  Value* sub = b_.CreateAdd(q, b_.CreateZExt(up, b_.getInt32Ty()));
  Value* r = b_.CreateSelect(b_.CreateICmpUGE(a, i32c(0x38800000)), normal, sub);
  r = b_.CreateSelect(b_.CreateICmpUGE(a, i32c(0x7f800000)), i32c(0x7c00), r);
  r = b_.CreateSelect(b_.CreateICmpUGT(a, i32c(0x7f800000)), nan, r);
  return b_.CreateTrunc(b_.CreateOr(r, sign), b_.getInt16Ty());
}

Value* ScalarOps::bf16BitsToF32(Value* bits) {
  return b_.CreateBitCast(b_.CreateShl(b_.CreateZExt(bits, b_.getInt32Ty()), 16), b_.getFloatTy());
}

Value* ScalarOps::f32ToBF16Bits(Value* f) {
  Value* x = b_.CreateBitCast(f, b_.getInt32Ty());
  Value* lsb = b_.CreateAnd(b_.CreateLShr(x, 16), i32c(1));
  Value* rounded = b_.CreateLShr(b_.CreateAdd(b_.CreateAdd(x, i32c(0x7fff)), lsb), 16);
  Value* nan = b_.CreateOr(b_.CreateLShr(x, 16), i32c(0x40));
  Value* isNan = b_.CreateICmpUGT(b_.CreateAnd(x, i32c(0x7fffffff)), i32c(0x7f800000));
  return b_.CreateTrunc(b_.CreateSelect(isNan, nan, rounded), b_.getInt16Ty());
}

namespace {
// A constant (or splat) that is not NaN: min/max against it propagate a NaN with one compare.
bool isNumberConstant(Value* v) {
  auto* c = llvm::dyn_cast<llvm::Constant>(v);
  if (c && c->getType()->isVectorTy()) c = c->getSplatValue();
  auto* f = llvm::dyn_cast_or_null<llvm::ConstantFP>(c);
  return f && !f->isNaN();
}
}  // namespace

// NaN in, NaN out, as ONNX's Min/Max/Clip. Against a number constant (a Clip's bounds, a pool's
// ReLU) one compare and select does it, which is one vminps/vmaxps: the compare is false for a NaN
// and the select then picks the NaN operand (ordered when it is `a`, unordered when it is `b`).
Value* ScalarOps::floatMin(Value* a, Value* b) {
  if (isNumberConstant(b)) return b_.CreateSelect(b_.CreateFCmpOLT(b, a), b, a);
  if (isNumberConstant(a)) return b_.CreateSelect(b_.CreateFCmpULT(b, a), b, a);
  Value* r = b_.CreateSelect(b_.CreateFCmpOLT(b, a), b, a);
  return b_.CreateSelect(b_.CreateFCmpUNO(a, b), b_.CreateFAdd(a, b), r);  // a+b is the NaN
}

Value* ScalarOps::floatMax(Value* a, Value* b) {
  if (isNumberConstant(b)) return b_.CreateSelect(b_.CreateFCmpOLT(a, b), b, a);
  if (isNumberConstant(a)) return b_.CreateSelect(b_.CreateFCmpULT(a, b), b, a);
  Value* r = b_.CreateSelect(b_.CreateFCmpOLT(a, b), b, a);
  return b_.CreateSelect(b_.CreateFCmpUNO(a, b), b_.CreateFAdd(a, b), r);
}

Value* ScalarOps::intMin(Value* a, Value* b, DType t) {
  Value* lt = isUnsignedLike(t) ? b_.CreateICmpULT(b, a) : b_.CreateICmpSLT(b, a);
  return b_.CreateSelect(lt, b, a);
}

Value* ScalarOps::intMax(Value* a, Value* b, DType t) {
  Value* lt = isUnsignedLike(t) ? b_.CreateICmpULT(a, b) : b_.CreateICmpSLT(a, b);
  return b_.CreateSelect(lt, b, a);
}

Value* ScalarOps::intrinsic(llvm::Intrinsic::ID id, Value* a) { return b_.CreateIntrinsic(id, {a->getType()}, {a}); }

Value* ScalarOps::intrinsic(llvm::Intrinsic::ID id, Value* a, Value* b) {
  return b_.CreateIntrinsic(id, {a->getType()}, {a, b});
}

// exp(x) = 2^n * e^r with n = round(x / ln 2) and r = x - n ln 2 in [-ln2/2, ln2/2] (ln 2 in two parts,
// so r is exact to a few ulp), e^r by Cephes' degree-6 minimax polynomial (about 1 ulp), and 2^n as
// two power-of-two factors so that results down in the subnormals round once. x is clamped to
// +-150 first (e^150 overflows and e^-150 underflows in f32 anyway, and n then fits an i32); a NaN
// passes through. The same instructions run in the scalar remainder and the vector body, so a result
// does not depend on how a loop was split.
Value* ScalarOps::inlineExpF32(Value* x, bool nonPositive) {
  llvm::Type* ft = x->getType();
  llvm::Type* it = b_.getInt32Ty();
  if (auto* vt = llvm::dyn_cast<llvm::VectorType>(ft)) it = llvm::VectorType::get(it, vt->getElementCount());
  auto c = [&](double v) { return llvm::ConstantFP::get(ft, v); };
  auto ci = [&](int64_t v) { return llvm::ConstantInt::get(it, static_cast<uint64_t>(v), true); };
  auto fma = [&](Value* a, Value* m, Value* d) { return b_.CreateIntrinsic(llvm::Intrinsic::fma, {ft}, {a, m, d}); };
  auto pow2 = [&](Value* e) { return b_.CreateBitCast(b_.CreateShl(b_.CreateAdd(e, ci(127)), ci(23)), ft); };
  // exp(xc) = 2^n * p(r): n = round(xc / ln 2), r = xc - n ln 2 (in two parts), p of degree 7.
  Value* xc;
  Value* underflows = nullptr;
  if (nonPositive) {
    // Of a value known <= 0 (kir::KernelBuilder::expOfNonPositive): from -87.34 on 2^n is a normal
    // float, so one exponent scale does, no upper clamp, and a NaN needs no select (it stays NaN
    // through the polynomial and the scale); below, the result is 0 (see `underflows` below). 18
    // vector ops instead of 25 for a softmax's exps.
    underflows = b_.CreateFCmpOLT(x, c(-87.33654));
    xc = b_.CreateSelect(underflows, c(-87.33654), x);
  } else {
    xc = b_.CreateSelect(b_.CreateFCmpOLT(x, c(-150.0)), c(-150.0), x);
    xc = b_.CreateSelect(b_.CreateFCmpOGT(xc, c(150.0)), c(150.0), xc);
  }
  Value* n = intrinsic(llvm::Intrinsic::roundeven, b_.CreateFMul(xc, c(1.44269504088896341)));
  Value* r = fma(n, c(-0.693359375), xc);
  r = fma(n, c(2.12194440e-4), r);
  Value* p = c(1.9875691500e-4);
  for (double coefficient : {1.3981999507e-3, 8.3334519073e-3, 4.1665795894e-2, 1.6666665459e-1, 5.0000001201e-1})
    p = fma(p, r, c(coefficient));
  p = b_.CreateFAdd(fma(p, b_.CreateFMul(r, r), r), c(1.0));
  Value* ni = b_.CreateFPToSI(n, it);
  // 0, not FLT_MIN, below the normal range: a softmax whose masked scores are -inf would otherwise
  // hand the next GEMM a row of subnormals (FLT_MIN / sum), and CPUs that multiply subnormals in
  // microcode (Intel's) ran GPT-2's causal P.V 80x slower (14.7 against 0.18 ms).
  if (nonPositive) return b_.CreateSelect(underflows, c(0.0), b_.CreateFMul(p, pow2(ni)));
  // 2^n in two factors, so that results down to the smallest subnormal (n = -149) are exact.
  Value* n1 = b_.CreateAShr(ni, ci(1));
  Value* n2 = b_.CreateSub(ni, n1);
  Value* result = b_.CreateFMul(b_.CreateFMul(p, pow2(n1)), pow2(n2));
  return b_.CreateSelect(b_.CreateFCmpUNO(x, x), x, result);
}

namespace {
// Pure for our purposes (errno is never read), so LICM, CSE and the vectoriser may move it.
void markPure(llvm::Function* fn) {
  fn->setDoesNotThrow();
  fn->setDoesNotAccessMemory();
  fn->addFnAttr(llvm::Attribute::WillReturn);
}

llvm::CallInst* pureCall(llvm::IRBuilderBase& b, llvm::FunctionCallee callee, const std::vector<Value*>& args) {
  llvm::CallInst* call = b.CreateCall(callee, args);
  call->setDoesNotAccessMemory();
  call->setDoesNotThrow();
  return call;
}
}  // namespace

Value* ScalarOps::mathCall(const char* name, Value* a, DType t) {
  std::string fname = name;
  if (t == DType::F32) fname += "f";
  llvm::Type* ty = a->getType();
  llvm::FunctionCallee callee = m_.getOrInsertFunction(fname, llvm::FunctionType::get(ty, {ty}, false));
  if (auto* fn = llvm::dyn_cast<llvm::Function>(callee.getCallee())) markPure(fn);
  return pureCall(b_, callee, {a});
}

const std::vector<std::string>& vectorMathFunctions() {
  // Not pow: libmvec's powf takes a slow scalar path for negative bases, so (x - mean)^2 in a
  // decomposed LayerNorm ran ~20% slower than with scalar powf.
  static const std::vector<std::string> names = {"exp",  "log",  "sin",  "cos",   "tan",   "asin",  "acos", "atan",
                                                 "sinh", "cosh", "tanh", "asinh", "acosh", "atanh", "erf"};
  return names;
}

std::string vectorMathWrapperName(const std::string& name) { return "nnc.vm." + name + "f"; }

// The x86-64 vector function ABI names: b = SSE (4 lanes), d = AVX2 (8 lanes), e = AVX-512 (16
// lanes); `v`: one vector argument.
std::string vectorMathVariantName(const std::string& name, unsigned lanes) {
  return std::string(lanes == 16 ? "_ZGVeN16v_" : lanes == 8 ? "_ZGVdN8v_" : "_ZGVbN4v_") + name + "f";
}

namespace {
// libmvec's `lanes`-wide variant of `name` (f32, `arity` vector arguments), declared pure.
llvm::FunctionCallee vectorMathVariant(llvm::Module& m, const char* name, unsigned lanes, size_t arity) {
  auto* vecTy = llvm::FixedVectorType::get(llvm::Type::getFloatTy(m.getContext()), lanes);
  llvm::FunctionCallee variant =
      m.getOrInsertFunction(vectorMathVariantName(name, lanes),
                            llvm::FunctionType::get(vecTy, std::vector<llvm::Type*>(arity, vecTy), false));
  if (auto* fn = llvm::dyn_cast<llvm::Function>(variant.getCallee())) markPure(fn);
  return variant;
}
}  // namespace

// Every element, in the vectorised body and in scalar remainders alike, is computed by the same
// libmvec variant (the wrapper splats its argument and takes lane 0), so results do not depend on
// how the outer range is split across calls or threads. The wrapper is noinline so the vectoriser
// sees a plain scalar call that the TLI mapping in cpu_backend.cpp widens.
Value* ScalarOps::vectorMathCall(const char* name, DType t, Value* a, Value* b) {
  if (vectorMathLanes_ == 0 || t != DType::F32) return nullptr;
  const unsigned lanes = vectorMathLanes_;
  const size_t arity = b ? 2 : 1;
  if (auto* vt = llvm::dyn_cast<llvm::FixedVectorType>(a->getType())) {
    // A vector of the variant's width (the vector emitter's): the variant itself.
    if (vt->getNumElements() != lanes) return nullptr;
    return pureCall(b_, vectorMathVariant(m_, name, lanes, arity),
                    b ? std::vector<Value*>{a, b} : std::vector<Value*>{a});
  }
  const std::string wrapperName = vectorMathWrapperName(name);
  llvm::Function* wrapper = m_.getFunction(wrapperName);
  if (!wrapper) {
    llvm::LLVMContext& c = m_.getContext();
    llvm::Type* f32 = b_.getFloatTy();
    llvm::FunctionCallee variant = vectorMathVariant(m_, name, lanes, arity);
    wrapper = llvm::Function::Create(llvm::FunctionType::get(f32, std::vector<llvm::Type*>(arity, f32), false),
                                     llvm::GlobalValue::InternalLinkage, wrapperName, m_);
    markPure(wrapper);
    wrapper->addFnAttr(llvm::Attribute::NoInline);
    // The kernel's target attributes: the AVX2 variant takes its vector in a ymm register.
    if (llvm::BasicBlock* bb = b_.GetInsertBlock()) {
      llvm::Function* caller = bb->getParent();
      for (const char* attr : {"target-cpu", "target-features"})
        if (caller->hasFnAttribute(attr)) wrapper->addFnAttr(caller->getFnAttribute(attr));
    }
    llvm::IRBuilder<> wb(llvm::BasicBlock::Create(c, "entry", wrapper));
    std::vector<Value*> args;
    for (llvm::Argument& arg : wrapper->args()) args.push_back(wb.CreateVectorSplat(lanes, &arg));
    wb.CreateRet(wb.CreateExtractElement(pureCall(wb, variant, args), uint64_t{0}));
  }
  return pureCall(b_, wrapper, b ? std::vector<Value*>{a, b} : std::vector<Value*>{a});
}

Value* ScalarOps::unary(const kir::ExprNode& n, Value* a, DType at, std::string* error) {
  namespace I = llvm::Intrinsic;
  if (isFloat(at)) {
    // f32 transcendentals through libmvec when enabled (see vectorMathCall).
    const char* vm = nullptr;
    switch (n.op) {
      case ExprOp::Exp: vm = "exp"; break;
      case ExprOp::Log: vm = "log"; break;
      case ExprOp::Sin: vm = "sin"; break;
      case ExprOp::Cos: vm = "cos"; break;
      case ExprOp::Tan: vm = "tan"; break;
      case ExprOp::Asin: vm = "asin"; break;
      case ExprOp::Acos: vm = "acos"; break;
      case ExprOp::Atan: vm = "atan"; break;
      case ExprOp::Sinh: vm = "sinh"; break;
      case ExprOp::Cosh: vm = "cosh"; break;
      case ExprOp::Tanh: vm = "tanh"; break;
      case ExprOp::Asinh: vm = "asinh"; break;
      case ExprOp::Acosh: vm = "acosh"; break;
      case ExprOp::Atanh: vm = "atanh"; break;
      case ExprOp::Erf: vm = "erf"; break;
      default: break;
    }
    if (n.op == ExprOp::Exp && at == DType::F32 && vectorMathLanes_ != 0)
      return inlineExpF32(a, n.ival == kir::kExpOfNonPositive);
    if (vm)
      if (Value* r = vectorMathCall(vm, at, a)) return r;
    switch (n.op) {
      case ExprOp::Neg: return b_.CreateFNeg(a);
      case ExprOp::Abs: return intrinsic(I::fabs, a);
      case ExprOp::Exp: return intrinsic(I::exp, a);
      case ExprOp::Log: return intrinsic(I::log, a);
      case ExprOp::Sqrt: return intrinsic(I::sqrt, a);
      case ExprOp::Sin: return intrinsic(I::sin, a);
      case ExprOp::Cos: return intrinsic(I::cos, a);
      case ExprOp::Floor: return intrinsic(I::floor, a);
      case ExprOp::Ceil: return intrinsic(I::ceil, a);
      case ExprOp::Trunc: return intrinsic(I::trunc, a);
      case ExprOp::RoundEven: return intrinsic(I::roundeven, a);
      case ExprOp::Tan: return mathCall("tan", a, at);
      case ExprOp::Asin: return mathCall("asin", a, at);
      case ExprOp::Acos: return mathCall("acos", a, at);
      case ExprOp::Atan: return mathCall("atan", a, at);
      case ExprOp::Sinh: return mathCall("sinh", a, at);
      case ExprOp::Cosh: return mathCall("cosh", a, at);
      case ExprOp::Tanh: return mathCall("tanh", a, at);
      case ExprOp::Asinh: return mathCall("asinh", a, at);
      case ExprOp::Acosh: return mathCall("acosh", a, at);
      case ExprOp::Atanh: return mathCall("atanh", a, at);
      case ExprOp::Erf: return mathCall("erf", a, at);
      case ExprOp::IsNaN: return b_.CreateFCmpUNO(a, a);
      case ExprOp::IsInf: {
        Value* r = b_.getFalse();
        if (n.ival & 1) r = b_.CreateOr(r, b_.CreateFCmpOEQ(a, llvm::ConstantFP::getInfinity(a->getType(), false)));
        if (n.ival & 2) r = b_.CreateOr(r, b_.CreateFCmpOEQ(a, llvm::ConstantFP::getInfinity(a->getType(), true)));
        return r;
      }
      case ExprOp::RoundToF16:
      case ExprOp::RoundToBF16: {
        Value* f = cast(a, at, DType::F32);
        Value* r = n.op == ExprOp::RoundToF16 ? f16BitsToF32(f32ToF16Bits(f)) : bf16BitsToF32(f32ToBF16Bits(f));
        return cast(r, DType::F32, n.dtype);
      }
      default: break;
    }
  } else {
    switch (n.op) {
      case ExprOp::Neg: return b_.CreateNeg(a);
      case ExprOp::Abs:
        if (isUnsignedLike(at)) return a;
        return b_.CreateIntrinsic(I::abs, {a->getType()}, {a, b_.getFalse()});  // INT_MIN stays INT_MIN
      case ExprOp::Not: return b_.CreateNot(toBool(a));
      case ExprOp::BitNot: return b_.CreateNot(a);
      case ExprOp::Floor:
      case ExprOp::Ceil:
      case ExprOp::RoundEven:
      case ExprOp::Trunc: return a;
      default: break;
    }
  }
  *error =
      std::string(kir::exprOpName(n.op)) + " on " + std::string(dtypeName(at)) + " is not supported by the cpu backend";
  return nullptr;
}

// Integer Div/FloorDiv/Rem/FloorMod. Division by zero yields 0; signed division by -1 is done as a
// wrapping negation (x86 traps on INT_MIN / -1), and the remainder by -1 is 0.
Value* ScalarOps::intDivRem(ExprOp op, Value* a, Value* b, DType t) {
  llvm::Type* ty = a->getType();
  Value* zero = llvm::ConstantInt::get(ty, 0);
  Value* one = llvm::ConstantInt::get(ty, 1);
  Value* isZero = b_.CreateICmpEQ(b, zero);
  if (isUnsignedLike(t)) {
    Value* safeB = b_.CreateSelect(isZero, one, b);
    bool isDiv = op == ExprOp::Div || op == ExprOp::FloorDiv;
    Value* r = isDiv ? b_.CreateUDiv(a, safeB) : b_.CreateURem(a, safeB);
    return b_.CreateSelect(isZero, zero, r);
  }
  Value* isNegOne = b_.CreateICmpEQ(b, llvm::ConstantInt::getSigned(ty, -1));
  Value* safeB = b_.CreateSelect(b_.CreateOr(isZero, isNegOne), one, b);
  Value* q = b_.CreateSDiv(a, safeB);
  Value* r = b_.CreateSRem(a, safeB);
  // Floor variants: adjust when the remainder is non-zero and its sign differs from b's.
  Value* adjust = b_.CreateAnd(b_.CreateICmpNE(r, zero), b_.CreateICmpSLT(b_.CreateXor(r, b), zero));
  switch (op) {
    case ExprOp::Div: return b_.CreateSelect(isZero, zero, b_.CreateSelect(isNegOne, b_.CreateNeg(a), q));
    case ExprOp::FloorDiv:
      q = b_.CreateSelect(adjust, b_.CreateSub(q, one), q);
      return b_.CreateSelect(isZero, zero, b_.CreateSelect(isNegOne, b_.CreateNeg(a), q));
    case ExprOp::Rem: return b_.CreateSelect(b_.CreateOr(isZero, isNegOne), zero, r);
    default:  // FloorMod
      r = b_.CreateSelect(adjust, b_.CreateAdd(r, b), r);
      return b_.CreateSelect(b_.CreateOr(isZero, isNegOne), zero, r);
  }
}

// Shl/Shr: a shift amount >= the width (as an unsigned 64-bit value) yields 0; Shr is logical for
// unsigned types and arithmetic for signed ones.
Value* ScalarOps::shift(ExprOp op, Value* a, DType at, Value* b, DType bt) {
  llvm::Type* ty = a->getType();
  unsigned width = ty->getIntegerBitWidth();
  Value* b64 = b_.CreateIntCast(b, b_.getInt64Ty(), /*isSigned=*/!isUnsignedLike(bt));
  Value* tooBig = b_.CreateICmpUGE(b64, b_.getInt64(width));
  Value* amount = b_.CreateTrunc(b_.CreateSelect(tooBig, b_.getInt64(0), b64), ty);
  Value* r;
  if (op == ExprOp::Shl)
    r = b_.CreateShl(a, amount);
  else
    r = isUnsignedLike(at) ? b_.CreateLShr(a, amount) : b_.CreateAShr(a, amount);
  return b_.CreateSelect(tooBig, llvm::ConstantInt::get(ty, 0), r);
}

// A graph's a * b + c may become one fused multiply-add (one rounding instead of two: never less
// accurate). Without it every depthwise tap and every pointwise product-sum costs two vector ops.
Value* ScalarOps::contractable(Value* v) {
  if (auto* i = llvm::dyn_cast<llvm::Instruction>(v)) {
    llvm::FastMathFlags fmf = i->getFastMathFlags();
    fmf.setAllowContract();
    i->setFastMathFlags(fmf);
  }
  return v;
}

Value* ScalarOps::binary(const kir::ExprNode& n, Value* a, DType at, Value* b, DType bt, std::string* error) {
  if (n.op == ExprOp::Shl || n.op == ExprOp::Shr) {
    if (isInteger(at) && (isInteger(bt) || bt == DType::Bool)) return shift(n.op, a, at, b, bt);
  } else if (isFloat(at)) {
    switch (n.op) {
      case ExprOp::Add: return contractable(b_.CreateFAdd(a, b));
      case ExprOp::Sub: return contractable(b_.CreateFSub(a, b));
      case ExprOp::Mul: return contractable(b_.CreateFMul(a, b));
      case ExprOp::Div: return b_.CreateFDiv(a, b);
      case ExprOp::FloorDiv: return intrinsic(llvm::Intrinsic::floor, b_.CreateFDiv(a, b));
      case ExprOp::Rem: return b_.CreateFRem(a, b);
      case ExprOp::FloorMod: {
        Value* z = b_.CreateFRem(a, b);
        Value* zero = llvm::ConstantFP::get(a->getType(), 0.0);
        Value* adjust =
            b_.CreateAnd(b_.CreateFCmpONE(z, zero), b_.CreateXor(b_.CreateFCmpOLT(z, zero), b_.CreateFCmpOLT(b, zero)));
        return b_.CreateSelect(adjust, b_.CreateFAdd(z, b), z);
      }
      case ExprOp::Pow: return intrinsic(llvm::Intrinsic::pow, a, b);
      case ExprOp::Min: return floatMin(a, b);
      case ExprOp::Max: return floatMax(a, b);
      case ExprOp::Eq: return b_.CreateFCmpOEQ(a, b);
      case ExprOp::Ne: return b_.CreateFCmpUNE(a, b);
      case ExprOp::Lt: return b_.CreateFCmpOLT(a, b);
      case ExprOp::Le: return b_.CreateFCmpOLE(a, b);
      case ExprOp::Gt: return b_.CreateFCmpOGT(a, b);
      case ExprOp::Ge: return b_.CreateFCmpOGE(a, b);
      default: break;
    }
  } else {
    const bool u = isUnsignedLike(at);
    switch (n.op) {
      case ExprOp::Add: return b_.CreateAdd(a, b);
      case ExprOp::Sub: return b_.CreateSub(a, b);
      case ExprOp::Mul: return b_.CreateMul(a, b);
      case ExprOp::Div:
      case ExprOp::FloorDiv:
      case ExprOp::Rem:
      case ExprOp::FloorMod: return intDivRem(n.op, a, b, at);
      case ExprOp::Pow: {  // through f64, saturating back like the interpreter
        Value* r = intrinsic(llvm::Intrinsic::pow, cast(a, at, DType::F64), cast(b, bt, DType::F64));
        return cast(r, DType::F64, n.dtype);
      }
      case ExprOp::Min: return intMin(a, b, at);
      case ExprOp::Max: return intMax(a, b, at);
      case ExprOp::And: return b_.CreateAnd(toBool(a), toBool(b));
      case ExprOp::Or: return b_.CreateOr(toBool(a), toBool(b));
      case ExprOp::Xor: return b_.CreateXor(toBool(a), toBool(b));
      case ExprOp::BitAnd: return b_.CreateAnd(a, b);
      case ExprOp::BitOr: return b_.CreateOr(a, b);
      case ExprOp::BitXor: return b_.CreateXor(a, b);
      case ExprOp::Eq: return b_.CreateICmpEQ(a, b);
      case ExprOp::Ne: return b_.CreateICmpNE(a, b);
      case ExprOp::Lt: return u ? b_.CreateICmpULT(a, b) : b_.CreateICmpSLT(a, b);
      case ExprOp::Le: return u ? b_.CreateICmpULE(a, b) : b_.CreateICmpSLE(a, b);
      case ExprOp::Gt: return u ? b_.CreateICmpUGT(a, b) : b_.CreateICmpSGT(a, b);
      case ExprOp::Ge: return u ? b_.CreateICmpUGE(a, b) : b_.CreateICmpSGE(a, b);
      default: break;
    }
  }
  *error =
      std::string(kir::exprOpName(n.op)) + " on " + std::string(dtypeName(at)) + " is not supported by the cpu backend";
  return nullptr;
}

}  // namespace nnc::codegen::llvmcpu
