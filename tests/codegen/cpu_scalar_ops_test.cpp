// CPU backend scalar semantics: f16/bf16 storage rounding, integer division corner cases, casts,
// shifts, select, comparisons and every unary math op; against pasted numpy values or float64
// formulas, and against the kernel-IR interpreter (cpu_test_util.h).
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>

#include "cpu_test_util.h"

namespace nnc::codegen {
namespace {

using kir::ExprId;
using kir::ExprOp;
using kir::KernelBuilder;
using testing::runChecked;

using ExprFn = std::function<ExprId(KernelBuilder&, const std::vector<ExprId>&)>;

// out[i] = f(in0[i], in1[i], ...) over n points; returns the JIT output (checked vs the interpreter).
Tensor elementwise(const std::string& name, const std::vector<Tensor>& inputs, DType outType, const ExprFn& f,
                   double relTol = 0, double absTol = 0) {
  KernelBuilder kb(name);
  const int64_t n = inputs.at(0).numel();
  std::vector<int> slots;
  for (size_t i = 0; i < inputs.size(); ++i)
    slots.push_back(kb.addParam("in" + std::to_string(i), inputs[i].dtype(), n, false));
  int out = kb.addParam("out", outType, n, true);
  auto v = kb.setOuter({n});
  std::vector<ExprId> loaded;
  for (int s : slots) loaded.push_back(kb.load(s, v[0]));
  kb.addStore(out, v[0], f(kb, loaded), false);
  std::vector<Tensor> init = inputs;
  init.emplace_back(outType, Shape{n});
  auto bufs = runChecked(kb.finish(), init, relTol, absTol);
  return bufs.empty() ? Tensor() : bufs.back();
}

Tensor fromBits32(const std::vector<uint32_t>& bits) {
  return Tensor::fromBytes(DType::F32, Shape{static_cast<int64_t>(bits.size())}, bits.data(), bits.size() * 4);
}

Tensor typed(DType t, const std::vector<double>& values) {
  Tensor out(t, Shape{static_cast<int64_t>(values.size())});
  for (size_t i = 0; i < values.size(); ++i) out.setDouble(static_cast<int64_t>(i), values[i]);
  return out;
}

Tensor ints(DType t, const std::vector<int64_t>& values) {
  Tensor out(t, Shape{static_cast<int64_t>(values.size())});
  for (size_t i = 0; i < values.size(); ++i) out.setInt(static_cast<int64_t>(i), values[i]);
  return out;
}

uint16_t bitsAt(const Tensor& t, int64_t i) {
  uint16_t h;
  std::memcpy(&h, t.data() + i * 2, 2);
  return h;
}

// The value of an IEEE binary16 pattern, from the format's definition (in double).
double halfValue(uint16_t h) {
  const int sign = (h >> 15) ? -1 : 1;
  const int exp = (h >> 10) & 0x1f;
  const int mant = h & 0x3ff;
  if (exp == 31) return mant ? std::numeric_limits<double>::quiet_NaN() : sign * INFINITY;
  if (exp == 0) return sign * std::ldexp(mant, -24);
  return sign * std::ldexp(1024 + mant, exp - 25);
}

// f32 inputs (as bits) and numpy's `np.float32(x).astype(np.float16).view(np.uint16)`.
const std::vector<uint32_t> kF16Inputs = {
    0x00000000, 0x80000000, 0x3f800000, 0x3f802000, 0x3f801000, 0x3f803000, 0x477fe000, 0x477feffd, 0x477ff000,
    0x49742400, 0xc9742400, 0x38800000, 0x33800000, 0x33000000, 0x33000001, 0x2edbe6ff, 0x40490fd0, 0xc02df84d,
    0x7f800000, 0xff800000, 0x3dcccccd, 0x3727c5ac, 0x383cbe62, 0xb8000000, 0x3fc00000, 0x45001000, 0x45003000};
const std::vector<uint16_t> kF16Numpy = {0x0000, 0x8000, 0x3c00, 0x3c01, 0x3c00, 0x3c02, 0x7bff, 0x7bff, 0x7c00,
                                         0x7c00, 0xfc00, 0x0400, 0x0001, 0x0000, 0x0001, 0x0000, 0x4248, 0xc170,
                                         0x7c00, 0xfc00, 0x2e66, 0x00a8, 0x02f3, 0x8200, 0x3e00, 0x6800, 0x6802};

TEST(CpuScalarOps, F16StoreRoundsToNearestEven) {
  Tensor out = elementwise("f16_store", {fromBits32(kF16Inputs)}, DType::F16,
                           [](KernelBuilder&, const std::vector<ExprId>& x) { return x[0]; });
  ASSERT_EQ(out.numel(), static_cast<int64_t>(kF16Numpy.size()));
  for (size_t i = 0; i < kF16Numpy.size(); ++i)
    EXPECT_EQ(bitsAt(out, i), kF16Numpy[i]) << "input 0x" << std::hex << kF16Inputs[i];
  // NaN stays NaN.
  Tensor nan = elementwise("f16_store_nan", {fromBits32({0x7fc00000, 0xffc00001, 0x7f800001})}, DType::F16,
                           [](KernelBuilder&, const std::vector<ExprId>& x) { return x[0]; });
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(std::isnan(halfValue(bitsAt(nan, i)))) << i;
}

TEST(CpuScalarOps, F16LoadIsExactForAllPatterns) {
  std::vector<uint16_t> all(65536);
  for (int i = 0; i < 65536; ++i) all[i] = static_cast<uint16_t>(i);
  Tensor in = Tensor::fromBytes(DType::F16, Shape{65536}, all.data(), all.size() * 2);
  Tensor out =
      elementwise("f16_load", {in}, DType::F32, [](KernelBuilder&, const std::vector<ExprId>& x) { return x[0]; });
  ASSERT_EQ(out.numel(), 65536);
  for (int i = 0; i < 65536; ++i) {
    double want = halfValue(static_cast<uint16_t>(i));
    if (std::isnan(want)) {
      EXPECT_TRUE(std::isnan(out.getDouble(i))) << i;
    } else {
      ASSERT_EQ(out.getDouble(i), want) << "pattern " << i;
      ASSERT_EQ(std::signbit(out.getDouble(i)), std::signbit(want)) << i;
    }
  }
  // f16 -> f16 through f32 is the identity on every non-NaN pattern.
  Tensor round =
      elementwise("f16_copy", {in}, DType::F16, [](KernelBuilder&, const std::vector<ExprId>& x) { return x[0]; });
  for (int i = 0; i < 65536; ++i) {
    if (std::isnan(halfValue(static_cast<uint16_t>(i)))) continue;
    ASSERT_EQ(bitsAt(round, i), i);
  }
}

TEST(CpuScalarOps, RoundToF16InExpressions) {
  // cast(F16, x) rounds through f16 and stays f32.
  Tensor out = elementwise("round_f16", {fromBits32(kF16Inputs)}, DType::F32,
                           [](KernelBuilder& kb, const std::vector<ExprId>& x) { return kb.cast(DType::F16, x[0]); });
  for (size_t i = 0; i < kF16Numpy.size(); ++i) EXPECT_EQ(out.getDouble(i), halfValue(kF16Numpy[i])) << i;
}

// f32 inputs as bits, and the nearest bf16 (ties to even) computed with exact rationals in Python.
const std::vector<uint32_t> kBF16Inputs = {0x3f800000, 0x80000000, 0x3f808000, 0x3f80c000, 0x3f804000,
                                           0x3f810000, 0x40490fd0, 0xc02df84d, 0x7f7f0000, 0x7f7fffff,
                                           0x000116c2, 0x7f800000, 0x3dcccccd, 0x477fe000, 0x3f818000};
const std::vector<uint16_t> kBF16Want = {0x3f80, 0x8000, 0x3f80, 0x3f81, 0x3f80, 0x3f81, 0x4049, 0xc02e,
                                         0x7f7f, 0x7f80, 0x0001, 0x7f80, 0x3dcd, 0x4780, 0x3f82};

TEST(CpuScalarOps, BF16StoreAndLoad) {
  Tensor out = elementwise("bf16_store", {fromBits32(kBF16Inputs)}, DType::BF16,
                           [](KernelBuilder&, const std::vector<ExprId>& x) { return x[0]; });
  for (size_t i = 0; i < kBF16Want.size(); ++i)
    EXPECT_EQ(bitsAt(out, i), kBF16Want[i]) << "input 0x" << std::hex << kBF16Inputs[i];
  Tensor nan = elementwise("bf16_store_nan", {fromBits32({0x7f800001, 0xffc00000})}, DType::BF16,
                           [](KernelBuilder&, const std::vector<ExprId>& x) { return x[0]; });
  EXPECT_EQ(bitsAt(nan, 0) & 0x7fc0, 0x7fc0);  // quiet NaN, not inf
  EXPECT_EQ(bitsAt(nan, 1), 0xffc0);
  // Loads: a bf16 pattern is the top half of an f32.
  std::vector<uint16_t> pats = {0x3f80, 0xc049, 0x7f80, 0x0001, 0x8000, 0x4780};
  Tensor in = Tensor::fromBytes(DType::BF16, Shape{6}, pats.data(), 12);
  Tensor loaded =
      elementwise("bf16_load", {in}, DType::F32, [](KernelBuilder&, const std::vector<ExprId>& x) { return x[0]; });
  const double want[6] = {1.0, -3.140625, INFINITY, std::ldexp(1.0, -133), -0.0, 65536.0};
  for (int i = 0; i < 6; ++i) EXPECT_EQ(loaded.getDouble(i), want[i]) << i;
  Tensor rounded =
      elementwise("round_bf16", {fromBits32(kBF16Inputs)}, DType::F32,
                  [](KernelBuilder& kb, const std::vector<ExprId>& x) { return kb.cast(DType::BF16, x[0]); });
  for (size_t i = 0; i < kBF16Want.size(); ++i)
    EXPECT_EQ(rounded.getDouble(i), static_cast<double>(std::bit_cast<float>(uint32_t{kBF16Want[i]} << 16))) << i;
}

ExprFn binaryFn(ExprOp op) {
  return [op](KernelBuilder& kb, const std::vector<ExprId>& x) { return kb.binary(op, x[0], x[1]); };
}

TEST(CpuScalarOps, SignedDivRemByZeroAndOverflow) {
  const int64_t mn = std::numeric_limits<int32_t>::min();
  Tensor a = ints(DType::I32, {7, -7, 7, -7, 0, 5, mn, mn, 9, -9, mn});
  Tensor b = ints(DType::I32, {2, 2, -2, -2, 3, 0, -1, 1, 0, -3, 0});
  // C truncation (Python int(a / b)), remainder with a's sign, Python // and %, and 0 for b == 0.
  const std::vector<int64_t> div = {3, -3, -3, 3, 0, 0, mn, mn, 0, 3, 0};
  const std::vector<int64_t> rem = {1, -1, 1, -1, 0, 0, 0, 0, 0, 0, 0};
  const std::vector<int64_t> fdiv = {3, -4, -4, 3, 0, 0, mn, mn, 0, 3, 0};
  const std::vector<int64_t> fmod = {1, 1, -1, -1, 0, 0, 0, 0, 0, 0, 0};
  const std::pair<ExprOp, const std::vector<int64_t>*> cases[] = {
      {ExprOp::Div, &div}, {ExprOp::Rem, &rem}, {ExprOp::FloorDiv, &fdiv}, {ExprOp::FloorMod, &fmod}};
  for (const auto& [op, want] : cases) {
    Tensor out = elementwise(std::string("i32_") + kir::exprOpName(op), {a, b}, DType::I32, binaryFn(op));
    for (int64_t i = 0; i < out.numel(); ++i) EXPECT_EQ(out.getInt(i), (*want)[i]) << kir::exprOpName(op) << " " << i;
  }
  // i64 with INT64_MIN / -1 (wraps; x86 would trap).
  const int64_t mn64 = std::numeric_limits<int64_t>::min();
  Tensor out = elementwise("i64_div", {ints(DType::I64, {mn64, -9, 100}), ints(DType::I64, {-1, 4, 0})}, DType::I64,
                           binaryFn(ExprOp::Div));
  EXPECT_EQ(out.getInt(0), mn64);
  EXPECT_EQ(out.getInt(1), -2);
  EXPECT_EQ(out.getInt(2), 0);
  // FloorDiv/FloorMod of INT64_MIN by -1: JIT only (the interpreter's floorDiv traps on it).
  for (ExprOp op : {ExprOp::FloorDiv, ExprOp::FloorMod}) {
    KernelBuilder kb(std::string("i64_jit_") + kir::exprOpName(op));
    int a64 = kb.addParam("a", DType::I64, 3, false);
    int b64 = kb.addParam("b", DType::I64, 3, false);
    int o64 = kb.addParam("out", DType::I64, 3, true);
    auto v = kb.setOuter({3});
    kb.addStore(o64, v[0], kb.binary(op, kb.load(a64, v[0]), kb.load(b64, v[0])), false);
    std::unique_ptr<JitKernels> holder;
    rt::KernelFn fn = testing::jitKernel(kb.finish(), &holder);
    ASSERT_NE(fn, nullptr);
    std::vector<Tensor> bufs = {ints(DType::I64, {mn64, -9, 100}), ints(DType::I64, {-1, 4, 0}),
                                Tensor(DType::I64, Shape{3})};
    testing::callInPieces(fn, bufs, {0, 3});
    const std::vector<int64_t> want =
        op == ExprOp::FloorDiv ? std::vector<int64_t>{mn64, -3, 0} : std::vector<int64_t>{0, 3, 0};
    for (int i = 0; i < 3; ++i) EXPECT_EQ(bufs[2].getInt(i), want[i]) << kir::exprOpName(op) << " " << i;
  }
}

TEST(CpuScalarOps, UnsignedDivRemAndFloorModOfSmallTypes) {
  Tensor a = ints(DType::U32, {7, 4294967295LL, 5, 0});
  Tensor b = ints(DType::U32, {2, 2, 0, 3});
  Tensor d = elementwise("u32_div", {a, b}, DType::U32, binaryFn(ExprOp::Div));
  Tensor r = elementwise("u32_rem", {a, b}, DType::U32, binaryFn(ExprOp::Rem));
  const int64_t wantD[] = {3, 2147483647, 0, 0}, wantR[] = {1, 1, 0, 0};
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(d.getInt(i), wantD[i]) << i;
    EXPECT_EQ(r.getInt(i), wantR[i]) << i;
  }
  // i8 FloorMod with negatives: np.mod(np.int8([-128, -7, 7, -1]), np.int8([3, 4, -4, 127])).
  Tensor m = elementwise("i8_floormod", {ints(DType::I8, {-128, -7, 7, -1}), ints(DType::I8, {3, 4, -4, 127})},
                         DType::I8, binaryFn(ExprOp::FloorMod));
  const int64_t wantM[] = {1, 1, -1, 126};
  for (int i = 0; i < 4; ++i) EXPECT_EQ(m.getInt(i), wantM[i]) << i;
}

TEST(CpuScalarOps, FloatFloorModRemFloorDiv) {
  Tensor x = typed(DType::F32, {-7.5, 7.5, -7.5, 7.5, 6.0, -6.0, 5.25, -0.0});
  Tensor y = typed(DType::F32, {2, 2, -2, -2, 3, 3, 0.5, 3});
  // np.mod, np.fmod, np.floor_divide
  const double mod[] = {0.5, 1.5, -1.5, -0.5, 0.0, 0.0, 0.25, 0.0};
  const double fmod[] = {-1.5, 1.5, -1.5, 1.5, 0.0, -0.0, 0.25, -0.0};
  const double fdiv[] = {-4.0, 3.0, 3.0, -4.0, 2.0, -2.0, 10.0, -0.0};
  Tensor m = elementwise("f32_floormod", {x, y}, DType::F32, binaryFn(ExprOp::FloorMod));
  Tensor r = elementwise("f32_rem", {x, y}, DType::F32, binaryFn(ExprOp::Rem));
  Tensor d = elementwise("f32_floordiv", {x, y}, DType::F32, binaryFn(ExprOp::FloorDiv));
  for (int i = 0; i < 8; ++i) {
    EXPECT_EQ(m.getDouble(i), mod[i]) << i;
    EXPECT_EQ(r.getDouble(i), fmod[i]) << i;
    EXPECT_EQ(d.getDouble(i), fdiv[i]) << i;
  }
}

TEST(CpuScalarOps, SelectAndComparisons) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  Tensor x = typed(DType::F32, {1, 5, nan, -2, 3});
  Tensor y = typed(DType::F32, {2, 5, 1, -3, nan});
  Tensor sel = elementwise("select_f32", {x, y}, DType::F32, [](KernelBuilder& kb, const std::vector<ExprId>& v) {
    return kb.select(kb.lt(v[0], v[1]), kb.mul(v[0], kb.constant(DType::F32, 10)),
                     kb.sub(v[1], kb.constant(DType::F32, 1)));
  });
  const double wantSel[] = {10, 4, 0, -4, nan};
  for (int i = 0; i < 5; ++i) EXPECT_TRUE(testing::nearlyEqual(sel.getDouble(i), wantSel[i], 0, 0)) << i;
  // Comparisons stored as bool (u8 0/1); NaN compares unequal and unordered.
  const std::pair<ExprOp, std::vector<int64_t>> cmp[] = {{ExprOp::Eq, {0, 1, 0, 0, 0}}, {ExprOp::Ne, {1, 0, 1, 1, 1}},
                                                         {ExprOp::Lt, {1, 0, 0, 0, 0}}, {ExprOp::Le, {1, 1, 0, 0, 0}},
                                                         {ExprOp::Gt, {0, 0, 0, 1, 0}}, {ExprOp::Ge, {0, 1, 0, 1, 0}}};
  for (const auto& [op, want] : cmp) {
    Tensor out = elementwise(std::string("cmp_") + kir::exprOpName(op), {x, y}, DType::Bool, binaryFn(op));
    for (int i = 0; i < 5; ++i) {
      EXPECT_EQ(out.getInt(i), want[i]) << kir::exprOpName(op) << " " << i;
      EXPECT_LE(static_cast<uint8_t>(out.data()[i]), 1);
    }
  }
  // Unsigned comparison and integer select.
  Tensor ua = ints(DType::U8, {200, 1}), ub = ints(DType::U8, {100, 255});
  Tensor lt = elementwise("cmp_u8", {ua, ub}, DType::Bool, binaryFn(ExprOp::Lt));
  EXPECT_EQ(lt.getInt(0), 0);
  EXPECT_EQ(lt.getInt(1), 1);
  Tensor mx = elementwise("max_u8", {ua, ub}, DType::U8, binaryFn(ExprOp::Max));
  EXPECT_EQ(mx.getInt(0), 200);
  EXPECT_EQ(mx.getInt(1), 255);
}

