// Host tensors: element access through double/int64 for every dtype, and ONNX Cast semantics.
#include "nnc/tensor.h"

#include <charconv>
#include <cmath>
#include <cstring>
#include <limits>

#include "nnc/status.h"

namespace nnc {

namespace {

// Rounds a double to the f32 nearest it in round-to-odd mode. Rounding that f32 again to f16/bf16
// (RNE) then gives the same result as rounding the double directly, because f32 keeps more than two
// extra bits: this avoids double-rounding errors in f64 -> f16.
float roundToOddF32(double d) {
  float f = static_cast<float>(d);
  if (std::isnan(d) || static_cast<double>(f) == d) return f;
  if (std::fabs(static_cast<double>(f)) > std::fabs(d)) f = std::nextafter(f, 0.0f);  // truncate
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof bits);
  bits |= 1;
  std::memcpy(&f, &bits, sizeof bits);
  return f;
}

// Float -> integer: truncation toward zero, saturating at the type's range, NaN -> 0 (the C++
// conversion is undefined outside the range; ONNX leaves it unspecified).
template <class T>
T saturatingCast(double v) {
  if (std::isnan(v)) return 0;
  v = std::trunc(v);
  constexpr double lo = static_cast<double>(std::numeric_limits<T>::lowest());
  // max() may not be representable as double (i64/u64): compare against 2^bits instead.
  constexpr double hiExclusive = static_cast<double>(std::numeric_limits<T>::max()) + 1.0;
  if (v <= lo) return std::numeric_limits<T>::lowest();
  if (v >= hiExclusive) return std::numeric_limits<T>::max();
  return static_cast<T>(v);
}

template <class T>
T load(const std::byte* p, int64_t i) {
  T v;
  std::memcpy(&v, p + i * static_cast<int64_t>(sizeof(T)), sizeof(T));
  return v;
}

template <class T>
void store(std::byte* p, int64_t i, T v) {
  std::memcpy(p + i * static_cast<int64_t>(sizeof(T)), &v, sizeof(T));
}

std::string formatDouble(double v) {
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, res.ptr);
}

std::string formatFloat(float v) {
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, res.ptr);
}

}  // namespace

Tensor::Tensor(DType dtype, Shape shape) : dtype_(dtype), shape_(std::move(shape)) {
  auto n = shape_.checkedNumel();
  NNC_CHECK(n.has_value(), "Tensor built with invalid shape " + shape_.str());
  buffer_ = std::make_shared<CacheAlignedVector<std::byte>>(static_cast<size_t>(*n) * dtypeSize(dtype));
}

Tensor Tensor::fromBytes(DType dtype, Shape shape, const void* bytes, size_t byteCount) {
  Tensor t(dtype, std::move(shape));
  NNC_CHECK(byteCount == t.byteSize(), "Tensor::fromBytes: byte count does not match the shape");
  if (byteCount) std::memcpy(t.buffer_->data(), bytes, byteCount);
  return t;
}

Tensor Tensor::scalar(DType dtype, double value) {
  Tensor t(dtype, Shape{});
  t.setDouble(0, value);
  return t;
}

Tensor Tensor::fromInt64s(const std::vector<int64_t>& values, Shape shape) {
  return fromBytes(DType::I64, std::move(shape), values.data(), values.size() * sizeof(int64_t));
}

Tensor Tensor::fromInt64s(const std::vector<int64_t>& values) {
  return fromInt64s(values, Shape{static_cast<int64_t>(values.size())});
}

Tensor Tensor::fromFloats(const std::vector<float>& values, Shape shape) {
  return fromBytes(DType::F32, std::move(shape), values.data(), values.size() * sizeof(float));
}

std::byte* Tensor::mutableData() {
  if (!buffer_) return nullptr;
  if (buffer_.use_count() > 1) buffer_ = std::make_shared<CacheAlignedVector<std::byte>>(*buffer_);
  return buffer_->data();
}

