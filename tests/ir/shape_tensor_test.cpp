// Shape arithmetic and broadcasting; Tensor element access, copy-on-write and casts (expected values
// follow numpy's astype).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "nnc/shape.h"
#include "nnc/tensor.h"

namespace nnc {
namespace {

TEST(Shape, NumelStridesStr) {
  Shape s{2, 3, 4};
  EXPECT_EQ(s.rank(), 3);
  EXPECT_EQ(s.numel(), 24);
  EXPECT_EQ(s.checkedNumel(), 24);
  EXPECT_EQ(s.strides(), (std::vector<int64_t>{12, 4, 1}));
  EXPECT_EQ(s.str(), "[2x3x4]");
  EXPECT_EQ(Shape{}.str(), "[]");
  EXPECT_EQ(Shape{}.numel(), 1);
  EXPECT_EQ(Shape{}.checkedNumel(), 1);
  EXPECT_TRUE(Shape{}.strides().empty());
  EXPECT_EQ((Shape{0, 5}).checkedNumel(), 0);
}

TEST(Shape, CheckedNumelRejectsNegativeAndHuge) {
  EXPECT_FALSE((Shape{2, -1}).checkedNumel().has_value());
  EXPECT_FALSE((Shape{0, -1}).checkedNumel().has_value());  // zero does not hide a negative dim
  EXPECT_EQ((Shape{int64_t{1} << 20, int64_t{1} << 20}).checkedNumel(), kMaxElements);
  EXPECT_FALSE((Shape{int64_t{1} << 20, (int64_t{1} << 20) + 1}).checkedNumel().has_value());
  // Would overflow int64 if multiplied naively.
  EXPECT_FALSE((Shape{int64_t{1} << 40, int64_t{1} << 40, 4}).checkedNumel().has_value());
  EXPECT_EQ((Shape{int64_t{1} << 40, int64_t{1} << 40, 0}).checkedNumel(), 0);
}

TEST(Shape, Broadcast) {
  EXPECT_EQ(broadcastShapes(Shape{2, 3}, Shape{3}), (Shape{2, 3}));
  EXPECT_EQ(broadcastShapes(Shape{2, 1, 4}, Shape{3, 1}), (Shape{2, 3, 4}));
  EXPECT_EQ(broadcastShapes(Shape{}, Shape{5}), (Shape{5}));
  EXPECT_EQ(broadcastShapes(Shape{1}, Shape{0}), (Shape{0}));
  EXPECT_EQ(broadcastShapes(Shape{0, 1}, Shape{1, 7}), (Shape{0, 7}));
  EXPECT_FALSE(broadcastShapes(Shape{2, 3}, Shape{4}).has_value());
  EXPECT_FALSE(broadcastShapes(Shape{2}, Shape{0}).has_value());
}

TEST(Shape, NormalizeAxis) {
  EXPECT_EQ(normalizeAxis(-1, 4), 3);
  EXPECT_EQ(normalizeAxis(0, 4), 0);
  EXPECT_EQ(normalizeAxis(-4, 4), 0);
  EXPECT_FALSE(normalizeAxis(4, 4).has_value());
  EXPECT_FALSE(normalizeAxis(-5, 4).has_value());
  EXPECT_FALSE(normalizeAxis(0, 0).has_value());
}

TEST(Tensor, ConstructAndAccess) {
  Tensor z(DType::I32, Shape{2, 2});
  EXPECT_EQ(z.byteSize(), 16u);
  EXPECT_EQ(z.toInt64s(), (std::vector<int64_t>{0, 0, 0, 0}));
  Tensor s = Tensor::scalar(DType::F16, 0.1);
  EXPECT_EQ(s.shape(), Shape{});
  EXPECT_EQ(s.dataAs<uint16_t>()[0], 0x2E66);
  EXPECT_EQ(s.getDouble(0), 0.0999755859375);
  Tensor b = Tensor::scalar(DType::BF16, 1.0);
  EXPECT_EQ(b.dataAs<uint16_t>()[0], 0x3F80);
  Tensor i = Tensor::fromInt64s({3, -4, 5});
  EXPECT_EQ(i.dtype(), DType::I64);
  EXPECT_EQ(i.shape(), Shape{3});
  EXPECT_EQ(i.getInt(1), -4);
  EXPECT_EQ(i.getDouble(2), 5.0);
  Tensor f = Tensor::fromFloats({1.5f, -2.25f}, Shape{2, 1});
  EXPECT_EQ(f.getDouble(1), -2.25);
  EXPECT_EQ(f.getInt(1), -2);  // truncation toward zero
  Tensor t(DType::Bool, Shape{3});
  t.setDouble(0, 0.5);
  t.setDouble(1, 0.0);
  t.setInt(2, -7);
  EXPECT_EQ(t.toInt64s(), (std::vector<int64_t>{1, 0, 1}));
}

TEST(Tensor, SetDoubleTruncatesAndSaturates) {
  Tensor t(DType::I8, Shape{5});
  t.setDouble(0, -2.9);
  t.setDouble(1, 2.9);
  t.setDouble(2, 1000.0);
  t.setDouble(3, -1000.0);
  t.setDouble(4, std::nan(""));
  EXPECT_EQ(t.toInt64s(), (std::vector<int64_t>{-2, 2, 127, -128, 0}));
  Tensor u(DType::U64, Shape{1});
  u.setDouble(0, 1e19);
  EXPECT_EQ(u.dataAs<uint64_t>()[0], 10000000000000000000ull);
}

TEST(Tensor, CopyOnWrite) {
  Tensor a = Tensor::fromFloats({1, 2, 3}, Shape{3});
  Tensor b = a;
  EXPECT_EQ(a.data(), b.data());  // copying never copies the buffer
  b.setDouble(0, 42);
  EXPECT_NE(a.data(), b.data());
  EXPECT_EQ(a.getDouble(0), 1.0);
  EXPECT_EQ(b.getDouble(0), 42.0);
  const std::byte* before = b.data();
  b.setDouble(1, 7);  // sole owner now: no second copy
  EXPECT_EQ(b.data(), before);
  Tensor r = a.reshaped(Shape{1, 3});
  EXPECT_EQ(r.data(), a.data());
  EXPECT_EQ(r.shape(), (Shape{1, 3}));
}

TEST(Tensor, CastFloatToIntAndBool) {
  Tensor f = Tensor::fromFloats({-1.7f, 2.5f, 3.9f, -0.0f, 0.0f}, Shape{5});
  EXPECT_EQ(f.castTo(DType::I32).toInt64s(), (std::vector<int64_t>{-1, 2, 3, 0, 0}));
  EXPECT_EQ(f.castTo(DType::Bool).toInt64s(), (std::vector<int64_t>{1, 1, 1, 0, 0}));
  Tensor n = Tensor::fromFloats({std::numeric_limits<float>::quiet_NaN()}, Shape{1});
  EXPECT_EQ(n.castTo(DType::Bool).getInt(0), 1);  // np.array([np.nan]).astype(bool) -> True
}

TEST(Tensor, CastIntToInt) {
  // np.array([300, -1, 65537]).astype(np.uint8) -> [44, 255, 1]
  Tensor i = Tensor::fromInt64s({300, -1, 65537});
  EXPECT_EQ(i.castTo(DType::U8).toInt64s(), (std::vector<int64_t>{44, 255, 1}));
  // .astype(np.int16) -> [300, -1, 1]
  EXPECT_EQ(i.castTo(DType::I16).toInt64s(), (std::vector<int64_t>{300, -1, 1}));
  EXPECT_EQ(i.castTo(DType::Bool).toInt64s(), (std::vector<int64_t>{1, 1, 1}));
  Tensor big(DType::U64, Shape{1});
  big.mutableDataAs<uint64_t>()[0] = 18446744073709551615ull;
  EXPECT_EQ(big.castTo(DType::F64).getDouble(0), 18446744073709551616.0);
  EXPECT_EQ(big.castTo(DType::I64).getInt(0), -1);
  // int64 -> f32 rounds once: 2^24 + 1 -> 2^24 (ties to even)
  EXPECT_EQ(Tensor::fromInt64s({16777217}).castTo(DType::F32).dataAs<float>()[0], 16777216.0f);
}

TEST(Tensor, CastToHalfRoundsToNearestEven) {
  Tensor f = Tensor::fromFloats({0.1f, 65520.0f, 1.00048828125f, 1.0005f}, Shape{4});
  Tensor h = f.castTo(DType::F16);
  const uint16_t* bits = h.dataAs<uint16_t>();
  EXPECT_EQ(bits[0], 0x2E66);
  EXPECT_EQ(bits[1], 0x7C00);
  EXPECT_EQ(bits[2], 0x3C00);
  EXPECT_EQ(bits[3], 0x3C01);
  EXPECT_EQ(h.castTo(DType::F32).getDouble(0), 0.0999755859375);
  // f64 -> f16 must round once: 1 + 2^-11 + 2^-40 is just above the tie, so it rounds up (np.float16
  // gives 0x3C01), while rounding through f32 first would land on the tie and give 0x3C00.
  Tensor d(DType::F64, Shape{1});
  d.setDouble(0, 1.0 + std::ldexp(1.0, -11) + std::ldexp(1.0, -40));
  EXPECT_EQ(d.castTo(DType::F16).dataAs<uint16_t>()[0], 0x3C01);
  EXPECT_EQ(d.castTo(DType::BF16).dataAs<uint16_t>()[0], 0x3F80);
}

TEST(Tensor, BitwiseEqualAndSummary) {
  Tensor a = Tensor::fromFloats({1, 2, 3}, Shape{3});
  Tensor b = Tensor::fromFloats({1, 2, 3}, Shape{3});
  EXPECT_TRUE(a.bitwiseEqual(b));
  EXPECT_FALSE(a.bitwiseEqual(b.reshaped(Shape{1, 3})));
  EXPECT_FALSE(a.bitwiseEqual(a.castTo(DType::F64)));
  b.setDouble(2, 4);
  EXPECT_FALSE(a.bitwiseEqual(b));
  EXPECT_EQ(Tensor::fromFloats({1, 2.5f, 3}, Shape{3}).summary(), "f32[3]{1, 2.5, 3}");
  std::vector<int64_t> ten = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9};
  EXPECT_EQ(Tensor::fromInt64s(ten, Shape{2, 5}).summary(), "i64[2x5]{0, 1, 2, 3, 4, 5, 6, 7, ...}");
  EXPECT_EQ(Tensor().summary(), "f32[]{null}");
}

TEST(Tensor, FromBytes) {
  const uint8_t raw[] = {1, 0, 1};
  Tensor t = Tensor::fromBytes(DType::Bool, Shape{3}, raw, sizeof raw);
  EXPECT_EQ(t.toInt64s(), (std::vector<int64_t>{1, 0, 1}));
  Tensor empty = Tensor::fromBytes(DType::F32, Shape{0, 4}, nullptr, 0);
  EXPECT_EQ(empty.numel(), 0);
  EXPECT_FALSE(empty.isNull());
}

// Kernels read tensors and the weights blob in place with 64-byte vectors: their storage starts on a
// cache line whatever its size (std::vector's own allocation is 16-byte aligned), and a blob of a huge
// page or more on a huge page.
TEST(Tensor, StorageStartsOnACacheLine) {
  for (int64_t n : {1, 3, 5, 17, 100, 1000, 65537}) {
    Tensor t(DType::F32, Shape{n});
    EXPECT_EQ(reinterpret_cast<uintptr_t>(t.data()) % kCacheLineBytes, 0u) << n;
    Tensor copy = t;
    EXPECT_EQ(reinterpret_cast<uintptr_t>(copy.mutableData()) % kCacheLineBytes, 0u) << n;  // detached
  }
  for (size_t bytes : {size_t{1}, size_t{4095}, kHugePageBytes - 1, kHugePageBytes, 3 * kHugePageBytes + 5}) {
    WeightsBlob blob(bytes, 1);
    const size_t expected = bytes >= kHugePageBytes ? kHugePageBytes : kCacheLineBytes;
    EXPECT_EQ(reinterpret_cast<uintptr_t>(blob.data()) % expected, 0u) << bytes;
    blob.resize(bytes + 100);  // grown, as the plan builder appends weights
    EXPECT_EQ(reinterpret_cast<uintptr_t>(blob.data()) % kCacheLineBytes, 0u) << bytes;
    EXPECT_EQ(blob[bytes - 1], 1);
  }
}

}  // namespace
}  // namespace nnc