TEST(CpuScalarOps, FloatMinMaxPropagateNaN) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  Tensor x = typed(DType::F64, {1, nan, 3, -INFINITY});
  Tensor y = typed(DType::F64, {2, 1, nan, -1});
  Tensor mn = elementwise("min_f64", {x, y}, DType::F64, binaryFn(ExprOp::Min));
  Tensor mx = elementwise("max_f64", {x, y}, DType::F64, binaryFn(ExprOp::Max));
  const double wantMin[] = {1, nan, nan, -INFINITY}, wantMax[] = {2, nan, nan, -1};
  for (int i = 0; i < 4; ++i) {
    EXPECT_TRUE(testing::nearlyEqual(mn.getDouble(i), wantMin[i], 0, 0)) << i;
    EXPECT_TRUE(testing::nearlyEqual(mx.getDouble(i), wantMax[i], 0, 0)) << i;
  }
}

TEST(CpuScalarOps, CastsFloatToIntSaturateAndToBool) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  Tensor x = typed(DType::F32, {1.9, -1.9, 0.5, -0.5, 3e9, -3e9, nan, INFINITY, -INFINITY, 2147483520.0, 0.0, -0.0,
                                254.7, 255.5, 127.9, -128.9});
  auto castTo = [](DType t) {
    return [t](KernelBuilder& kb, const std::vector<ExprId>& v) { return kb.cast(t, v[0]); };
  };
  const int64_t imax = 2147483647, imin = -2147483648LL;
  const std::pair<DType, std::vector<int64_t>> cases[] = {
      {DType::I32, {1, -1, 0, 0, imax, imin, 0, imax, imin, 2147483520, 0, 0, 254, 255, 127, -128}},
      {DType::U8, {1, 0, 0, 0, 255, 0, 0, 255, 0, 255, 0, 0, 254, 255, 127, 0}},
      {DType::I8, {1, -1, 0, 0, 127, -128, 0, 127, -128, 127, 0, 0, 127, 127, 127, -128}},
      {DType::I64,
       {1, -1, 0, 0, 3000000000LL, -3000000000LL, 0, INT64_MAX, INT64_MIN, 2147483520, 0, 0, 254, 255, 127, -128}},
      {DType::Bool, {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 1, 1, 1, 1}}};
  for (const auto& [t, want] : cases) {
    Tensor out = elementwise("cast_f32_" + std::string(dtypeName(t)), {x}, t, castTo(t));
    for (int i = 0; i < 16; ++i) EXPECT_EQ(out.getInt(i), want[i]) << dtypeName(t) << " element " << i;
  }
  // Storing a float into an int param converts the same way (no explicit cast).
  Tensor stored =
      elementwise("store_f32_i32", {x}, DType::I32, [](KernelBuilder&, const std::vector<ExprId>& v) { return v[0]; });
  EXPECT_EQ(stored.getInt(4), imax);
  EXPECT_EQ(stored.getInt(6), 0);
}

