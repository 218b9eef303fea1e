// The prelude of every generated CUDA translation unit: fixed-width types, f16/bf16 bit conversions,
// NaN-propagating min/max, safe integer division, floor-div/mod, shifts and saturating float->int
// casts, with the semantics of kir/interpreter.cpp. Plain CUDA C++ only (no includes), so NVRTC
// needs no include paths. Embedded into nnc at build time (embed_prelude.cmake).
typedef signed char i8;
typedef unsigned char u8;
typedef short i16;
typedef unsigned short u16;
typedef int i32;
typedef unsigned int u32;
typedef long long i64;
typedef unsigned long long u64;

#define NNC_DEV __device__ __forceinline__
#define NNC_F32_INF __int_as_float(0x7f800000)
#define NNC_F32_NAN __int_as_float(0x7fc00000)
#define NNC_F64_INF __longlong_as_double(0x7ff0000000000000LL)
#define NNC_F64_NAN __longlong_as_double(0x7ff8000000000000LL)

// --- f16 / bf16 storage <-> f32 (round to nearest even, inf/nan kept; integer ops only)

NNC_DEV float nnc_f16_to_f32(u16 bits) {
  const u32 h = bits;
  const u32 sign = (h & 0x8000u) << 16;
  const u32 exp = (h >> 10) & 0x1fu;
  const u32 mant = h & 0x3ffu;
  if (exp == 0) return __int_as_float((i32)(__float_as_uint((float)mant * 0x1p-24f) | sign));  // subnormal
  if (exp == 31) return __int_as_float((i32)(sign | 0x7f800000u | (mant << 13)));
  return __int_as_float((i32)(sign | ((exp + 112u) << 23) | (mant << 13)));
}

NNC_DEV u16 nnc_f32_to_f16(float f) {
  const u32 x = __float_as_uint(f);
  const u32 sign = (x >> 16) & 0x8000u;
  const u32 a = x & 0x7fffffffu;
  u32 r;
  if (a > 0x7f800000u) {
    r = 0x7e00u | ((a >> 13) & 0x3ffu);  // quiet NaN, top payload bits kept
  } else if (a >= 0x47800000u) {
    r = 0x7c00u;  // overflow (and inf) -> inf
  } else if (a >= 0x38800000u) {
    r = (a - 0x38000000u + 0xfffu + ((a >> 13) & 1u)) >> 13;  // normal: re-bias, round on 13 bits
    if (r > 0x7c00u) r = 0x7c00u;
  } else {
    // Subnormal (|f| < 2^-14): the value in units of 2^-24 is m >> (126 - e), rounded to even.
    const u32 e = a >> 23;
    const u32 m = (a & 0x7fffffu) | 0x800000u;
    u32 s = 126u - e;
    if (s > 25u) s = 25u;
    const u32 q = m >> s;
    const u32 rem = m & ((1u << s) - 1u);
    const u32 half = 1u << (s - 1u);
    r = q + ((rem > half || (rem == half && (q & 1u))) ? 1u : 0u);
  }
  return (u16)(r | sign);
}

NNC_DEV float nnc_bf16_to_f32(u16 bits) { return __uint_as_float(((u32)bits) << 16); }

