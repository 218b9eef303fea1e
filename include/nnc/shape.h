// Static tensor shapes. Every dim is known at compile time; keep dims in this one type so
// that a symbolic dim can be added later without touching every pass.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <vector>

namespace nnc {

// The largest element count nnc accepts for one tensor (2^40): size arithmetic never overflows.
inline constexpr int64_t kMaxElements = int64_t{1} << 40;

class Shape {
 public:
  Shape() = default;  // rank 0: a scalar
  Shape(std::initializer_list<int64_t> dims) : dims_(dims) {}
  explicit Shape(std::vector<int64_t> dims) : dims_(std::move(dims)) {}

  int rank() const { return static_cast<int>(dims_.size()); }
  int64_t operator[](int i) const { return dims_[i]; }
  int64_t& operator[](int i) { return dims_[i]; }
  const std::vector<int64_t>& dims() const { return dims_; }
  std::vector<int64_t>& dims() { return dims_; }
  // Product of dims (saturatingProduct); only meaningful for a validated shape (see checkedNumel).
  int64_t numel() const;
  // Product of dims, or nullopt when a dim is negative or the product exceeds kMaxElements.
  std::optional<int64_t> checkedNumel() const;
  // Row-major strides in elements.
  std::vector<int64_t> strides() const;
  std::string str() const;  // "[1x3x224x224]", "[]" for scalars
  bool operator==(const Shape& o) const { return dims_ == o.dims_; }
  bool operator!=(const Shape& o) const { return dims_ != o.dims_; }

 private:
  std::vector<int64_t> dims_;
};

// Product of dims[begin, end): 0 when one of them is 0 (whatever the others), saturating at INT64_MAX
// instead of overflowing. For arithmetic on dims that are not (yet) validated, such as an empty
// tensor's other dims, which may be up to 2^40 each; a saturated result fails any later size check.
int64_t saturatingProduct(const std::vector<int64_t>& dims, size_t begin, size_t end);
inline int64_t saturatingProduct(const std::vector<int64_t>& dims) { return saturatingProduct(dims, 0, dims.size()); }

// Numpy-style multidirectional broadcast; nullopt when the shapes are incompatible.
std::optional<Shape> broadcastShapes(const Shape& a, const Shape& b);
// Normalises a possibly negative axis into [0, rank); nullopt when out of range.
std::optional<int> normalizeAxis(int64_t axis, int rank);

}  // namespace nnc
