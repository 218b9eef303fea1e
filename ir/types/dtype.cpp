// DType tables stamped from nnc/dtype.def, and bit-exact f16/bf16 <-> f32 conversions.
#include "nnc/dtype.h"

#include <cmath>
#include <cstring>

#include "nnc/status.h"

namespace nnc {

namespace {

struct DTypeInfo {
  std::string_view name;
  size_t size;
  int onnx;
};

constexpr DTypeInfo kInfo[] = {
#define NNC_DTYPE(e, name, ctype, size, onnx) {name, size, onnx},
#include "nnc/dtype.def"
#undef NNC_DTYPE
};
static_assert(sizeof(kInfo) / sizeof(kInfo[0]) == kNumDTypes, "dtype tables out of sync");

// Every C type in the list has the size the table claims.
#define NNC_DTYPE(e, name, ctype, size, onnx) static_assert(sizeof(ctype) == size, #e " size");
#include "nnc/dtype.def"
#undef NNC_DTYPE

const DTypeInfo& info(DType t) {
  auto i = static_cast<size_t>(t);
  NNC_CHECK(i < static_cast<size_t>(kNumDTypes), "bad DType value");
  return kInfo[i];
}

uint32_t floatBits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}

float bitsFloat(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

}  // namespace

std::string_view dtypeName(DType t) { return info(t).name; }
size_t dtypeSize(DType t) { return info(t).size; }
int dtypeToOnnx(DType t) { return info(t).onnx; }

std::optional<DType> dtypeFromOnnx(int onnxType) {
  for (int i = 0; i < kNumDTypes; ++i)
    if (kInfo[i].onnx == onnxType) return static_cast<DType>(i);
  return std::nullopt;
}

std::optional<DType> dtypeFromName(std::string_view name) {
  for (int i = 0; i < kNumDTypes; ++i)
    if (kInfo[i].name == name) return static_cast<DType>(i);
  return std::nullopt;
}

float f16ToF32(uint16_t h) {
  uint32_t sign = static_cast<uint32_t>(h & 0x8000) << 16;
  uint32_t exp = (h >> 10) & 0x1f;
  uint32_t mant = h & 0x3ff;
  if (exp == 0) {
    // Zero or subnormal: mant * 2^-24, exact in f32.
    float v = std::ldexp(static_cast<float>(mant), -24);
    return sign ? -v : v;
  }
  if (exp == 31) return bitsFloat(sign | 0x7f800000u | (mant << 13));  // inf / nan (payload kept)
  return bitsFloat(sign | ((exp + 127 - 15) << 23) | (mant << 13));
}

uint16_t f32ToF16(float f) {
  uint32_t x = floatBits(f);
  auto sign = static_cast<uint16_t>((x >> 16) & 0x8000);
  uint32_t absx = x & 0x7fffffffu;
  if (absx >= 0x7f800000u) {
    if (absx == 0x7f800000u) return sign | 0x7c00;
    // NaN: keep the top payload bits and force quiet so it never turns into inf.
    return static_cast<uint16_t>(sign | 0x7e00 | ((absx >> 13) & 0x3ff));
  }
  // 65520 (= max half + half an ulp) and above round to inf (the tie goes to the even inf).
  if (absx >= 0x477ff000u) return sign | 0x7c00;
  int exp = static_cast<int>(absx >> 23) - 127;
  if (exp >= -14) {
    // Normal half: drop 13 mantissa bits with round-to-nearest-even; a carry correctly bumps the
    // exponent.
    uint32_t half = (static_cast<uint32_t>(exp + 15) << 10) | ((absx >> 13) & 0x3ff);
    uint32_t rem = absx & 0x1fff;
    if (rem > 0x1000 || (rem == 0x1000 && (half & 1))) ++half;
    return static_cast<uint16_t>(sign | half);
  }
  // Subnormal half (value = m * 2^-24). At or below 2^-25 rounds to zero (2^-25 is a tie -> even 0).
  if (absx <= 0x33000000u) return sign;
  uint32_t m = (absx & 0x7fffff) | 0x800000;  // 24-bit significand, value m * 2^(exp-23)
  int shift = -exp - 1;                       // in [14, 24]
  uint32_t half = m >> shift;
  uint32_t rem = m & ((1u << shift) - 1);
  uint32_t halfway = 1u << (shift - 1);
  if (rem > halfway || (rem == halfway && (half & 1))) ++half;
  return static_cast<uint16_t>(sign | half);
}

float bf16ToF32(uint16_t h) { return bitsFloat(static_cast<uint32_t>(h) << 16); }

uint16_t f32ToBF16(float f) {
  uint32_t x = floatBits(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x0040);  // quiet NaN
  // Round to nearest even on the dropped 16 bits; overflow carries into inf as it should.
  uint32_t rounding = 0x7fff + ((x >> 16) & 1);
  return static_cast<uint16_t>((x + rounding) >> 16);
}

}  // namespace nnc