TEST(CpuScalarOps, IntegerAndBoolCasts) {
  auto castTo = [](DType t) {
    return [t](KernelBuilder& kb, const std::vector<ExprId>& v) { return kb.cast(t, v[0]); };
  };
  Tensor i8 = ints(DType::I8, {-1, -128, 127, 0});
  Tensor toI32 = elementwise("i8_i32", {i8}, DType::I32, castTo(DType::I32));
  Tensor toU16 = elementwise("i8_u16", {i8}, DType::U16, castTo(DType::U16));
  Tensor toF32 = elementwise("i8_f32", {i8}, DType::F32, castTo(DType::F32));
  const int64_t wantI32[] = {-1, -128, 127, 0}, wantU16[] = {65535, 65408, 127, 0};
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(toI32.getInt(i), wantI32[i]) << i;
    EXPECT_EQ(toU16.getInt(i), wantU16[i]) << i;
    EXPECT_EQ(toF32.getDouble(i), static_cast<double>(wantI32[i])) << i;
  }
  Tensor u32 = ints(DType::U32, {4294967295LL, 256, 0});
  Tensor u32f = elementwise("u32_f64", {u32}, DType::F64, castTo(DType::F64));
  Tensor u32u8 = elementwise("u32_u8", {u32}, DType::U8, castTo(DType::U8));
  Tensor u32b = elementwise("u32_bool", {u32}, DType::Bool, castTo(DType::Bool));
  const double wantF[] = {4294967295.0, 256, 0};
  const int64_t wantU8[] = {255, 0, 0}, wantB[] = {1, 1, 0};
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(u32f.getDouble(i), wantF[i]) << i;
    EXPECT_EQ(u32u8.getInt(i), wantU8[i]) << i;
    EXPECT_EQ(u32b.getInt(i), wantB[i]) << i;
  }
  // Bool -> f32 is 0/1 (never -1), and Not/And/Or/Xor on bools.
  Tensor bools = ints(DType::Bool, {1, 0, 1, 0}), bools2 = ints(DType::Bool, {1, 1, 0, 0});
  Tensor bf = elementwise("bool_f32", {bools}, DType::F32, castTo(DType::F32));
  Tensor bi = elementwise("bool_i32", {bools}, DType::I32, castTo(DType::I32));
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(bf.getDouble(i), i % 2 == 0 ? 1.0 : 0.0) << i;
    EXPECT_EQ(bi.getInt(i), i % 2 == 0 ? 1 : 0) << i;
  }
  Tensor logic =
      elementwise("bool_logic", {bools, bools2}, DType::I32, [](KernelBuilder& kb, const std::vector<ExprId>& v) {
        // (not a) + 2 * (a and b) + 4 * (a or b) + 8 * (a xor b), as an i32 bit pattern
        auto i = [&](ExprId e) { return kb.cast(DType::I32, e); };
        ExprId r = i(kb.unary(ExprOp::Not, v[0]));
        r = kb.add(r, kb.mul(i(kb.logicalAnd(v[0], v[1])), kb.constantInt(DType::I32, 2)));
        r = kb.add(r, kb.mul(i(kb.binary(ExprOp::Or, v[0], v[1])), kb.constantInt(DType::I32, 4)));
        return kb.add(r, kb.mul(i(kb.binary(ExprOp::Xor, v[0], v[1])), kb.constantInt(DType::I32, 8)));
      });
  const int64_t wantLogic[] = {0 + 2 + 4 + 0, 1 + 0 + 4 + 8, 0 + 0 + 4 + 8, 1 + 0 + 0 + 0};
  for (int i = 0; i < 4; ++i) EXPECT_EQ(logic.getInt(i), wantLogic[i]) << i;
}

