// Element types of tensors, and conversions between f16/bf16 and f32.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace nnc {

enum class DType : uint8_t {
#define NNC_DTYPE(e, name, ctype, size, onnx) e,
#include "nnc/dtype.def"
#undef NNC_DTYPE
};

inline constexpr int kNumDTypes = 0
#define NNC_DTYPE(e, name, ctype, size, onnx) +1
#include "nnc/dtype.def"
#undef NNC_DTYPE
    ;

std::string_view dtypeName(DType t);
size_t dtypeSize(DType t);
int dtypeToOnnx(DType t);
std::optional<DType> dtypeFromOnnx(int onnxType);
std::optional<DType> dtypeFromName(std::string_view name);

inline bool isFloat(DType t) { return t == DType::F32 || t == DType::F64 || t == DType::F16 || t == DType::BF16; }
inline bool isSignedInt(DType t) { return t == DType::I8 || t == DType::I16 || t == DType::I32 || t == DType::I64; }
inline bool isUnsignedInt(DType t) { return t == DType::U8 || t == DType::U16 || t == DType::U32 || t == DType::U64; }
inline bool isInteger(DType t) { return isSignedInt(t) || isUnsignedInt(t); }
// Storage-only types: computation happens in f32 (kernel IR never types an expression f16/bf16).
inline bool isHalfLike(DType t) { return t == DType::F16 || t == DType::BF16; }

float f16ToF32(uint16_t h);
uint16_t f32ToF16(float f);  // round to nearest even, with inf/nan
float bf16ToF32(uint16_t h);
uint16_t f32ToBF16(float f);  // round to nearest even, nan kept quiet

}  // namespace nnc
