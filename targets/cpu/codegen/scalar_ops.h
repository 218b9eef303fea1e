// Scalar kernel-IR operations as LLVM IR (internal to the CPU backend): types, constants, casts,
// f16/bf16 bit conversions and the unary/binary ops of kir/expr_ops.def, with the semantics of
// kir/interpreter.cpp (the executable specification).
#pragma once

#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/Module.h>

#include <string>
#include <vector>

#include "kir/kernel_ir.h"
#include "nnc/dtype.h"

namespace nnc::codegen::llvmcpu {

// Emits scalar operations at the builder's insertion point. f16/bf16 conversions use integer and
// f32 operations only, so generated code never calls a compiler-runtime helper (__extendhfsf2, ...).
class ScalarOps {
 public:
  ScalarOps(llvm::IRBuilder<>& b, llvm::Module& m) : b_(b), m_(m) {}

  // f32 transcendental math through glibc's libmvec (chosen in cpu_backend.cpp):
  // 0 keeps scalar libm calls/intrinsics; 4 (SSE) or 8 (AVX2) routes them through wrappers that
  // the loop vectoriser widens to that libmvec variant.
  void setVectorMathLanes(unsigned lanes) { vectorMathLanes_ = lanes; }

  // The type an expression of dtype `t` has in registers (Bool: i1). Never F16/BF16.
  llvm::Type* valueType(DType t) const;
  // The type of one element in memory (Bool: i8, F16/BF16: i16).
  llvm::Type* storageType(DType t) const;

  llvm::Value* constant(const kir::ExprNode& n) const;
  // Kernel-IR Cast semantics: float->int truncates and saturates (NaN -> 0), ->bool is `!= 0`.
  llvm::Value* cast(llvm::Value* v, DType from, DType to);
  // A loaded element (storage type) -> its expression value; and back, rounding to f16/bf16.
  llvm::Value* fromStorage(llvm::Value* v, DType storage);
  llvm::Value* toStorage(llvm::Value* v, DType valueDType, DType storage);

  // Unsupported operand types give nullptr and set *error.
  llvm::Value* unary(const kir::ExprNode& n, llvm::Value* a, DType at, std::string* error);
  llvm::Value* binary(const kir::ExprNode& n, llvm::Value* a, DType at, llvm::Value* b, DType bt, std::string* error);

  // NaN-propagating float min/max; for equal values (including ±0) they return `a` like std::min.
  llvm::Value* floatMin(llvm::Value* a, llvm::Value* b);
  llvm::Value* floatMax(llvm::Value* a, llvm::Value* b);
  // Integer/bool min/max and comparisons honour signedness (Bool and unsigned ints: unsigned).
  llvm::Value* intMin(llvm::Value* a, llvm::Value* b, DType t);
  llvm::Value* intMax(llvm::Value* a, llvm::Value* b, DType t);

  llvm::Value* f16BitsToF32(llvm::Value* bits);  // i16 -> float
  llvm::Value* f32ToF16Bits(llvm::Value* f);     // float -> i16, round to nearest even
  llvm::Value* bf16BitsToF32(llvm::Value* bits);
  llvm::Value* f32ToBF16Bits(llvm::Value* f);

 private:
  llvm::Value* intDivRem(kir::ExprOp op, llvm::Value* a, llvm::Value* b, DType t);
  llvm::Value* shift(kir::ExprOp op, llvm::Value* a, DType at, llvm::Value* b, DType bt);
  llvm::Value* contractable(llvm::Value* v);                         // may fuse into a multiply-add
  llvm::Value* mathCall(const char* name, llvm::Value* a, DType t);  // libm: name / name+"f"
  // An f32 call through the vector-math wrapper for libm function `name` (no "f"); nullptr when
  // vector math is off or `t` is not F32. `b` is the second operand of two-argument functions
  // (none at present; libmvec has pow, atan2 and hypot).
  llvm::Value* vectorMathCall(const char* name, DType t, llvm::Value* a, llvm::Value* b = nullptr);
  llvm::Value* intrinsic(llvm::Intrinsic::ID id, llvm::Value* a);
  llvm::Value* intrinsic(llvm::Intrinsic::ID id, llvm::Value* a, llvm::Value* b);
  // exp of an f32 (or f32 vector) value as inline arithmetic: no call, so the vectoriser widens it
  // to the loop's own width and keeps it in registers.
  llvm::Value* inlineExpF32(llvm::Value* x, bool nonPositive = false);
  llvm::Value* toBool(llvm::Value* v);
  llvm::Value* i32c(uint32_t v) { return b_.getInt32(v); }

  llvm::IRBuilder<>& b_;
  llvm::Module& m_;
  unsigned vectorMathLanes_ = 0;
};

// The f32 libm functions (without the "f") that have libmvec variants and a vector-math wrapper;
// the wrapper for `name` is vectorMathWrapperName(name), widened to vectorMathVariantName(...).
const std::vector<std::string>& vectorMathFunctions();
std::string vectorMathWrapperName(const std::string& name);
std::string vectorMathVariantName(const std::string& name, unsigned lanes);

bool isUnsignedLike(DType t);  // unsigned ints and Bool: unsigned comparisons and conversions

}  // namespace nnc::codegen::llvmcpu