TEST(CpuScalarOps, ShiftsAndBitOps) {
  Tensor a = ints(DType::U8, {0x81, 0x81, 0x81, 0xff, 0x0f});
  Tensor s = ints(DType::U8, {1, 7, 8, 200, 4});
  Tensor shl = elementwise("shl_u8", {a, s}, DType::U8, binaryFn(ExprOp::Shl));
  Tensor shr = elementwise("shr_u8", {a, s}, DType::U8, binaryFn(ExprOp::Shr));
  const int64_t wantShl[] = {0x02, 0x80, 0, 0, 0xf0}, wantShr[] = {0x40, 0x01, 0, 0, 0x00};
  for (int i = 0; i < 5; ++i) {
    EXPECT_EQ(shl.getInt(i), wantShl[i]) << i;
    EXPECT_EQ(shr.getInt(i), wantShr[i]) << i;
  }
  // u32 value shifted by a loop-variable amount.
  KernelBuilder kb("shl_by_index");
  int x = kb.addParam("x", DType::U32, 4, false);
  int out = kb.addParam("out", DType::U32, 4, true);
  auto v = kb.setOuter({4});
  kb.addStore(out, v[0], kb.binary(ExprOp::Shl, kb.load(x, v[0]), kb.cast(DType::U32, v[0])), false);  // x[i] << i
  auto bufs =
      runChecked(kb.finish(), {ints(DType::U32, {1, 0x80000001LL, 3, 0xffffffffLL}), Tensor(DType::U32, Shape{4})});
  ASSERT_EQ(bufs.size(), 2u);
  const int64_t wantMixed[] = {1, 2, 12, 0xfffffff8LL};
  for (int i = 0; i < 4; ++i) EXPECT_EQ(bufs[1].getInt(i), wantMixed[i]) << i;

  Tensor p = ints(DType::I32, {0x0f0f, -1, std::numeric_limits<int32_t>::min()});
  Tensor q = ints(DType::I32, {0x00ff, 0x1234, -5});
  Tensor band = elementwise("bitand", {p, q}, DType::I32, binaryFn(ExprOp::BitAnd));
  Tensor bor = elementwise("bitor", {p, q}, DType::I32, binaryFn(ExprOp::BitOr));
  Tensor bxor = elementwise("bitxor", {p, q}, DType::I32, binaryFn(ExprOp::BitXor));
  Tensor bnot = elementwise("bitnot", {p}, DType::I32, [](KernelBuilder& kb, const std::vector<ExprId>& v) {
    return kb.unary(ExprOp::BitNot, v[0]);
  });
  Tensor absv = elementwise("abs_i32", {p}, DType::I32, [](KernelBuilder& kb, const std::vector<ExprId>& v) {
    return kb.unary(ExprOp::Abs, kb.unary(ExprOp::Neg, v[0]));
  });
  const int64_t wantAnd[] = {0x000f, 0x1234, std::numeric_limits<int32_t>::min()};
  const int64_t wantOr[] = {0x0fff, -1, -5};
  const int64_t wantXor[] = {0x0ff0, ~int64_t{0x1234}, 2147483643};
  const int64_t wantNot[] = {~int64_t{0x0f0f}, 0, 2147483647};
  const int64_t wantAbs[] = {0x0f0f, 1, std::numeric_limits<int32_t>::min()};  // |INT_MIN| wraps
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(band.getInt(i), wantAnd[i]) << i;
    EXPECT_EQ(bor.getInt(i), wantOr[i]) << i;
    EXPECT_EQ(bxor.getInt(i), wantXor[i]) << i;
    EXPECT_EQ(bnot.getInt(i), wantNot[i]) << i;
    EXPECT_EQ(absv.getInt(i), wantAbs[i]) << i;
  }
}