double Tensor::getDouble(int64_t i) const {
  NNC_CHECK(buffer_ && i >= 0 && i < numel(), "Tensor::getDouble index out of range");
  const std::byte* p = data();
  switch (dtype_) {
    case DType::F32: return load<float>(p, i);
    case DType::F64: return load<double>(p, i);
    case DType::F16: return f16ToF32(load<uint16_t>(p, i));
    case DType::BF16: return bf16ToF32(load<uint16_t>(p, i));
    case DType::Bool: return load<uint8_t>(p, i) != 0 ? 1.0 : 0.0;
    case DType::U8: return load<uint8_t>(p, i);
    case DType::I8: return load<int8_t>(p, i);
    case DType::U16: return load<uint16_t>(p, i);
    case DType::I16: return load<int16_t>(p, i);
    case DType::U32: return load<uint32_t>(p, i);
    case DType::I32: return load<int32_t>(p, i);
    case DType::U64: return static_cast<double>(load<uint64_t>(p, i));
    case DType::I64: return static_cast<double>(load<int64_t>(p, i));
  }
  NNC_CHECK(false, "unhandled dtype");
  return 0;
}

int64_t Tensor::getInt(int64_t i) const {
  NNC_CHECK(buffer_ && i >= 0 && i < numel(), "Tensor::getInt index out of range");
  const std::byte* p = data();
  switch (dtype_) {
    case DType::Bool: return load<uint8_t>(p, i) != 0 ? 1 : 0;
    case DType::U8: return load<uint8_t>(p, i);
    case DType::I8: return load<int8_t>(p, i);
    case DType::U16: return load<uint16_t>(p, i);
    case DType::I16: return load<int16_t>(p, i);
    case DType::U32: return load<uint32_t>(p, i);
    case DType::I32: return load<int32_t>(p, i);
    case DType::U64: return static_cast<int64_t>(load<uint64_t>(p, i));  // wraps above 2^63
    case DType::I64: return load<int64_t>(p, i);
    default: return saturatingCast<int64_t>(getDouble(i));
  }
}

void Tensor::setDouble(int64_t i, double v) {
  NNC_CHECK(buffer_ && i >= 0 && i < numel(), "Tensor::setDouble index out of range");
  std::byte* p = mutableData();
  switch (dtype_) {
    case DType::F32: return store<float>(p, i, static_cast<float>(v));
    case DType::F64: return store<double>(p, i, v);
    case DType::F16: return store<uint16_t>(p, i, f32ToF16(roundToOddF32(v)));
    case DType::BF16: return store<uint16_t>(p, i, f32ToBF16(roundToOddF32(v)));
    case DType::Bool: return store<uint8_t>(p, i, v != 0 ? 1 : 0);  // NaN is true, as in numpy
    case DType::U8: return store<uint8_t>(p, i, saturatingCast<uint8_t>(v));
    case DType::I8: return store<int8_t>(p, i, saturatingCast<int8_t>(v));
    case DType::U16: return store<uint16_t>(p, i, saturatingCast<uint16_t>(v));
    case DType::I16: return store<int16_t>(p, i, saturatingCast<int16_t>(v));
    case DType::U32: return store<uint32_t>(p, i, saturatingCast<uint32_t>(v));
    case DType::I32: return store<int32_t>(p, i, saturatingCast<int32_t>(v));
    case DType::U64: return store<uint64_t>(p, i, saturatingCast<uint64_t>(v));
    case DType::I64: return store<int64_t>(p, i, saturatingCast<int64_t>(v));
  }
  NNC_CHECK(false, "unhandled dtype");
}

