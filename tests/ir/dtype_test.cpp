// DType tables and the f16/bf16 conversions against known bit patterns (values from numpy /
// ml_dtypes, e.g. np.float16(0.1).view(np.uint16) == 0x2E66).
#include "nnc/dtype.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

namespace nnc {
namespace {

float fromBits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

TEST(DType, Tables) {
  EXPECT_EQ(dtypeName(DType::F32), "f32");
  EXPECT_EQ(dtypeName(DType::BF16), "bf16");
  EXPECT_EQ(dtypeSize(DType::I64), 8u);
  EXPECT_EQ(dtypeSize(DType::F16), 2u);
  EXPECT_EQ(dtypeSize(DType::Bool), 1u);
  EXPECT_EQ(dtypeToOnnx(DType::F32), 1);
  EXPECT_EQ(dtypeToOnnx(DType::I64), 7);
  EXPECT_EQ(dtypeToOnnx(DType::BF16), 16);
  EXPECT_EQ(dtypeFromOnnx(10), DType::F16);
  EXPECT_EQ(dtypeFromOnnx(9), DType::Bool);
  EXPECT_FALSE(dtypeFromOnnx(8).has_value());  // STRING is not supported
  EXPECT_EQ(dtypeFromName("u16"), DType::U16);
  EXPECT_FALSE(dtypeFromName("float").has_value());
  for (int i = 0; i < kNumDTypes; ++i) {
    auto t = static_cast<DType>(i);
    EXPECT_EQ(dtypeFromName(dtypeName(t)), t);
    EXPECT_EQ(dtypeFromOnnx(dtypeToOnnx(t)), t);
  }
}

TEST(DType, F32ToF16KnownPatterns) {
  EXPECT_EQ(f32ToF16(1.0f), 0x3C00);
  EXPECT_EQ(f32ToF16(-2.0f), 0xC000);
  EXPECT_EQ(f32ToF16(0.1f), 0x2E66);
  EXPECT_EQ(f32ToF16(1.0f / 3.0f), 0x3555);
  EXPECT_EQ(f32ToF16(65504.0f), 0x7BFF);
  EXPECT_EQ(f32ToF16(65519.0f), 0x7BFF);
  EXPECT_EQ(f32ToF16(65520.0f), 0x7C00);  // halfway to the next binade: rounds to inf
  EXPECT_EQ(f32ToF16(1e10f), 0x7C00);
  EXPECT_EQ(f32ToF16(-1e10f), 0xFC00);
  EXPECT_EQ(f32ToF16(std::numeric_limits<float>::infinity()), 0x7C00);
  EXPECT_EQ(f32ToF16(-std::numeric_limits<float>::infinity()), 0xFC00);
  EXPECT_EQ(f32ToF16(0.0f), 0x0000);
  EXPECT_EQ(f32ToF16(-0.0f), 0x8000);
  EXPECT_EQ(f32ToF16(6.103515625e-05f), 0x0400);        // smallest normal 2^-14
  EXPECT_EQ(f32ToF16(5.960464477539063e-08f), 0x0001);  // smallest subnormal 2^-24
  EXPECT_EQ(f32ToF16(6.097555160522461e-05f), 0x03FF);  // largest subnormal
  EXPECT_EQ(f32ToF16(1e-9f), 0x0000);
}

TEST(DType, F32ToF16RoundsToNearestEven) {
  EXPECT_EQ(f32ToF16(1.00048828125f), 0x3C00);          // 1 + 2^-11: tie, even is 0x3C00
  EXPECT_EQ(f32ToF16(1.00146484375f), 0x3C02);          // 1 + 3*2^-11: tie, even is 0x3C02
  EXPECT_EQ(f32ToF16(1.0005f), 0x3C01);                 // just above the tie
  EXPECT_EQ(f32ToF16(2.980232238769531e-08f), 0x0000);  // 2^-25: subnormal tie -> 0
  EXPECT_EQ(f32ToF16(8.940696716308594e-08f), 0x0002);  // 3*2^-25: tie between 1 and 2 -> 2
  EXPECT_EQ(f32ToF16(3.0e-08f), 0x0001);                // just above 2^-25
  EXPECT_EQ(f32ToF16(2047.5f), 0x6800);                 // 2047.5 ulp=1 at 1024..2048: tie -> 2048
}

TEST(DType, F32ToF16NaN) {
  uint16_t h = f32ToF16(std::numeric_limits<float>::quiet_NaN());
  EXPECT_EQ(h & 0x7C00, 0x7C00);
  EXPECT_NE(h & 0x03FF, 0);
  // A signaling NaN whose payload lives only in the low bits must stay NaN, not become inf.
  uint16_t s = f32ToF16(fromBits(0x7F800001u));
  EXPECT_EQ(s & 0x7C00, 0x7C00);
  EXPECT_NE(s & 0x03FF, 0);
}

TEST(DType, F16ToF32) {
  EXPECT_EQ(f16ToF32(0x3C00), 1.0f);
  EXPECT_EQ(f16ToF32(0xC000), -2.0f);
  EXPECT_EQ(f16ToF32(0x3555), 0.333251953125f);
  EXPECT_EQ(f16ToF32(0x2E66), 0.0999755859375f);
  EXPECT_EQ(f16ToF32(0x7BFF), 65504.0f);
  EXPECT_EQ(f16ToF32(0x0001), 5.960464477539063e-08f);
  EXPECT_EQ(f16ToF32(0x03FF), 6.097555160522461e-05f);
  EXPECT_EQ(f16ToF32(0x8001), -5.960464477539063e-08f);
  EXPECT_EQ(f16ToF32(0x7C00), std::numeric_limits<float>::infinity());
  EXPECT_EQ(f16ToF32(0xFC00), -std::numeric_limits<float>::infinity());
  EXPECT_TRUE(std::isnan(f16ToF32(0x7E00)));
  EXPECT_TRUE(std::signbit(f16ToF32(0x8000)));
  // Every non-NaN half survives a round trip through f32.
  for (uint32_t h = 0; h < 0x10000; ++h) {
    bool nan = (h & 0x7C00) == 0x7C00 && (h & 0x3FF) != 0;
    if (nan) continue;
    ASSERT_EQ(f32ToF16(f16ToF32(static_cast<uint16_t>(h))), h) << std::hex << h;
  }
}

TEST(DType, BF16) {
  EXPECT_EQ(f32ToBF16(1.0f), 0x3F80);
  EXPECT_EQ(f32ToBF16(-2.0f), 0xC000);
  EXPECT_EQ(f32ToBF16(3.14159274f), 0x4049);                        // 0x40490FDB: rounds down
  EXPECT_EQ(f32ToBF16(fromBits(0x3F808000u)), 0x3F80);              // tie, even
  EXPECT_EQ(f32ToBF16(fromBits(0x3F818000u)), 0x3F82);              // tie, odd -> up
  EXPECT_EQ(f32ToBF16(fromBits(0x3F808001u)), 0x3F81);              // above the tie
  EXPECT_EQ(f32ToBF16(std::numeric_limits<float>::max()), 0x7F80);  // rounds to inf
  EXPECT_EQ(f32ToBF16(-std::numeric_limits<float>::infinity()), 0xFF80);
  EXPECT_EQ(f32ToBF16(fromBits(0x7F800001u)), 0x7FC0);  // signaling NaN -> quiet NaN
  EXPECT_EQ(bf16ToF32(0x3F80), 1.0f);
  EXPECT_EQ(bf16ToF32(0x4049), 3.140625f);
  EXPECT_EQ(bf16ToF32(0x0001), 9.183549615799121e-41f);  // subnormal
  EXPECT_TRUE(std::isnan(bf16ToF32(0x7FC0)));
}

TEST(DType, Predicates) {
  EXPECT_TRUE(isFloat(DType::BF16));
  EXPECT_FALSE(isFloat(DType::I32));
  EXPECT_TRUE(isSignedInt(DType::I8));
  EXPECT_TRUE(isUnsignedInt(DType::U64));
  EXPECT_FALSE(isInteger(DType::Bool));
  EXPECT_TRUE(isHalfLike(DType::F16));
}

}  // namespace
}  // namespace nnc
