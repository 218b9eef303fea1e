// Scalar kernel-IR operations as CUDA C++ expressions (internal to the CUDA backend): type names,
// literals, casts, storage conversions and the unary/binary ops of kir/expr_ops.def, with the
// semantics of kir/interpreter.cpp. Operands are already-emitted names or literals; results are
// expression strings the emitter binds to typed temporaries.
#pragma once

#include <string>

#include "kir/kernel_ir.h"
#include "nnc/dtype.h"

namespace nnc::codegen::cuda {

// The C type of a value of dtype `t` (never F16/BF16): bool, i8..u64, float, double.
const char* valueTypeName(DType t);
// The C type of one element in memory (Bool: u8, F16/BF16: u16 bits).
const char* storageTypeName(DType t);

// An exact literal for a Const node (floats round-trip; inf/nan through the prelude's macros).
std::string literal(const kir::ExprNode& n);
std::string intLiteral(DType t, int64_t v);

// Kernel-IR Cast semantics: float->int truncates and saturates (NaN -> 0), ->bool is `!= 0`.
std::string castExpr(const std::string& x, DType from, DType to);
// A loaded storage element -> its value, and a value -> the storage element (rounding f16/bf16).
std::string fromStorage(const std::string& raw, DType storage);
std::string toStorage(const std::string& v, DType valueType, DType storage);

// Unsupported operand types give an empty string and set *error.
std::string unaryExpr(const kir::ExprNode& n, const std::string& a, DType at, std::string* error);
std::string binaryExpr(const kir::ExprNode& n, const std::string& a, DType at, const std::string& b, DType bt,
                       std::string* error);

bool isUnsignedLike(DType t);  // unsigned ints and Bool
// The unsigned type integer arithmetic of `t` wraps in: u32 up to 32 bits, u64 above.
const char* wideUnsignedName(DType t);

}  // namespace nnc::codegen::cuda
