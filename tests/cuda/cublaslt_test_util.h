// Shared by the cuBLASLt wrapper's tests (cublaslt_test.cpp, cublaslt_gpu_test.cpp): GEMM cases and
// the float64 reference for GemmParams' row-major semantics.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "runtime/gemm.h"

namespace nnc::rt::cuda::testing {

inline GemmParams gemm(int32_t dtype, int64_t batch, int64_t m, int64_t n, int64_t k, bool transA, bool transB,
                       int64_t strideA, int64_t strideB, int64_t strideC, GemmEpilogue epilogue, bool tf32 = false) {
  return {.dtype = dtype,
          .batch = batch,
          .m = m,
          .n = n,
          .k = k,
          .transA = transA,
          .transB = transB,
          .strideA = strideA,
          .strideB = strideB,
          .strideC = strideC,
          .epilogue = epilogue,
          .allowTf32 = tf32};
}

// Elements an operand spans over all batches.
inline size_t span(int64_t batch, int64_t stride, int64_t rows, int64_t cols) {
  return static_cast<size_t>((batch - 1) * stride + rows * cols);
}
inline size_t spanA(const GemmParams& p) { return span(p.batch, p.strideA, p.m, p.k); }
inline size_t spanB(const GemmParams& p) { return span(p.batch, p.strideB, p.k, p.n); }
inline size_t spanC(const GemmParams& p) { return span(p.batch, p.strideC, p.m, p.n); }

// What GemmParams specifies (gemm.h), in float64: C values and, per element, sum |a||b| + |bias|
// (the scale of its rounding error). Elements of C outside every batch's matrix stay NaN.
inline void referenceGemm(const GemmParams& p, const std::vector<double>& a, const std::vector<double>& b,
                          const std::vector<double>& bias, std::vector<double>* c, std::vector<double>* scale) {
  c->assign(spanC(p), std::numeric_limits<double>::quiet_NaN());
  scale->assign(spanC(p), 0.0);
  for (int64_t bt = 0; bt < p.batch; ++bt)
    for (int64_t i = 0; i < p.m; ++i)
      for (int64_t j = 0; j < p.n; ++j) {
        double sum = 0, abs = 0;
        for (int64_t q = 0; q < p.k; ++q) {
          const double x = a[bt * p.strideA + (p.transA ? q * p.m + i : i * p.k + q)];
          const double y = b[bt * p.strideB + (p.transB ? j * p.k + q : q * p.n + j)];
          sum += x * y;
          abs += std::fabs(x * y);
        }
        if (p.hasBias()) {
          sum += bias[j];
          abs += std::fabs(bias[j]);
        }
        if (p.hasRelu()) sum = std::max(sum, 0.0);
        (*c)[bt * p.strideC + i * p.n + j] = sum;
        (*scale)[bt * p.strideC + i * p.n + j] = abs;
      }
}

inline std::vector<double> randomValues(size_t count, std::mt19937& rng) {
  std::uniform_real_distribution<double> dist(-1.0, 1.0);
  std::vector<double> v(count);
  for (double& x : v) x = dist(rng);
  return v;
}

// Every batch layout the GPU tests use: broadcast A, broadcast B (foldable unless transA), both
// strided, both broadcast, padded strides.
inline std::vector<GemmParams> batchedCases(int32_t dtype, int64_t m, int64_t n, int64_t k, bool transA, bool transB,
                                            GemmEpilogue epilogue) {
  const int64_t a = m * k, b = k * n, c = m * n;
  const int64_t strides[][3] = {{0, b, c}, {a, 0, c}, {a, b, c + 3}, {0, 0, c}, {a + 5, 0, c}, {a, b + 2, c}};
  std::vector<GemmParams> cases;
  for (const auto& s : strides) cases.push_back(gemm(dtype, 3, m, n, k, transA, transB, s[0], s[1], s[2], epilogue));
  return cases;
}

inline constexpr int64_t kOddSizes[] = {1, 7, 33, 129};
inline constexpr GemmEpilogue kEpilogues[] = {GemmEpilogue::None, GemmEpilogue::Relu, GemmEpilogue::Bias,
                                              GemmEpilogue::BiasRelu};

// The odd-size grid the GPU and emulated cuBLASLt tests share: every m, n, k of kOddSizes, every
// transpose, the epilogues in turn; each case's seed is its index, and every third case runs on
// pointers one element off alignment.
struct OddSizeCase {
  GemmParams params;
  uint32_t seed;
  size_t offset;
};
inline std::vector<OddSizeCase> oddSizeCases(int32_t dtype, bool tf32 = false) {
  std::vector<OddSizeCase> cases;
  uint32_t index = 0;
  for (int64_t m : kOddSizes)
    for (int64_t n : kOddSizes)
      for (int64_t k : kOddSizes)
        for (int t = 0; t < 4; ++t, ++index) {
          const GemmEpilogue e = kEpilogues[(index + index / 4) % 4];
          cases.push_back({gemm(dtype, 1, m, n, k, t & 1, t & 2, 0, 0, 0, e, tf32), index, index % 3 == 0 ? 1u : 0u});
        }
  return cases;
}

}  // namespace nnc::rt::cuda::testing
