// Shape arithmetic: element counts with overflow checks, strides, broadcasting, axis normalisation.
#include "nnc/shape.h"

#include <algorithm>

namespace nnc {

int64_t saturatingProduct(const std::vector<int64_t>& dims, size_t begin, size_t end) {
  // A zero dim anywhere makes the product 0 even when other dims would overflow it.
  for (size_t i = begin; i < end; ++i)
    if (dims[i] == 0) return 0;
  int64_t n = 1;
  for (size_t i = begin; i < end; ++i)
    if (__builtin_mul_overflow(n, dims[i], &n)) return INT64_MAX;
  return n;
}

int64_t Shape::numel() const { return saturatingProduct(dims_); }

std::optional<int64_t> Shape::checkedNumel() const {
  // Every dim must itself be in range, even in an empty tensor: index arithmetic uses the dims.
  for (int64_t d : dims_)
    if (d < 0 || d > kMaxElements) return std::nullopt;
  int64_t n = 1;
  for (int64_t d : dims_) {
    if (d == 0) return 0;
  }
  for (int64_t d : dims_) {
    if (n > kMaxElements / d) return std::nullopt;
    n *= d;
  }
  if (n > kMaxElements) return std::nullopt;
  return n;
}

std::vector<int64_t> Shape::strides() const {
  std::vector<int64_t> s(dims_.size());
  int64_t acc = 1;
  for (int i = rank() - 1; i >= 0; --i) {
    s[i] = acc;
    // Wrapping (not UB) for an empty tensor's meaningless strides past a zero dim.
    acc = static_cast<int64_t>(static_cast<uint64_t>(acc) * static_cast<uint64_t>(dims_[i]));
  }
  return s;
}

std::string Shape::str() const {
  std::string s = "[";
  for (size_t i = 0; i < dims_.size(); ++i) {
    if (i) s += 'x';
    s += std::to_string(dims_[i]);
  }
  return s + "]";
}

std::optional<Shape> broadcastShapes(const Shape& a, const Shape& b) {
  int rank = std::max(a.rank(), b.rank());
  std::vector<int64_t> out(rank);
  for (int i = 0; i < rank; ++i) {
    int ia = a.rank() - rank + i, ib = b.rank() - rank + i;
    int64_t da = ia >= 0 ? a[ia] : 1;
    int64_t db = ib >= 0 ? b[ib] : 1;
    if (da == db || db == 1) {
      out[i] = da;
    } else if (da == 1) {
      out[i] = db;
    } else {
      return std::nullopt;
    }
  }
  return Shape(std::move(out));
}

std::optional<int> normalizeAxis(int64_t axis, int rank) {
  if (axis < -static_cast<int64_t>(rank) || axis >= rank) return std::nullopt;
  return static_cast<int>(axis < 0 ? axis + rank : axis);
}

}  // namespace nnc