NNC_DEV u16 nnc_f32_to_bf16(float f) {
  const u32 x = __float_as_uint(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return (u16)((x >> 16) | 0x40u);  // NaN stays quiet
  return (u16)((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}

NNC_DEV float nnc_round_f16(float f) { return nnc_f16_to_f32(nnc_f32_to_f16(f)); }
NNC_DEV float nnc_round_bf16(float f) { return nnc_bf16_to_f32(nnc_f32_to_bf16(f)); }

// --- floats: NaN tests and NaN-propagating min/max (equal values give `a`, like std::min/max)

NNC_DEV bool nnc_isnan(float x) { return x != x; }
NNC_DEV bool nnc_isnan(double x) { return x != x; }
NNC_DEV float nnc_fmin(float a, float b) { return (a != a || b != b) ? a + b : (b < a ? b : a); }
NNC_DEV double nnc_fmin(double a, double b) { return (a != a || b != b) ? a + b : (b < a ? b : a); }
NNC_DEV float nnc_fmax(float a, float b) { return (a != a || b != b) ? a + b : (a < b ? b : a); }
NNC_DEV double nnc_fmax(double a, double b) { return (a != a || b != b) ? a + b : (a < b ? b : a); }

// Python-style float modulo: fmod, moved to the sign of b.
NNC_DEV float nnc_fmod_floor(float a, float b) {
  const float z = fmodf(a, b);
  return (z != 0.0f && ((z < 0.0f) != (b < 0.0f))) ? z + b : z;
}
NNC_DEV double nnc_fmod_floor(double a, double b) {
  const double z = fmod(a, b);
  return (z != 0.0 && ((z < 0.0) != (b < 0.0))) ? z + b : z;
}

// --- float -> integer: truncation toward zero, saturating, NaN -> 0 (the interpreter's floatToInt)

#define NNC_SAT_CAST(T, LO, HI)     \
  NNC_DEV T nnc_sat_##T(double v) { \
    if (v != v) return (T)0;        \
    if (v <= (LO)) return (T)(LO);  \
    if (v >= (HI)) return (T)(HI);  \
    return (T)v;                    \
  }
NNC_SAT_CAST(i8, -128.0, 127.0)
NNC_SAT_CAST(u8, 0.0, 255.0)
NNC_SAT_CAST(i16, -32768.0, 32767.0)
NNC_SAT_CAST(u16, 0.0, 65535.0)
NNC_SAT_CAST(i32, -2147483648.0, 2147483647.0)
NNC_SAT_CAST(u32, 0.0, 4294967295.0)
#undef NNC_SAT_CAST
NNC_DEV i64 nnc_sat_i64(double v) {
  if (v != v) return 0;
  if (v <= -9223372036854775808.0) return (-9223372036854775807LL - 1);
  if (v >= 9223372036854775807.0) return 9223372036854775807LL;
  return (i64)v;
}
NNC_DEV u64 nnc_sat_u64(double v) {
  if (v != v || v <= 0.0) return 0;
  if (v >= 18446744073709551615.0) return 18446744073709551615ULL;
  return (u64)v;
}

// --- integers: division by zero yields 0; signed division by -1 wraps (MIN / -1 == MIN) and the
// remainder by -1 is 0; floor variants round toward -inf. W is the wide unsigned type that makes
// the arithmetic wrap instead of overflowing.

#define NNC_SIGNED_DIV(T, W)                                                      \
  NNC_DEV T nnc_div(T a, T b) {                                                   \
    if (b == 0) return 0;                                                         \
    if (b == -1) return (T)((W)0 - (W)a);                                         \
    return (T)(a / b);                                                            \
  }                                                                               \
  NNC_DEV T nnc_floordiv(T a, T b) {                                              \
    if (b == 0) return 0;                                                         \
    if (b == -1) return (T)((W)0 - (W)a);                                         \
    const T q = (T)(a / b), r = (T)(a % b);                                       \
    return (r != 0 && ((r < 0) != (b < 0))) ? (T)(q - 1) : q;                     \
  }                                                                               \
  NNC_DEV T nnc_rem(T a, T b) { return (b == 0 || b == -1) ? (T)0 : (T)(a % b); } \
  NNC_DEV T nnc_floormod(T a, T b) {                                              \
    if (b == 0 || b == -1) return 0;                                              \
    const T r = (T)(a % b);                                                       \
    return (r != 0 && ((r < 0) != (b < 0))) ? (T)(r + b) : r;                     \
  }
#define NNC_UNSIGNED_DIV(T)                                               \
  NNC_DEV T nnc_div(T a, T b) { return b == 0 ? (T)0 : (T)(a / b); }      \
  NNC_DEV T nnc_floordiv(T a, T b) { return b == 0 ? (T)0 : (T)(a / b); } \
  NNC_DEV T nnc_rem(T a, T b) { return b == 0 ? (T)0 : (T)(a % b); }      \
  NNC_DEV T nnc_floormod(T a, T b) { return b == 0 ? (T)0 : (T)(a % b); }
NNC_SIGNED_DIV(i8, u32)
NNC_SIGNED_DIV(i16, u32)
NNC_SIGNED_DIV(i32, u32)
NNC_SIGNED_DIV(i64, u64)
NNC_UNSIGNED_DIV(u8)
NNC_UNSIGNED_DIV(u16)
NNC_UNSIGNED_DIV(u32)
NNC_UNSIGNED_DIV(u64)
NNC_UNSIGNED_DIV(bool)
#undef NNC_SIGNED_DIV
#undef NNC_UNSIGNED_DIV

// Shifts: an amount >= the width (taken as an unsigned 64-bit value) yields 0; right shifts of
// unsigned types are logical, of signed ones arithmetic (as in the CPU backend).
#define NNC_SHIFTS(T, W, BITS)                                                  \
  NNC_DEV T nnc_shl(T a, u64 s) { return s >= (BITS) ? (T)0 : (T)((W)a << s); } \
  NNC_DEV T nnc_shr(T a, u64 s) { return s >= (BITS) ? (T)0 : (T)(a >> s); }
NNC_SHIFTS(u8, u32, 8u)
NNC_SHIFTS(u16, u32, 16u)
NNC_SHIFTS(u32, u32, 32u)
NNC_SHIFTS(u64, u64, 64u)
NNC_SHIFTS(i8, u32, 8u)
NNC_SHIFTS(i16, u32, 16u)
NNC_SHIFTS(i32, u32, 32u)
NNC_SHIFTS(i64, u64, 64u)
#undef NNC_SHIFTS

// --- warp reductions: lanes combine partial results with butterfly shuffles (every lane ends with
// the same value). Reduction kernels run with blockDim.x a multiple of 32 and warp-uniform loops.

#define NNC_FULL_MASK 0xffffffffu
NNC_DEV bool nnc_shfl(bool v, int m) { return __shfl_xor_sync(NNC_FULL_MASK, (int)v, m) != 0; }
NNC_DEV i8 nnc_shfl(i8 v, int m) { return (i8)__shfl_xor_sync(NNC_FULL_MASK, (int)v, m); }
NNC_DEV u8 nnc_shfl(u8 v, int m) { return (u8)__shfl_xor_sync(NNC_FULL_MASK, (int)v, m); }
NNC_DEV i16 nnc_shfl(i16 v, int m) { return (i16)__shfl_xor_sync(NNC_FULL_MASK, (int)v, m); }
NNC_DEV u16 nnc_shfl(u16 v, int m) { return (u16)__shfl_xor_sync(NNC_FULL_MASK, (int)v, m); }
NNC_DEV i32 nnc_shfl(i32 v, int m) { return __shfl_xor_sync(NNC_FULL_MASK, v, m); }
NNC_DEV u32 nnc_shfl(u32 v, int m) { return __shfl_xor_sync(NNC_FULL_MASK, v, m); }
NNC_DEV i64 nnc_shfl(i64 v, int m) { return __shfl_xor_sync(NNC_FULL_MASK, v, m); }
NNC_DEV u64 nnc_shfl(u64 v, int m) { return __shfl_xor_sync(NNC_FULL_MASK, v, m); }
NNC_DEV float nnc_shfl(float v, int m) { return __shfl_xor_sync(NNC_FULL_MASK, v, m); }
NNC_DEV double nnc_shfl(double v, int m) { return __shfl_xor_sync(NNC_FULL_MASK, v, m); }

// ArgMax/ArgMin partial results: (valid, value, flat index). Sequentially (the interpreter), the
// first element starts the scan and later ones win when strictly better (or equal, with
// selectLast); so a NaN at index 0 wins outright and other NaNs never win. `better(x, y)` is the
// strict comparison. Returns whether (vb, ib) should replace (va, ia); a total order, so the
// butterfly gives every lane the same answer.
template <class T, bool kIsMax, bool kSelectLast>
NNC_DEV bool nnc_arg_takes(bool oka, T va, i64 ia, bool okb, T vb, i64 ib) {
  if (!okb) return false;
  if (!oka) return true;
  if (ia == 0 && va != va) return false;
  if (ib == 0 && vb != vb) return true;
  if (vb != vb) return false;
  if (va != va) return true;
  if (kIsMax ? (vb > va) : (vb < va)) return true;
  if (kIsMax ? (va > vb) : (va < vb)) return false;
  return kSelectLast ? ib > ia : ib < ia;
}

// --- vectorised pointwise kernels: N consecutive elements moved as one access of sizeof(T) * N
// bytes (16 for the widest type of a kernel; NVCC emits ld/st.global.v4 for an aligned 16-byte
// struct). Only used on pointers the kernel has checked to be aligned to the struct.
template <class T, int N>
struct __align__(sizeof(T) * N) nnc_vec {
  T v[N];
};