TEST(CpuScalarOps, IsNaNIsInfFlags) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  Tensor x = typed(DType::F32, {INFINITY, -INFINITY, nan, 1e38, 0});
  auto run = [&](const char* name, const ExprFn& f) { return elementwise(name, {x}, DType::Bool, f); };
  Tensor both =
      run("isinf_both", [](KernelBuilder& kb, const std::vector<ExprId>& v) { return kb.isInf(v[0], true, true); });
  Tensor pos =
      run("isinf_pos", [](KernelBuilder& kb, const std::vector<ExprId>& v) { return kb.isInf(v[0], true, false); });
  Tensor neg =
      run("isinf_neg", [](KernelBuilder& kb, const std::vector<ExprId>& v) { return kb.isInf(v[0], false, true); });
  Tensor isnan =
      run("isnan", [](KernelBuilder& kb, const std::vector<ExprId>& v) { return kb.unary(ExprOp::IsNaN, v[0]); });
  const int64_t wantBoth[] = {1, 1, 0, 0, 0}, wantPos[] = {1, 0, 0, 0, 0}, wantNeg[] = {0, 1, 0, 0, 0},
                wantNan[] = {0, 0, 1, 0, 0};
  for (int i = 0; i < 5; ++i) {
    EXPECT_EQ(both.getInt(i), wantBoth[i]) << i;
    EXPECT_EQ(pos.getInt(i), wantPos[i]) << i;
    EXPECT_EQ(neg.getInt(i), wantNeg[i]) << i;
    EXPECT_EQ(isnan.getInt(i), wantNan[i]) << i;
  }
}

