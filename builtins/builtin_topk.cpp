// Host kernel for TopK: the k largest (or smallest) elements along one axis, with their indices.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <numeric>
#include <string>
#include <vector>

#include "builtins/builtins.h"

namespace {

// ONNX TensorProto.DataType numbers (the plan's dtype numbering).
enum : int64_t {
  kF32 = 1,
  kU8 = 2,
  kI8 = 3,
  kU16 = 4,
  kI16 = 5,
  kI32 = 6,
  kI64 = 7,
  kF16 = 10,
  kF64 = 11,
  kU32 = 12,
  kU64 = 13,
  kBF16 = 16,
};

float halfToFloat(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu;
  const uint32_t mant = h & 0x3ffu;
  if (exp == 0) {  // zero or subnormal: mant * 2^-24
    const float v = std::ldexp(static_cast<float>(mant), -24);
    return sign ? -v : v;
  }
  uint32_t bits = exp == 0x1f ? (sign | 0x7f800000u | (mant << 13)) : (sign | ((exp + 112) << 23) | (mant << 13));
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

float bfloatToFloat(uint16_t h) {
  const uint32_t bits = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

// Sorts one slice's indices by key. Floats: NaN sorts above every number (numpy's sort puts it last,
// torch.topk treats it as the largest), so the order stays a strict weak ordering.
template <class Storage, class Convert>
int topk(const int64_t* dims, int rank, int axis, int64_t k, bool largest, const void* in, void* values,
         int64_t* indices, Convert toKey) {
  int64_t outer = 1, inner = 1;
  for (int d = 0; d < axis; ++d) outer *= dims[d];
  for (int d = axis + 1; d < rank; ++d) inner *= dims[d];
  const int64_t n = dims[axis];
  const Storage* x = static_cast<const Storage*>(in);
  Storage* y = static_cast<Storage*>(values);
  std::vector<int64_t> order(static_cast<size_t>(n));
  std::vector<double> keys(static_cast<size_t>(n));
  std::vector<bool> nan(static_cast<size_t>(n));
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t i = 0; i < inner; ++i) {
      const int64_t base = o * n * inner + i;
      for (int64_t j = 0; j < n; ++j) {
        keys[j] = toKey(x[base + j * inner]);
        nan[j] = std::isnan(keys[j]);
      }
      std::iota(order.begin(), order.end(), 0);
      // Ties (and NaN against NaN) go to the smaller index, as ONNX specifies.
      auto before = [&](int64_t a, int64_t b) {
        if (nan[a] != nan[b]) return largest ? static_cast<bool>(nan[a]) : static_cast<bool>(nan[b]);
        if (!nan[a] && keys[a] != keys[b]) return largest ? keys[a] > keys[b] : keys[a] < keys[b];
        return a < b;
      };
      // Always sorted: sorted=0 leaves the order unspecified, and sorted is a valid choice.
      std::partial_sort(order.begin(), order.begin() + k, order.end(), before);
      const int64_t outBase = o * k * inner + i;
      for (int64_t j = 0; j < k; ++j) {
        y[outBase + j * inner] = x[base + order[j] * inner];
        indices[outBase + j * inner] = order[j];
      }
    }
  }
  return 0;
}

template <class T>
double plainKey(T v) {
  return static_cast<double>(v);
}

}  // namespace

// Params: dtype, rank, dims[rank], axis, k, largest, sorted, numInputs. Buffers: one per node input
// slot (X, then K when the node still carries it; it is not read), then Values, Indices (i64).
// Returns 1 for a malformed parameter block, 2 for an unsupported dtype.
extern "C" int nnc_builtin_topk(const int64_t* params, void* const* buffers) {
  const int64_t dtype = params[0];
  const int64_t rank = params[1];
  if (rank < 1 || rank > 64) return 1;
  const int64_t* dims = params + 2;
  const int64_t axis = params[2 + rank];
  const int64_t k = params[3 + rank];
  const bool largest = params[4 + rank] != 0;
  const int64_t numInputs = params[6 + rank];
  if (axis < 0 || axis >= rank || k < 0 || k > dims[axis] || numInputs < 1) return 1;
  int64_t elements = 1;
  for (int64_t d = 0; d < rank; ++d) {
    if (dims[d] < 0) return 1;
    if (dims[d] == 0) return 0;  // an empty tensor: nothing to sort (its other dims may be huge)
  }
  for (int64_t d = 0; d < rank; ++d)
    if (__builtin_mul_overflow(elements, dims[d], &elements)) return 1;
  const void* x = buffers[0];
  void* values = buffers[numInputs];
  int64_t* indices = static_cast<int64_t*>(buffers[numInputs + 1]);
  const int r = static_cast<int>(rank), a = static_cast<int>(axis);
  switch (dtype) {
    case kF32: return topk<float>(dims, r, a, k, largest, x, values, indices, plainKey<float>);
    case kF64: return topk<double>(dims, r, a, k, largest, x, values, indices, plainKey<double>);
    case kF16:
      return topk<uint16_t>(dims, r, a, k, largest, x, values, indices,
                            [](uint16_t v) { return static_cast<double>(halfToFloat(v)); });
    case kBF16:
      return topk<uint16_t>(dims, r, a, k, largest, x, values, indices,
                            [](uint16_t v) { return static_cast<double>(bfloatToFloat(v)); });
    case kI8: return topk<int8_t>(dims, r, a, k, largest, x, values, indices, plainKey<int8_t>);
    case kU8: return topk<uint8_t>(dims, r, a, k, largest, x, values, indices, plainKey<uint8_t>);
    case kI16: return topk<int16_t>(dims, r, a, k, largest, x, values, indices, plainKey<int16_t>);
    case kU16: return topk<uint16_t>(dims, r, a, k, largest, x, values, indices, plainKey<uint16_t>);
    case kI32: return topk<int32_t>(dims, r, a, k, largest, x, values, indices, plainKey<int32_t>);
    case kU32: return topk<uint32_t>(dims, r, a, k, largest, x, values, indices, plainKey<uint32_t>);
    default: break;
  }
  // 64-bit integers do not fit a double exactly: compare them natively.
  if (dtype == kI64 || dtype == kU64) {
    int64_t outer = 1, inner = 1;
    for (int d = 0; d < a; ++d) outer *= dims[d];
    for (int d = a + 1; d < r; ++d) inner *= dims[d];
    const int64_t n = dims[a];
    std::vector<int64_t> order(static_cast<size_t>(n));
    const bool isSigned = dtype == kI64;
    const int64_t* xs = static_cast<const int64_t*>(x);
    int64_t* ys = static_cast<int64_t*>(values);
    auto less = [&](int64_t p, int64_t q) {
      return isSigned ? p < q : static_cast<uint64_t>(p) < static_cast<uint64_t>(q);
    };
    for (int64_t o = 0; o < outer; ++o) {
      for (int64_t i = 0; i < inner; ++i) {
        const int64_t base = o * n * inner + i;
        std::iota(order.begin(), order.end(), 0);
        auto before = [&](int64_t p, int64_t q) {
          const int64_t vp = xs[base + p * inner], vq = xs[base + q * inner];
          if (vp != vq) return largest ? less(vq, vp) : less(vp, vq);
          return p < q;
        };
        std::partial_sort(order.begin(), order.begin() + k, order.end(), before);
        const int64_t outBase = o * k * inner + i;
        for (int64_t j = 0; j < k; ++j) {
          ys[outBase + j * inner] = xs[base + order[j] * inner];
          indices[outBase + j * inner] = order[j];
        }
      }
    }
    return 0;
  }
  return 2;
}