void Tensor::setInt(int64_t i, int64_t v) {
  NNC_CHECK(buffer_ && i >= 0 && i < numel(), "Tensor::setInt index out of range");
  std::byte* p = mutableData();
  // Integer -> integer conversions wrap (two's complement), as numpy's astype does.
  switch (dtype_) {
    case DType::Bool: return store<uint8_t>(p, i, v != 0 ? 1 : 0);
    case DType::U8: return store<uint8_t>(p, i, static_cast<uint8_t>(v));
    case DType::I8: return store<int8_t>(p, i, static_cast<int8_t>(v));
    case DType::U16: return store<uint16_t>(p, i, static_cast<uint16_t>(v));
    case DType::I16: return store<int16_t>(p, i, static_cast<int16_t>(v));
    case DType::U32: return store<uint32_t>(p, i, static_cast<uint32_t>(v));
    case DType::I32: return store<int32_t>(p, i, static_cast<int32_t>(v));
    case DType::U64: return store<uint64_t>(p, i, static_cast<uint64_t>(v));
    case DType::I64: return store<int64_t>(p, i, v);
    case DType::F32: return store<float>(p, i, static_cast<float>(v));  // one rounding
    default: return setDouble(i, static_cast<double>(v));
  }
}

std::vector<int64_t> Tensor::toInt64s() const {
  std::vector<int64_t> out(static_cast<size_t>(numel()));
  for (int64_t i = 0; i < numel(); ++i) out[i] = getInt(i);
  return out;
}

std::vector<double> Tensor::toDoubles() const {
  std::vector<double> out(static_cast<size_t>(numel()));
  for (int64_t i = 0; i < numel(); ++i) out[i] = getDouble(i);
  return out;
}

Tensor Tensor::reshaped(Shape shape) const {
  NNC_CHECK(shape.checkedNumel() == numel(), "Tensor::reshaped to a different element count");
  Tensor t = *this;
  t.shape_ = std::move(shape);
  return t;
}

Tensor Tensor::castTo(DType to) const {
  if (to == dtype_) return *this;
  Tensor out(to, shape_);
  int64_t n = numel();
  bool srcInt = isInteger(dtype_) || dtype_ == DType::Bool;
  if (srcInt && dtype_ == DType::U64) {
    // Values above 2^63 must not go through int64 when the target is a float type.
    for (int64_t i = 0; i < n; ++i) {
      uint64_t v = load<uint64_t>(data(), i);
      if (to == DType::F32) {
        store<float>(out.mutableData(), i, static_cast<float>(v));
      } else if (isFloat(to)) {
        out.setDouble(i, static_cast<double>(v));
      } else {
        out.setInt(i, static_cast<int64_t>(v));
      }
    }
    return out;
  }
  for (int64_t i = 0; i < n; ++i) {
    if (srcInt) {
      out.setInt(i, getInt(i));
    } else {
      out.setDouble(i, getDouble(i));
    }
  }
  return out;
}

bool Tensor::bitwiseEqual(const Tensor& other) const {
  if (isNull() || other.isNull()) return isNull() == other.isNull();
  if (dtype_ != other.dtype_ || shape_ != other.shape_) return false;
  if (buffer_ == other.buffer_) return true;
  return byteSize() == 0 || std::memcmp(data(), other.data(), byteSize()) == 0;
}

std::string Tensor::summary() const {
  std::string s = std::string(dtypeName(dtype_)) + shape_.str();
  if (isNull()) return s + "{null}";
  s += "{";
  constexpr int64_t kShown = 8;
  int64_t n = numel();
  for (int64_t i = 0; i < n && i < kShown; ++i) {
    if (i) s += ", ";
    if (dtype_ == DType::F64) {
      s += formatDouble(getDouble(i));
    } else if (isFloat(dtype_)) {
      s += formatFloat(static_cast<float>(getDouble(i)));
    } else if (dtype_ == DType::U64) {
      s += std::to_string(load<uint64_t>(data(), i));
    } else {
      s += std::to_string(getInt(i));
    }
  }
  if (n > kShown) s += ", ...";
  return s + "}";
}

int64_t saturatingToInt64(double v) { return saturatingCast<int64_t>(v); }

}  // namespace nnc