struct UnaryCase {
  ExprOp op;
  double (*ref)(double);
  double lo, hi;  // sample range (inside the domain)
};

double roundEvenRef(double x) { return std::nearbyint(x); }  // default rounding mode: ties to even
double negRef(double x) { return -x; }

const UnaryCase kUnaryCases[] = {
    {ExprOp::Neg, negRef, -10, 10},
    {ExprOp::Abs, std::fabs, -10, 10},
    {ExprOp::Exp, std::exp, -80, 80},
    {ExprOp::Log, std::log, 1e-6, 1e6},
    {ExprOp::Sqrt, std::sqrt, 0, 1e4},
    {ExprOp::Sin, std::sin, -20, 20},
    {ExprOp::Cos, std::cos, -20, 20},
    {ExprOp::Tan, std::tan, -1.5, 1.5},
    {ExprOp::Asin, std::asin, -1, 1},
    {ExprOp::Acos, std::acos, -1, 1},
    {ExprOp::Atan, std::atan, -50, 50},
    {ExprOp::Sinh, std::sinh, -20, 20},
    {ExprOp::Cosh, std::cosh, -20, 20},
    {ExprOp::Tanh, std::tanh, -10, 10},
    {ExprOp::Asinh, std::asinh, -100, 100},
    {ExprOp::Acosh, std::acosh, 1, 100},
    {ExprOp::Atanh, std::atanh, -0.99, 0.99},
    {ExprOp::Erf, std::erf, -4, 4},
    {ExprOp::Floor, std::floor, -10, 10},
    {ExprOp::Ceil, std::ceil, -10, 10},
    {ExprOp::RoundEven, roundEvenRef, -10, 10},
    {ExprOp::Trunc, std::trunc, -10, 10},
};

