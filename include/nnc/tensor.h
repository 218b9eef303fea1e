// Host tensors: a dtype, a shape and a shared, copy-on-write byte buffer. Constants in the graph
// hold Tensors; copying a Tensor never copies weights.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "nnc/aligned_vector.h"
#include "nnc/dtype.h"
#include "nnc/shape.h"

namespace nnc {

class Tensor {
 public:
  Tensor() = default;
  // Zero-filled tensor. The shape must already be validated (checkedNumel).
  Tensor(DType dtype, Shape shape);
  static Tensor fromBytes(DType dtype, Shape shape, const void* bytes, size_t byteCount);
  static Tensor scalar(DType dtype, double value);
  static Tensor fromInt64s(const std::vector<int64_t>& values, Shape shape);
  static Tensor fromInt64s(const std::vector<int64_t>& values);  // 1-D
  static Tensor fromFloats(const std::vector<float>& values, Shape shape);

  bool isNull() const { return !buffer_; }
  DType dtype() const { return dtype_; }
  const Shape& shape() const { return shape_; }
  int64_t numel() const { return shape_.numel(); }
  size_t byteSize() const { return static_cast<size_t>(numel()) * dtypeSize(dtype_); }

  const std::byte* data() const { return buffer_ ? buffer_->data() : nullptr; }
  std::byte* mutableData();  // detaches from other holders first
  template <class T>
  const T* dataAs() const {
    return reinterpret_cast<const T*>(data());
  }
  template <class T>
  T* mutableDataAs() {
    return reinterpret_cast<T*>(mutableData());
  }

  // Element access through double / int64 (f16/bf16 converted); used by reference code and tests.
  double getDouble(int64_t flatIndex) const;
  int64_t getInt(int64_t flatIndex) const;
  void setDouble(int64_t flatIndex, double v);
  void setInt(int64_t flatIndex, int64_t v);
  std::vector<int64_t> toInt64s() const;
  std::vector<double> toDoubles() const;

  Tensor reshaped(Shape shape) const;  // same buffer, new shape of equal numel
  Tensor castTo(DType dtype) const;
  bool bitwiseEqual(const Tensor& other) const;
  std::string summary() const;  // "f32[2x3]{1, 2, 3, ...}"

 private:
  DType dtype_ = DType::F32;
  Shape shape_;
  std::shared_ptr<CacheAlignedVector<std::byte>> buffer_;  // cache-line aligned: kernels read it in place
};

// A double as int64: truncated toward zero, saturating at the range, NaN -> 0. For values from a
// model file (attributes, constants): the plain conversion is undefined for NaN, inf and |v| >= 2^63.
int64_t saturatingToInt64(double v);

}  // namespace nnc