TEST(CpuScalarOps, EveryUnaryMathOpF32AndF64) {
  const int n = 101;
  for (const UnaryCase& c : kUnaryCases) {
    std::vector<double> xs;
    for (int i = 0; i < n; ++i) xs.push_back(c.lo + (c.hi - c.lo) * i / (n - 1));
    // Exact ties for the rounding ops.
    if (c.op == ExprOp::RoundEven || c.op == ExprOp::Floor || c.op == ExprOp::Ceil || c.op == ExprOp::Trunc)
      for (double t : {-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 3.0}) xs.push_back(t);
    for (DType t : {DType::F32, DType::F64}) {
      const double tol = t == DType::F32 ? 4 * 0x1p-24 : 4 * 0x1p-53;
      Tensor in = typed(t, xs);
      std::string name = std::string(kir::exprOpName(c.op)) + "_" + std::string(dtypeName(t));
      // Against the interpreter (double math rounded to t) inside elementwise(), and against std::.
      Tensor out = elementwise(
          name, {in}, t, [op = c.op](KernelBuilder& kb, const std::vector<ExprId>& v) { return kb.unary(op, v[0]); },
          tol, 1e-300);
      ASSERT_EQ(out.numel(), static_cast<int64_t>(xs.size())) << name;
      for (size_t i = 0; i < xs.size(); ++i) {
        double x = in.getDouble(static_cast<int64_t>(i));
        double want = c.ref(x);
        if (t == DType::F32) want = static_cast<float>(want);
        // Absolute slack near zeros of sin/cos/tan/erf... where a relative bound is meaningless.
        double absTol = t == DType::F32 ? 1e-7 * std::max(1.0, std::fabs(x)) : 1e-15 * std::max(1.0, std::fabs(x));
        EXPECT_TRUE(testing::nearlyEqual(out.getDouble(static_cast<int64_t>(i)), want, tol, absTol))
            << name << "(" << x << "): got " << out.getDouble(static_cast<int64_t>(i)) << ", want " << want;
      }
    }
  }
}

TEST(CpuScalarOps, PowAndNaNDomains) {
  Tensor x = typed(DType::F32, {2, 9, -8, 0, -1, 10});
  Tensor y = typed(DType::F32, {10, 0.5, 1.0 / 3, -1, 0.5, -2});
  Tensor p = elementwise("pow_f32", {x, y}, DType::F32, binaryFn(ExprOp::Pow), 4 * 0x1p-24, 0);
  const double want[] = {1024, 3, std::pow(-8.0, static_cast<float>(1.0 / 3)), INFINITY, NAN, 0.01};
  for (int i = 0; i < 6; ++i)
    EXPECT_TRUE(testing::nearlyEqual(p.getDouble(i), static_cast<float>(want[i]), 4 * 0x1p-24, 0)) << i;
  // Integer pow goes through f64 and saturates.
  Tensor ip = elementwise("pow_i32", {ints(DType::I32, {2, 3, 2, -2}), ints(DType::I32, {10, 4, 40, 3})}, DType::I32,
                          binaryFn(ExprOp::Pow));
  const int64_t wantI[] = {1024, 81, 2147483647, -8};
  for (int i = 0; i < 4; ++i) EXPECT_EQ(ip.getInt(i), wantI[i]) << i;
  // Outside the domain: log(-1), sqrt(-1), acosh(0.5) are NaN; log(0) is -inf.
  Tensor d = typed(DType::F32, {-1, 0});
  Tensor lg = elementwise("log_dom", {d}, DType::F32,
                          [](KernelBuilder& kb, const std::vector<ExprId>& v) { return kb.unary(ExprOp::Log, v[0]); });
  EXPECT_TRUE(std::isnan(lg.getDouble(0)));
  EXPECT_EQ(lg.getDouble(1), -INFINITY);
}

}  // namespace
}  // namespace nnc::codegen
