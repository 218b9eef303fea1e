// The emulated cuBLASLt (targets/cuda/emulator/emulated_cublaslt.cpp) on the emulated driver: GEMMs through
// the real GemmRunner (odd sizes, transposes, batches with broadcast operands, every epilogue, f32,
// f64, TF32, pointers off alignment, a CUDA graph) against the float64 reference of
// cublaslt_test_util.h; alpha, beta, C and the epilogues' NaN handling through the C ABI; and misuse
// of every kind refused, naming the reason, without writing anything (a buffer freed before a graph
// replay: the stream fails).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "runtime/cuda/cublaslt.h"
#include "runtime/cuda/cuda_driver.h"
#include "runtime/cuda/emulator.h"
#include "tests/cuda/cublaslt_test_util.h"

namespace nnc::rt::cuda {
namespace {

using namespace testing;  // NOLINT: the shared GEMM cases

constexpr CublasStatus kNotInitialized = 1, kInvalidValue = 7, kExecutionFailed = 13;

#define NNC_ASSERT_CU(call)                                                   \
  do {                                                                        \
    const CUresult result_ = (call);                                          \
    ASSERT_EQ(result_, kCudaSuccess) << describeError(*drv_, result_, #call); \
  } while (0)

// TF32 rounding written independently of the emulator's bit manipulation: the nearest multiple of
// the quantum for 11 significant bits, ties to even (nearbyint in the default rounding mode).
double roundToTf32(float x) {
  if (!std::isfinite(x) || x == 0) return x;
  int exponent = 0;
  std::frexp(x, &exponent);                                               // x = f * 2^exponent, 0.5 <= |f| < 1
  const double quantum = std::ldexp(1.0, std::max(exponent - 11, -136));  // subnormals: fixed quantum
  return std::nearbyint(static_cast<double>(x) / quantum) * quantum;
}

// Every test on a fresh stream of the emulated device, its cuBLASLt handle and a workspace of the
// executor's size; device memory is freed at the end.
class EmulatedCublasLt : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why;
    drv_ = emu::openEmulatedDriver(&why);
    ASSERT_NE(drv_, nullptr) << why;
    lt_ = emu::openEmulatedCublasLt(&why);
    ASSERT_NE(lt_, nullptr) << why;
    NNC_ASSERT_CU(drv_->cuInit(0));
    NNC_ASSERT_CU(drv_->cuDeviceGet(&dev_, 0));
    NNC_ASSERT_CU(drv_->cuDevicePrimaryCtxRetain(&ctx_, dev_));
    NNC_ASSERT_CU(drv_->cuCtxPushCurrent(ctx_));
    pushed_ = true;
    NNC_ASSERT_CU(drv_->cuStreamCreate(&stream_, kStreamNonBlocking));
    workspace_ = alloc(kGemmWorkspaceBytes);
    ASSERT_NE(workspace_, 0u);
    std::string error;
    ASSERT_TRUE(createLtHandle(*lt_, &handle_, &error)) << error;
  }

  void TearDown() override {
    if (handle_) destroyLtHandle(*lt_, handle_);
    if (stream_) {
      drv_->cuStreamSynchronize(stream_);
      drv_->cuStreamDestroy(stream_);
    }
    for (CUdeviceptr p : allocations_) drv_->cuMemFree(p);
    if (pushed_) {
      CUcontext popped = nullptr;
      drv_->cuCtxPopCurrent(&popped);
      drv_->cuDevicePrimaryCtxRelease(dev_);
    }
  }

  // Device memory freed by TearDown (0 when the allocation fails).
  CUdeviceptr alloc(size_t bytes) {
    CUdeviceptr p = 0;
    if (drv_->cuMemAlloc(&p, bytes) != kCudaSuccess) return 0;
    allocations_.push_back(p);
    return p;
  }
  template <class T>
  void upload(CUdeviceptr dst, const std::vector<T>& v) {
    NNC_ASSERT_CU(drv_->cuMemcpyHtoDAsync(dst, v.data(), v.size() * sizeof(T), stream_));
  }
  template <class T>
  void download(std::vector<T>* v, CUdeviceptr src) {
    NNC_ASSERT_CU(drv_->cuMemcpyDtoHAsync(v->data(), src, v->size() * sizeof(T), stream_));
    NNC_ASSERT_CU(drv_->cuStreamSynchronize(stream_));
  }

  // The runner's GEMM `p` on buffers `offset` elements past cuMemAlloc's alignment, checked against
  // the float64 reference: every element of C within tolerance, the guard after C untouched. With
  // `replays`, captured into a graph and replayed that many times with fresh inputs.
  template <class T>
  void expectGemmMatches(const GemmParams& p, uint32_t seed, size_t offset = 0, int replays = 0);
  // The shared odd-size grid (oddSizeCases): odd sizes, every transpose and epilogue, some pointers
  // one element off alignment.
  template <class T>
  void expectOddSizesMatch(int32_t dtype) {
    for (const OddSizeCase& c : oddSizeCases(dtype)) {
      expectGemmMatches<T>(c.params, c.seed, c.offset);
      if (HasFailure()) return;
    }
  }
  // A mixed GEMM `p` (bf16 or f16 operands, f32 C) on buffers `offset` elements off alignment.
  void expectHalfGemmMatches(const GemmParams& p, uint32_t seed, size_t offset);
  void expectGemmMatchesAnyType(const GemmParams& p, uint32_t seed, size_t offset = 0) {
    if (p.dtype == 11)
      expectGemmMatches<double>(p, seed, offset);
    else
      expectGemmMatches<float>(p, seed, offset);
  }

  const DriverApi* drv_ = nullptr;
  const CublasLtApi* lt_ = nullptr;
  CUdevice dev_ = 0;
  CUcontext ctx_ = nullptr;
  bool pushed_ = false;
  CUstream stream_ = nullptr;
  void* handle_ = nullptr;
  CUdeviceptr workspace_ = 0;
  std::vector<CUdeviceptr> allocations_;
};

template <class T>
void EmulatedCublasLt::expectGemmMatches(const GemmParams& p, uint32_t seed, size_t offset, int replays) {
  SCOPED_TRACE(describeGemm(p) + " offset " + std::to_string(offset));
  constexpr size_t kGuard = 16;
  const size_t o = offset * sizeof(T);
  const CUdeviceptr a = alloc((spanA(p) + offset) * sizeof(T)), b = alloc((spanB(p) + offset) * sizeof(T));
  const CUdeviceptr c = alloc((spanC(p) + kGuard + offset) * sizeof(T));
  const CUdeviceptr bias = alloc((static_cast<size_t>(p.n) + offset) * sizeof(T));
  ASSERT_TRUE(a && b && c && bias);
  const GemmBuffers buffers{a + o, b + o, c + o, p.hasBias() ? bias + o : 0, workspace_, kGemmWorkspaceBytes};
  std::string error;
  std::unique_ptr<GemmRunner> runner = GemmRunner::create(*lt_, handle_, p, buffers, &error);
  ASSERT_NE(runner, nullptr) << error;
  EXPECT_EQ(runner->algorithmWorkspaceBytes(), 0u);

  CUgraphExec exec = nullptr;
  if (replays > 0) {
    ASSERT_TRUE(drv_->hasGraphs());
    CUgraph graph = nullptr;
    NNC_ASSERT_CU(drv_->cuStreamBeginCapture(stream_, kStreamCaptureModeThreadLocal));
    const bool enqueued = runner->run(stream_, &error);
    NNC_ASSERT_CU(drv_->cuStreamEndCapture(stream_, &graph));
    ASSERT_TRUE(enqueued) << error;
    const CUresult instantiated = drv_->cuGraphInstantiateWithFlags(&exec, graph, 0);
    drv_->cuGraphDestroy(graph);
    NNC_ASSERT_CU(instantiated);
  }
  std::mt19937 rng(seed);
  const bool tf32 = p.allowTf32;
  for (int round = 0; round < std::max(replays, 1) && !HasFailure(); ++round) {
    const std::vector<double> aValues = randomValues(spanA(p), rng), bValues = randomValues(spanB(p), rng);
    const std::vector<double> biasValues = randomValues(static_cast<size_t>(p.n), rng);
    const std::vector<T> aT(aValues.begin(), aValues.end()), bT(bValues.begin(), bValues.end());
    const std::vector<T> biasT(biasValues.begin(), biasValues.end());
    // The reference sees exactly the values on the device (rounded to TF32 where allowed).
    std::vector<double> aRef(aT.begin(), aT.end()), bRef(bT.begin(), bT.end());
    if (tf32) {
      for (size_t i = 0; i < aRef.size(); ++i) aRef[i] = roundToTf32(static_cast<float>(aT[i]));
      for (size_t i = 0; i < bRef.size(); ++i) bRef[i] = roundToTf32(static_cast<float>(bT[i]));
    }
    std::vector<double> want, scale;
    referenceGemm(p, aRef, bRef, std::vector<double>(biasT.begin(), biasT.end()), &want, &scale);
    std::vector<T> cValues(spanC(p) + kGuard, std::numeric_limits<T>::quiet_NaN());
    upload(a + o, aT);
    upload(b + o, bT);
    upload(c + o, cValues);
    if (p.hasBias()) upload(bias + o, biasT);
    if (exec) {
      NNC_ASSERT_CU(drv_->cuGraphLaunch(exec, stream_));
    } else {
      ASSERT_TRUE(runner->run(stream_, &error)) << error;
    }
    download(&cValues, c + o);
    for (size_t i = 0; i < cValues.size(); ++i) {
      if (i >= want.size() || std::isnan(want[i])) {
        ASSERT_TRUE(std::isnan(cValues[i])) << "element " << i << " outside C was written: " << cValues[i];
        continue;
      }
      // Rounding the float64 sum to T, and float64 sums in another order.
      const double rounding = std::is_same_v<T, float> ? std::ldexp(std::fabs(want[i]), -23) : 0.0;
      const double err = std::fabs(static_cast<double>(cValues[i]) - want[i]);
      ASSERT_LE(err, rounding + 1e-13 * scale[i] + 1e-300)  // false for NaN: every element must be written
          << "element " << i << ": emulated " << cValues[i] << ", reference " << want[i];
    }
  }
  if (exec) drv_->cuGraphExecDestroy(exec);
}

// x (an f32 of magnitude at most 1, as randomValues makes) as bf16 or f16 bits, and their value: bf16 by
// arithmetic (the nearest multiple of the quantum for 8 significant bits, ties to even, as roundToTf32),
// f16 through the compiler's _Float16.
uint16_t toHalfBits(double x, int32_t half, double* rounded) {
  uint16_t bits;
  if (half == 16) {
    const float f = static_cast<float>(x);
    int exponent = 0;
    std::frexp(f, &exponent);
    const float r =
        f == 0 ? f
               : static_cast<float>(std::nearbyint(f / std::ldexp(1.0, exponent - 8)) * std::ldexp(1.0, exponent - 8));
    uint32_t fbits;
    std::memcpy(&fbits, &r, 4);
    EXPECT_EQ(fbits & 0xffff, 0u) << x << " rounded to " << r << " is not a bf16";
    bits = static_cast<uint16_t>(fbits >> 16);
    *rounded = r;
  } else {
    const _Float16 h = static_cast<_Float16>(static_cast<float>(x));
    std::memcpy(&bits, &h, 2);
    *rounded = static_cast<double>(h);
  }
  return bits;
}

void EmulatedCublasLt::expectHalfGemmMatches(const GemmParams& p, uint32_t seed, size_t offset) {
  SCOPED_TRACE(describeGemm(p) + " offset " + std::to_string(offset));
  ASSERT_TRUE(p.mixed());
  constexpr size_t kGuard = 16;
  const CUdeviceptr a = alloc((spanA(p) + offset) * 2), b = alloc((spanB(p) + offset) * 2);
  const CUdeviceptr c = alloc((spanC(p) + kGuard + offset) * 4), bias = alloc((static_cast<size_t>(p.n) + offset) * 4);
  ASSERT_TRUE(a && b && c && bias);
  const GemmBuffers buffers{a + offset * 2, b + offset * 2,     c + offset * 4, p.hasBias() ? bias + offset * 4 : 0,
                            workspace_,     kGemmWorkspaceBytes};
  std::string error;
  std::unique_ptr<GemmRunner> runner = GemmRunner::create(*lt_, handle_, p, buffers, &error);
  ASSERT_NE(runner, nullptr) << error;
  std::mt19937 rng(seed);
  const auto operand = [&](size_t count, std::vector<double>* rounded) {
    const std::vector<double> values = randomValues(count, rng);
    std::vector<uint16_t> bits(count);
    rounded->resize(count);
    for (size_t i = 0; i < count; ++i) bits[i] = toHalfBits(values[i], p.operandType(), &(*rounded)[i]);
    return bits;
  };
  std::vector<double> aRef, bRef;
  const std::vector<uint16_t> aBits = operand(spanA(p), &aRef), bBits = operand(spanB(p), &bRef);
  const std::vector<double> biasValues = randomValues(static_cast<size_t>(p.n), rng);
  const std::vector<float> biasF(biasValues.begin(), biasValues.end());
  std::vector<double> want, scale;
  referenceGemm(p, aRef, bRef, std::vector<double>(biasF.begin(), biasF.end()), &want, &scale);
  std::vector<float> cValues(spanC(p) + kGuard, std::numeric_limits<float>::quiet_NaN());
  upload(a + offset * 2, aBits);
  upload(b + offset * 2, bBits);
  upload(c + offset * 4, cValues);
  if (p.hasBias()) upload(bias + offset * 4, biasF);
  ASSERT_TRUE(runner->run(stream_, &error)) << error;
  download(&cValues, c + offset * 4);
  for (size_t i = 0; i < cValues.size(); ++i) {
    if (i >= want.size() || std::isnan(want[i])) {
      ASSERT_TRUE(std::isnan(cValues[i])) << "element " << i << " outside C was written: " << cValues[i];
      continue;
    }
    const double err = std::fabs(static_cast<double>(cValues[i]) - want[i]);
    ASSERT_LE(err, std::ldexp(std::fabs(want[i]), -23) + 1e-13 * scale[i] + 1e-300)
        << "element " << i << ": emulated " << cValues[i] << ", reference " << want[i];
  }
}

// ---- GEMMs through the runner

TEST_F(EmulatedCublasLt, F32OddSizes) { expectOddSizesMatch<float>(1); }

TEST_F(EmulatedCublasLt, F64OddSizes) { expectOddSizesMatch<double>(11); }

TEST_F(EmulatedCublasLt, Tf32OddSizes) {
  uint32_t index = 0;
  for (int64_t m : {1, 7, 33})
    for (int64_t n : {1, 33})
      for (int64_t k : {1, 7, 129})
        for (int t = 0; t < 4; ++t, ++index) {
          const GemmEpilogue e = kEpilogues[index % 4];
          expectGemmMatches<float>(gemm(1, 1, m, n, k, t & 1, t & 2, 0, 0, 0, e, true), index);
          if (HasFailure()) return;
        }
}

// bf16 and f16 operands with f32 results (--precision=bf16|fp16 on cuda): the operands are rounded
// here (toHalfBits, round to nearest even) independently of nnc's and of the emulator's bit
// manipulation; the float64 reference sees the rounded values. Odd
// sizes, every transpose and epilogue, batches (broadcast and folded), pointers off alignment.
TEST_F(EmulatedCublasLt, HalfOperandsWithF32Results) {
  uint32_t index = 0;
  for (int32_t half : {16, 10}) {
    std::vector<GemmParams> cases;
    for (const OddSizeCase& c : oddSizeCases(1))
      if (c.seed % 3 == 0) cases.push_back(c.params);
    for (const GemmParams& p : batchedCases(1, 7, 33, 129, false, false, GemmEpilogue::Bias)) cases.push_back(p);
    for (const GemmParams& p : batchedCases(1, 33, 7, 5, true, true, GemmEpilogue::BiasRelu)) cases.push_back(p);
    for (GemmParams p : cases) {
      p.operandDtype = half;
      expectHalfGemmMatches(p, index, index % 2);
      ++index;
      if (HasFailure()) return;
    }
  }
}

// Broadcast (stride 0) A or B, both strided, both broadcast, padded strides, and the folded case.
TEST_F(EmulatedCublasLt, Batched) {
  const int64_t sizes[][3] = {{1, 1, 1}, {7, 33, 129}, {33, 7, 1}, {1, 33, 7}};
  uint32_t index = 0;
  int folded = 0, batched = 0;
  for (int32_t dtype : {1, 11})
    for (const auto& s : sizes)
      for (int t = 0; t < 4; ++t) {
        const GemmEpilogue e = kEpilogues[(index / 6 + t) % 4];
        for (const GemmParams& p : batchedCases(dtype, s[0], s[1], s[2], t & 1, t & 2, e)) {
          LtGemmShape shape;
          std::string error;
          ASSERT_TRUE(ltGemmShape(p, &shape, &error)) << error;
          folded += shape.folded;
          batched += shape.batch > 1;
          ++index;
          expectGemmMatchesAnyType(p, index, index % 4 == 0 ? 1 : 0);
          if (HasFailure()) return;
        }
      }
  EXPECT_GT(folded, 0);
  EXPECT_GT(batched, 0);
}

// CUBLAS_COMPUTE_32F does not round inputs to TF32: A times the identity is A, bit for bit.
TEST_F(EmulatedCublasLt, F32IsExactFp32) {
  const GemmParams p = gemm(1, 1, 16, 8, 8, false, false, 0, 0, 0, GemmEpilogue::None);
  const CUdeviceptr a = alloc(spanA(p) * 4), b = alloc(spanB(p) * 4), c = alloc(spanC(p) * 4);
  std::string error;
  auto runner = GemmRunner::create(*lt_, handle_, p, {a, b, c, 0, 0, 0}, &error);
  ASSERT_NE(runner, nullptr) << error;
  std::mt19937 rng(3);
  const std::vector<double> values = randomValues(spanA(p), rng);
  std::vector<float> aValues(values.begin(), values.end());
  for (float& x : aValues) x = std::nextafter(x, 2.0f);  // low mantissa bits set that TF32 would drop
  std::vector<float> identity(spanB(p), 0.0f);
  for (int64_t i = 0; i < p.k; ++i) identity[static_cast<size_t>(i * p.n + i)] = 1.0f;
  upload(a, aValues);
  upload(b, identity);
  ASSERT_TRUE(runner->run(stream_, &error)) << error;
  std::vector<float> cValues(spanC(p));
  download(&cValues, c);
  for (size_t i = 0; i < cValues.size(); ++i) ASSERT_EQ(cValues[i], aValues[i]) << "element " << i;
}

// The executor captures GEMM steps into CUDA graphs and replays them: the GEMM runs at each replay,
// reading the buffers then.
TEST_F(EmulatedCublasLt, CapturedIntoAGraphAndReplayed) {
  expectGemmMatches<float>(gemm(1, 1, 65, 33, 129, false, true, 0, 0, 0, GemmEpilogue::BiasRelu), 1, 0, 2);
  expectGemmMatches<double>(gemm(11, 3, 33, 7, 5, true, false, 0, 35, 7 * 33, GemmEpilogue::Relu), 2, 0, 2);
}

// The GEMM checks its operands again when it runs: a graph replayed after a buffer was freed fails
// the stream instead of touching freed memory.
TEST_F(EmulatedCublasLt, ReplayAfterAFreeFailsTheStream) {
  const GemmParams p = gemm(1, 1, 4, 4, 4, false, false, 0, 0, 0, GemmEpilogue::None);
  const CUdeviceptr a = alloc(spanA(p) * 4), b = alloc(spanB(p) * 4), c = alloc(spanC(p) * 4);
  ASSERT_TRUE(a && b && c);
  std::string error;
  auto runner = GemmRunner::create(*lt_, handle_, p, {a, b, c, 0, 0, 0}, &error);
  ASSERT_NE(runner, nullptr) << error;
  ASSERT_TRUE(drv_->hasGraphs());
  CUgraph graph = nullptr;
  CUgraphExec exec = nullptr;
  NNC_ASSERT_CU(drv_->cuStreamBeginCapture(stream_, kStreamCaptureModeThreadLocal));
  const bool enqueued = runner->run(stream_, &error);
  NNC_ASSERT_CU(drv_->cuStreamEndCapture(stream_, &graph));
  ASSERT_TRUE(enqueued) << error;
  const CUresult instantiated = drv_->cuGraphInstantiateWithFlags(&exec, graph, 0);
  drv_->cuGraphDestroy(graph);
  NNC_ASSERT_CU(instantiated);
  NNC_ASSERT_CU(drv_->cuGraphLaunch(exec, stream_));
  NNC_ASSERT_CU(drv_->cuStreamSynchronize(stream_));
  NNC_ASSERT_CU(drv_->cuMemFree(b));
  allocations_.erase(std::find(allocations_.begin(), allocations_.end(), b));
  const CUresult launched = drv_->cuGraphLaunch(exec, stream_);
  const CUresult synced = launched == kCudaSuccess ? drv_->cuStreamSynchronize(stream_) : launched;
  EXPECT_NE(synced, kCudaSuccess);
  drv_->cuGraphExecDestroy(exec);
}

// ---- The C ABI directly: a column-major D[m x n] = alpha op(A) op(B) + beta C (+ bias) problem built
// by hand, each misuse test changing one thing of a call that otherwise succeeds.

constexpr uint64_t kM = 4, kN = 3, kK = 5;
constexpr float kSentinel = 42.0f;

// A, B, C, D as f32 column-major kM x kK, kK x kN, kM x kN (no transposes), ld = rows.
class EmulatedCublasLtAbi : public EmulatedCublasLt {
 protected:
  void SetUp() override {
    EmulatedCublasLt::SetUp();
    if (HasFatalFailure()) return;
    a_ = alloc(kM * kK * 4);
    b_ = alloc(kK * kN * 4);
    c_ = alloc(kM * kN * 4);
    d_ = alloc(kM * kN * 4);
    bias_ = alloc(kM * 4);
    ASSERT_TRUE(a_ && b_ && c_ && d_ && bias_);
    aValues_.resize(kM * kK);
    bValues_.resize(kK * kN);
    cValues_.resize(kM * kN);
    for (size_t i = 0; i < aValues_.size(); ++i) aValues_[i] = static_cast<float>(i % 7) - 3.0f;
    for (size_t i = 0; i < bValues_.size(); ++i) bValues_[i] = 0.5f * static_cast<float>(i % 5) - 1.0f;
    for (size_t i = 0; i < cValues_.size(); ++i) cValues_[i] = static_cast<float>(i) * 0.25f;
    upload(a_, aValues_);
    upload(b_, bValues_);
    upload(c_, cValues_);
    upload(bias_, std::vector<float>{1.0f, -2.0f, 3.0f, -4.0f});
    poisonD();
    ASSERT_EQ(lt_->cublasLtMatmulDescCreate(&desc_, lt::kCompute32F, lt::kDataR32F), 0);
    ASSERT_EQ(lt_->cublasLtMatrixLayoutCreate(&aLayout_, lt::kDataR32F, kM, kK, kM), 0);
    ASSERT_EQ(lt_->cublasLtMatrixLayoutCreate(&bLayout_, lt::kDataR32F, kK, kN, kK), 0);
    ASSERT_EQ(lt_->cublasLtMatrixLayoutCreate(&cLayout_, lt::kDataR32F, kM, kN, kM), 0);
    ASSERT_EQ(lt_->cublasLtMatmulPreferenceCreate(&pref_), 0);
    ASSERT_NO_FATAL_FAILURE(setAlignment(16));
    ASSERT_NO_FATAL_FAILURE(chooseAlgo());
  }

  void TearDown() override {
    for (void* l : {aLayout_, bLayout_, cLayout_})
      if (l) lt_->cublasLtMatrixLayoutDestroy(l);
    if (desc_) lt_->cublasLtMatmulDescDestroy(desc_);
    if (pref_) lt_->cublasLtMatmulPreferenceDestroy(pref_);
    EmulatedCublasLt::TearDown();
  }

  void setAlignment(uint32_t bytes) {
    for (int32_t attr : {lt::kPrefMinAlignmentABytes, lt::kPrefMinAlignmentBBytes, lt::kPrefMinAlignmentCBytes,
                         lt::kPrefMinAlignmentDBytes})
      ASSERT_EQ(lt_->cublasLtMatmulPreferenceSetAttribute(pref_, attr, &bytes, sizeof(bytes)), 0) << lastReason();
  }
  void chooseAlgo() {
    CublasLtHeuristicResult result{};
    int returned = 0;
    ASSERT_EQ(lt_->cublasLtMatmulAlgoGetHeuristic(handle_, desc_, aLayout_, bLayout_, cLayout_, cLayout_, pref_, 1,
                                                  &result, &returned),
              0)
        << lastReason();
    ASSERT_EQ(returned, 1);
    ASSERT_EQ(result.state, 0);
    EXPECT_EQ(result.workspaceSize, 0u);
    algo_ = result.algo;
  }
  void poisonD() { upload(d_, std::vector<float>(kM * kN, kSentinel)); }
  static void* ptr(CUdeviceptr p) { return reinterpret_cast<void*>(static_cast<uintptr_t>(p)); }
  // What the emulator says about the calling thread's last failure of `status`.
  std::string lastReason(CublasStatus status = kInvalidValue) const { return lt_->cublasLtGetStatusString(status); }

  // Every argument of one cublasLtMatmul call, D = A B (C distinct from D, beta = 0).
  struct Call {
    void* handle;
    void* desc;
    const void* alpha;
    const void* a;
    void* aLayout;
    const void* b;
    void* bLayout;
    const void* beta;
    const void* c;
    void* cLayout;
    void* d;
    void* dLayout;
    const CublasLtMatmulAlgo* algo;
    void* workspace;
    size_t workspaceBytes;
    void* stream;
  };
  Call call() const {
    return {handle_, desc_,    &alpha_, ptr(a_),         aLayout_,
            ptr(b_), bLayout_, &beta_,  ptr(c_),         cLayout_,
            ptr(d_), cLayout_, &algo_,  ptr(workspace_), kGemmWorkspaceBytes,
            stream_};
  }
  CublasStatus run(const Call& c) const {
    return lt_->cublasLtMatmul(c.handle, c.desc, c.alpha, c.a, c.aLayout, c.b, c.bLayout, c.beta, c.c, c.cLayout, c.d,
                               c.dLayout, c.algo, c.workspace, c.workspaceBytes, c.stream);
  }
  // D as the emulator left it.
  std::vector<float> resultD() {
    std::vector<float> d(kM * kN);
    download(&d, d_);
    return d;
  }
  // The call is refused with `status`, its reason naming `reason`, and D is not written.
  void expectRefused(const Call& c, const std::string& reason, CublasStatus status = kInvalidValue) {
    ASSERT_EQ(run(c), status);
    EXPECT_NE(lastReason(status).find(reason), std::string::npos) << lastReason(status);
    for (float x : resultD()) ASSERT_EQ(x, kSentinel) << "a refused call wrote D";
  }
  // The call succeeds and D = alpha A B + beta C.
  void expectAccepted(const Call& c) {
    poisonD();
    ASSERT_EQ(run(c), 0) << lastReason();
    float alpha = 0, beta = 0;
    std::memcpy(&alpha, c.alpha, 4);
    std::memcpy(&beta, c.beta, 4);
    const std::vector<float> d = resultD();
    for (uint64_t i = 0; i < kM; ++i)
      for (uint64_t j = 0; j < kN; ++j) {
        double sum = 0;
        for (uint64_t q = 0; q < kK; ++q) sum += double{aValues_[i + q * kM]} * bValues_[q + j * kK];
        const double want = alpha * sum + (beta != 0 ? beta * cValues_[i + j * kM] : 0.0);
        ASSERT_EQ(d[i + j * kM], static_cast<float>(want)) << "D(" << i << ", " << j << ")";
      }
  }

  CUdeviceptr a_ = 0, b_ = 0, c_ = 0, d_ = 0, bias_ = 0;
  std::vector<float> aValues_, bValues_, cValues_;
  void *desc_ = nullptr, *aLayout_ = nullptr, *bLayout_ = nullptr, *cLayout_ = nullptr, *pref_ = nullptr;
  CublasLtMatmulAlgo algo_{};
  float alpha_ = 1.0f, beta_ = 0.0f;
};

TEST_F(EmulatedCublasLtAbi, AlphaBetaAndC) {
  expectAccepted(call());
  const float alpha = 0.5f, beta = -2.0f;
  Call c = call();
  c.alpha = &alpha;
  c.beta = &beta;
  expectAccepted(c);
  // In place: C is D.
  upload(d_, cValues_);
  c.c = ptr(d_);
  ASSERT_EQ(run(c), 0) << lastReason();
  const std::vector<float> inPlace = resultD();
  c.c = ptr(c_);
  expectAccepted(c);
  EXPECT_EQ(inPlace, resultD());
}

// beta = 0: C is not read (NaN there does not reach D), and need not even be device memory.
TEST_F(EmulatedCublasLtAbi, BetaZeroDoesNotReadC) {
  upload(c_, std::vector<float>(kM * kN, std::numeric_limits<float>::quiet_NaN()));
  expectAccepted(call());
  const std::vector<float> host(kM * kN);
  Call c = call();
  c.c = host.data();
  expectAccepted(c);
}

// Bias per row of D, then ReLU; cuBLASLt's ReLU turns NaN into 0 and DEFAULT keeps it.
TEST_F(EmulatedCublasLtAbi, Epilogues) {
  std::vector<float> a = aValues_;
  a[1] = std::numeric_limits<float>::quiet_NaN();  // row 1 of op(A): row 1 of D is NaN
  upload(a_, a);
  const void* bias = ptr(bias_);
  ASSERT_EQ(lt_->cublasLtMatmulDescSetAttribute(desc_, lt::kDescBiasPointer, &bias, sizeof(bias)), 0);
  const float biasValues[kM] = {1.0f, -2.0f, 3.0f, -4.0f};
  for (uint32_t epilogue : {lt::kEpilogueDefault, lt::kEpilogueRelu, lt::kEpilogueBias, lt::kEpilogueReluBias}) {
    SCOPED_TRACE("epilogue " + std::to_string(epilogue));
    ASSERT_EQ(lt_->cublasLtMatmulDescSetAttribute(desc_, lt::kDescEpilogue, &epilogue, sizeof(epilogue)), 0);
    ASSERT_NO_FATAL_FAILURE(chooseAlgo());
    poisonD();
    ASSERT_EQ(run(call()), 0) << lastReason();
    const std::vector<float> d = resultD();
    const bool withBias = epilogue == lt::kEpilogueBias || epilogue == lt::kEpilogueReluBias;
    const bool relu = epilogue == lt::kEpilogueRelu || epilogue == lt::kEpilogueReluBias;
    for (uint64_t i = 0; i < kM; ++i)
      for (uint64_t j = 0; j < kN; ++j) {
        double want = 0;
        for (uint64_t q = 0; q < kK; ++q) want += double{a[i + q * kM]} * bValues_[q + j * kK];
        if (withBias) want += biasValues[i];
        if (relu) want = want > 0 ? want : 0.0;
        const float got = d[i + j * kM];
        if (std::isnan(want)) {
          EXPECT_TRUE(std::isnan(got)) << "D(" << i << ", " << j << ") = " << got;
        } else {
          EXPECT_EQ(got, static_cast<float>(want)) << "D(" << i << ", " << j << ")";
        }
      }
    if (relu) {
      EXPECT_EQ(d[1], 0.0f) << "ReLU of NaN";
    }
  }
}

// TF32 keeps 10 explicit mantissa bits, rounding to nearest even; 32F keeps them all.
TEST_F(EmulatedCublasLtAbi, Tf32Rounding) {
  void* desc = nullptr;
  ASSERT_EQ(lt_->cublasLtMatmulDescCreate(&desc, lt::kCompute32FFastTf32, lt::kDataR32F), 0);
  void* one = nullptr;  // 1 x 1 layouts: D = a b
  ASSERT_EQ(lt_->cublasLtMatrixLayoutCreate(&one, lt::kDataR32F, 1, 1, 1), 0);
  CublasLtHeuristicResult result{};
  int returned = 0;
  for (void* d : {desc, desc_}) {
    ASSERT_EQ(lt_->cublasLtMatmulAlgoGetHeuristic(handle_, d, one, one, one, one, pref_, 1, &result, &returned), 0);
    const bool tf32 = d == desc;
    const float x[] = {1.0f + 0x1p-11f, 1.0f + 0x3p-11f, 1.0f + 0x1p-10f + 0x1p-20f, -(1.0f + 0x5p-12f)};
    const float tf32Want[] = {1.0f, 1.0f + 0x1p-9f, 1.0f + 0x1p-10f, -(1.0f + 0x1p-10f)};
    for (size_t i = 0; i < std::size(x); ++i) {
      upload(a_, std::vector<float>{x[i]});
      upload(b_, std::vector<float>{1.0f});
      Call c = call();
      c.desc = d;
      c.aLayout = c.bLayout = c.cLayout = c.dLayout = one;
      c.algo = &result.algo;
      ASSERT_EQ(run(c), 0) << lastReason();
      EXPECT_EQ(resultD()[0], tf32 ? tf32Want[i] : x[i]) << (tf32 ? "TF32 " : "32F ") << x[i];
      EXPECT_EQ(roundToTf32(x[i]), tf32Want[i]);  // the test's own rounding agrees
    }
  }
  lt_->cublasLtMatrixLayoutDestroy(one);
  lt_->cublasLtMatmulDescDestroy(desc);
}

// ---- Misuse

TEST_F(EmulatedCublasLtAbi, WrongAttributeSizeIsRefused) {
  const int64_t op64 = lt::kOpT;
  const int32_t op = lt::kOpT;
  EXPECT_EQ(lt_->cublasLtMatmulDescSetAttribute(desc_, lt::kDescTransA, &op64, sizeof(op64)), kInvalidValue);
  EXPECT_NE(lastReason().find("takes an int32_t, got 8 bytes"), std::string::npos) << lastReason();
  EXPECT_EQ(lt_->cublasLtMatmulDescSetAttribute(desc_, lt::kDescTransA, &op, sizeof(op)), 0);
  const uint64_t epilogue = lt::kEpilogueRelu;
  EXPECT_EQ(lt_->cublasLtMatmulDescSetAttribute(desc_, lt::kDescEpilogue, &epilogue, sizeof(epilogue)), kInvalidValue);
  const void* bias = ptr(bias_);
  EXPECT_EQ(lt_->cublasLtMatmulDescSetAttribute(desc_, lt::kDescBiasPointer, &bias, 4), kInvalidValue);
  EXPECT_EQ(lt_->cublasLtMatmulDescSetAttribute(desc_, lt::kDescBiasPointer, nullptr, sizeof(bias)), kInvalidValue);
  const int64_t count = 2;
  EXPECT_EQ(lt_->cublasLtMatrixLayoutSetAttribute(aLayout_, lt::kLayoutBatchCount, &count, sizeof(count)),
            kInvalidValue);
  const int32_t stride = 0;
  EXPECT_EQ(lt_->cublasLtMatrixLayoutSetAttribute(aLayout_, lt::kLayoutStridedBatchOffset, &stride, sizeof(stride)),
            kInvalidValue);
  const uint32_t workspace = 64;
  EXPECT_EQ(lt_->cublasLtMatmulPreferenceSetAttribute(pref_, lt::kPrefMaxWorkspaceBytes, &workspace, 4), kInvalidValue);
  const uint64_t alignment = 16;
  EXPECT_EQ(lt_->cublasLtMatmulPreferenceSetAttribute(pref_, lt::kPrefMinAlignmentBBytes, &alignment, 8),
            kInvalidValue);
  // The refused values changed nothing: the transpose set above is the only change.
  CublasLtHeuristicResult result{};
  int returned = 0;
  EXPECT_EQ(lt_->cublasLtMatmulAlgoGetHeuristic(handle_, desc_, aLayout_, bLayout_, cLayout_, cLayout_, pref_, 1,
                                                &result, &returned),
            kInvalidValue);  // op(A) is now 5 x 4
  EXPECT_NE(lastReason().find("not one GEMM"), std::string::npos) << lastReason();
}

TEST_F(EmulatedCublasLtAbi, UnknownAttributeIsRefused) {
  const int32_t value = 0;
  // CUBLASLT_MATMUL_DESC_COMPUTE_TYPE, _POINTER_MODE; CUBLASLT_MATRIX_LAYOUT_TYPE, _ORDER;
  // CUBLASLT_MATMUL_PREF_SEARCH_MODE, _REDUCTION_SCHEME_MASK: real attributes the runner does not set.
  for (int32_t attr : {0, 2, 1000}) {
    EXPECT_EQ(lt_->cublasLtMatmulDescSetAttribute(desc_, attr, &value, sizeof(value)), kInvalidValue) << attr;
    EXPECT_NE(lastReason().find("not emulated"), std::string::npos) << lastReason();
  }
  for (int32_t attr : {0, 1, 1000})
    EXPECT_EQ(lt_->cublasLtMatrixLayoutSetAttribute(aLayout_, attr, &value, sizeof(value)), kInvalidValue) << attr;
  for (int32_t attr : {0, 3, 4, 9, 1000})
    EXPECT_EQ(lt_->cublasLtMatmulPreferenceSetAttribute(pref_, attr, &value, sizeof(value)), kInvalidValue) << attr;
  expectAccepted(call());
}

TEST_F(EmulatedCublasLtAbi, InvalidAttributeValuesAreRefused) {
  const int32_t op = 2;  // CUBLAS_OP_C: not for real matrices here
  EXPECT_EQ(lt_->cublasLtMatmulDescSetAttribute(desc_, lt::kDescTransB, &op, sizeof(op)), kInvalidValue);
  for (uint32_t epilogue : {0u, 3u, 8u, 32u}) {
    EXPECT_EQ(lt_->cublasLtMatmulDescSetAttribute(desc_, lt::kDescEpilogue, &epilogue, sizeof(epilogue)), kInvalidValue)
        << epilogue;
  }
  for (int32_t count : {0, -1})
    EXPECT_EQ(lt_->cublasLtMatrixLayoutSetAttribute(aLayout_, lt::kLayoutBatchCount, &count, sizeof(count)),
              kInvalidValue);
  const int64_t stride = -1;
  EXPECT_EQ(lt_->cublasLtMatrixLayoutSetAttribute(aLayout_, lt::kLayoutStridedBatchOffset, &stride, sizeof(stride)),
            kInvalidValue);
  for (uint32_t alignment : {0u, 3u, 24u}) {
    EXPECT_EQ(
        lt_->cublasLtMatmulPreferenceSetAttribute(pref_, lt::kPrefMinAlignmentCBytes, &alignment, sizeof(alignment)),
        kInvalidValue)
        << alignment;
    EXPECT_NE(lastReason().find("power of two"), std::string::npos) << lastReason();
  }
  expectAccepted(call());
}

TEST_F(EmulatedCublasLtAbi, InvalidTypesAndShapesAreRefused) {
  void* obj = nullptr;
  EXPECT_EQ(lt_->cublasLtMatmulDescCreate(&obj, 64 /* CUBLAS_COMPUTE_16F */, 2 /* CUDA_R_16F */), kInvalidValue);
  EXPECT_EQ(lt_->cublasLtMatmulDescCreate(&obj, lt::kCompute32F, lt::kDataR64F), kInvalidValue);
  EXPECT_EQ(lt_->cublasLtMatmulDescCreate(&obj, lt::kCompute64F, lt::kDataR32F), kInvalidValue);
  EXPECT_EQ(lt_->cublasLtMatmulDescCreate(&obj, lt::kCompute32FFastTf32, lt::kDataR64F), kInvalidValue);
  EXPECT_EQ(lt_->cublasLtMatmulDescCreate(nullptr, lt::kCompute32F, lt::kDataR32F), kInvalidValue);
  EXPECT_EQ(lt_->cublasLtMatrixLayoutCreate(&obj, 3 /* CUDA_R_8I */, 4, 4, 4), kInvalidValue);
  EXPECT_EQ(lt_->cublasLtMatrixLayoutCreate(&obj, lt::kDataR32F, 0, 4, 4), kInvalidValue);
  EXPECT_EQ(lt_->cublasLtMatrixLayoutCreate(&obj, lt::kDataR32F, 4, 0, 4), kInvalidValue);
  EXPECT_EQ(obj, nullptr);
  // ld < rows: column-major columns would overlap.
  EXPECT_EQ(lt_->cublasLtMatrixLayoutCreate(&obj, lt::kDataR32F, 4, 3, 3), kInvalidValue);
  EXPECT_NE(lastReason().find("ld 3 is below rows 4"), std::string::npos) << lastReason();
  EXPECT_EQ(lt_->cublasLtMatrixLayoutCreate(&obj, lt::kDataR64F, 4, 3, 4), 0);
  EXPECT_EQ(lt_->cublasLtMatrixLayoutDestroy(obj), 0);
}

TEST_F(EmulatedCublasLtAbi, DestroyedAndUnknownObjectsAreRefused) {
  void* desc = nullptr;
  ASSERT_EQ(lt_->cublasLtMatmulDescCreate(&desc, lt::kCompute32F, lt::kDataR32F), 0);
  ASSERT_EQ(lt_->cublasLtMatmulDescDestroy(desc), 0);
  const int32_t op = lt::kOpN;
  EXPECT_EQ(lt_->cublasLtMatmulDescSetAttribute(desc, lt::kDescTransA, &op, sizeof(op)), kInvalidValue);
  EXPECT_NE(lastReason().find("destroyed matmul descriptor"), std::string::npos) << lastReason();
  EXPECT_EQ(lt_->cublasLtMatmulDescDestroy(desc), kInvalidValue);
  Call c = call();
  c.desc = desc;
  expectRefused(c, "destroyed matmul descriptor");
  // A layout where a descriptor belongs, a host pointer, null.
  c = call();
  c.desc = aLayout_;
  expectRefused(c, "is a matrix layout, not a matmul descriptor");
  int32_t notAnObject = 0;
  c = call();
  c.bLayout = &notAnObject;
  expectRefused(c, "is not a matrix layout");
  c = call();
  c.dLayout = nullptr;
  expectRefused(c, "Ddesc is null");
  EXPECT_EQ(lt_->cublasLtMatrixLayoutDestroy(nullptr), kInvalidValue);
  EXPECT_EQ(lt_->cublasLtMatmulPreferenceDestroy(desc_), kInvalidValue);  // the wrong kind
  // Handles: NOT_INITIALIZED.
  void* handle = nullptr;
  ASSERT_EQ(lt_->cublasLtCreate(&handle), 0);
  ASSERT_EQ(lt_->cublasLtDestroy(handle), 0);
  EXPECT_EQ(lt_->cublasLtDestroy(handle), kNotInitialized);
  c = call();
  c.handle = handle;
  expectRefused(c, "destroyed cuBLASLt handle", kNotInitialized);
  c.handle = nullptr;
  expectRefused(c, "lightHandle is null", kNotInitialized);
  CublasLtHeuristicResult result{};
  int returned = 1;
  EXPECT_EQ(lt_->cublasLtMatmulAlgoGetHeuristic(handle, desc_, aLayout_, bLayout_, cLayout_, cLayout_, pref_, 1,
                                                &result, &returned),
            kNotInitialized);
  EXPECT_EQ(returned, 0);
  expectAccepted(call());
}

// The heuristic refuses layouts that are not one GEMM, returning no algorithm.
TEST_F(EmulatedCublasLtAbi, HeuristicRefusesInconsistentProblems) {
  CublasLtHeuristicResult result{};
  int returned = 0;
  const auto heuristic = [&](void* desc, void* a, void* b, void* c, void* d, int requested = 1) {
    returned = 7;
    const CublasStatus s =
        lt_->cublasLtMatmulAlgoGetHeuristic(handle_, desc, a, b, c, d, pref_, requested, &result, &returned);
    EXPECT_EQ(returned, s == 0 ? 1 : 0);
    return s;
  };
  ASSERT_EQ(heuristic(desc_, aLayout_, bLayout_, cLayout_, cLayout_), 0);
  EXPECT_EQ(heuristic(desc_, aLayout_, bLayout_, cLayout_, cLayout_, 0), kInvalidValue);
  void *k6 = nullptr, *d64 = nullptr, *dLd = nullptr, *aBatch = nullptr;
  ASSERT_EQ(lt_->cublasLtMatrixLayoutCreate(&k6, lt::kDataR32F, 6, kN, 6), 0);
  ASSERT_EQ(lt_->cublasLtMatrixLayoutCreate(&d64, lt::kDataR64F, kM, kN, kM), 0);
  ASSERT_EQ(lt_->cublasLtMatrixLayoutCreate(&dLd, lt::kDataR32F, kM, kN, kM + 1), 0);
  ASSERT_EQ(lt_->cublasLtMatrixLayoutCreate(&aBatch, lt::kDataR32F, kM, kK, kM), 0);
  const int32_t two = 2;
  ASSERT_EQ(lt_->cublasLtMatrixLayoutSetAttribute(aBatch, lt::kLayoutBatchCount, &two, sizeof(two)), 0);
  EXPECT_EQ(heuristic(desc_, aLayout_, k6, cLayout_, cLayout_), kInvalidValue);  // k 5 vs 6
  EXPECT_NE(lastReason().find("not one GEMM"), std::string::npos) << lastReason();
  EXPECT_EQ(heuristic(desc_, aLayout_, bLayout_, d64, d64), kInvalidValue);  // f64 D for a 32F descriptor
  EXPECT_NE(lastReason().find("is not the scale type"), std::string::npos) << lastReason();
  EXPECT_EQ(heuristic(desc_, aLayout_, bLayout_, cLayout_, dLd), kInvalidValue);  // C and D differ
  EXPECT_NE(lastReason().find("C (4x3 ld 4"), std::string::npos) << lastReason();
  EXPECT_EQ(heuristic(desc_, aBatch, bLayout_, cLayout_, cLayout_), kInvalidValue);
  EXPECT_NE(lastReason().find("batch counts differ"), std::string::npos) << lastReason();
  // D's batches may not overlap (stride 0 on D).
  for (void* l : {aBatch, bLayout_, cLayout_})
    ASSERT_EQ(lt_->cublasLtMatrixLayoutSetAttribute(l, lt::kLayoutBatchCount, &two, sizeof(two)), 0);
  EXPECT_EQ(heuristic(desc_, aBatch, bLayout_, cLayout_, cLayout_), kInvalidValue);
  EXPECT_NE(lastReason().find("D's batches overlap"), std::string::npos) << lastReason();
  const int64_t stride = kM * kN;
  ASSERT_EQ(lt_->cublasLtMatrixLayoutSetAttribute(cLayout_, lt::kLayoutStridedBatchOffset, &stride, sizeof(stride)), 0);
  EXPECT_EQ(heuristic(desc_, aBatch, bLayout_, cLayout_, cLayout_), 0);  // A and B broadcast
  // A bias epilogue needs the bias pointer.
  const uint32_t bias = lt::kEpilogueBias;
  ASSERT_EQ(lt_->cublasLtMatmulDescSetAttribute(desc_, lt::kDescEpilogue, &bias, sizeof(bias)), 0);
  EXPECT_EQ(heuristic(desc_, aBatch, bLayout_, cLayout_, cLayout_), kInvalidValue);
  EXPECT_NE(lastReason().find("BIAS_POINTER is null"), std::string::npos) << lastReason();
  for (void* l : {k6, d64, dLd, aBatch}) lt_->cublasLtMatrixLayoutDestroy(l);
}

// Half operands: both of one half type, under COMPUTE_32F, with f32 C and D; nothing else.
TEST_F(EmulatedCublasLtAbi, HalfOperandCombinations) {
  CublasLtHeuristicResult result{};
  int returned = 0;
  const auto heuristic = [&](void* desc, void* a, void* b, void* d) {
    return lt_->cublasLtMatmulAlgoGetHeuristic(handle_, desc, a, b, d, d, pref_, 1, &result, &returned);
  };
  void *aBf16 = nullptr, *bBf16 = nullptr, *bF16 = nullptr, *dBf16 = nullptr, *tf32 = nullptr;
  ASSERT_EQ(lt_->cublasLtMatrixLayoutCreate(&aBf16, lt::kDataR16BF, kM, kK, kM), 0);
  ASSERT_EQ(lt_->cublasLtMatrixLayoutCreate(&bBf16, lt::kDataR16BF, kK, kN, kK), 0);
  ASSERT_EQ(lt_->cublasLtMatrixLayoutCreate(&bF16, lt::kDataR16F, kK, kN, kK), 0);
  ASSERT_EQ(lt_->cublasLtMatrixLayoutCreate(&dBf16, lt::kDataR16BF, kM, kN, kM), 0);
  ASSERT_EQ(lt_->cublasLtMatmulDescCreate(&tf32, lt::kCompute32FFastTf32, lt::kDataR32F), 0);
  EXPECT_EQ(heuristic(desc_, aBf16, bBf16, cLayout_), 0);
  EXPECT_EQ(heuristic(desc_, aBf16, bLayout_, cLayout_), kInvalidValue);  // bf16 A, f32 B
  EXPECT_NE(lastReason().find("are not an emulated combination"), std::string::npos) << lastReason();
  EXPECT_EQ(heuristic(desc_, aBf16, bF16, cLayout_), kInvalidValue);  // bf16 A, f16 B
  EXPECT_NE(lastReason().find("are not an emulated combination"), std::string::npos) << lastReason();
  EXPECT_EQ(heuristic(tf32, aBf16, bBf16, cLayout_), kInvalidValue);  // TF32 compute
  EXPECT_NE(lastReason().find("are not an emulated combination"), std::string::npos) << lastReason();
  EXPECT_EQ(heuristic(desc_, aBf16, bBf16, dBf16), kInvalidValue);  // bf16 D
  EXPECT_NE(lastReason().find("is not the scale type"), std::string::npos) << lastReason();
  for (void* l : {aBf16, bBf16, bF16, dBf16}) lt_->cublasLtMatrixLayoutDestroy(l);
  lt_->cublasLtMatmulDescDestroy(tf32);
}

// Allocations one element too small: each operand's whole extent must lie in one allocation.
TEST_F(EmulatedCublasLtAbi, OverrunningAnAllocationIsRefused) {
  const CUdeviceptr shortB = alloc((kK * kN - 1) * 4), shortD = alloc((kM * kN - 1) * 4);
  ASSERT_TRUE(shortB && shortD);
  Call c = call();
  c.b = ptr(shortB);
  expectRefused(c, "B [");
  c = call();
  c.d = ptr(shortD);
  ASSERT_EQ(run(c), kInvalidValue);
  EXPECT_NE(lastReason().find("D ["), std::string::npos) << lastReason();
  // Past the start of a right-sized allocation.
  c = call();
  c.a = ptr(a_ + 16);
  expectRefused(c, "A [");
  // With beta != 0, C is read and checked.
  const CUdeviceptr shortC = alloc((kM * kN - 1) * 4);
  const float beta = 1.0f;
  c = call();
  c.beta = &beta;
  c.c = ptr(shortC);
  expectRefused(c, "C [");
  expectAccepted(call());
}

// The runner does not check buffer sizes (validateGemm does): the emulator catches a short one and
// the runner's error carries the emulator's reason.
TEST_F(EmulatedCublasLt, RunnerErrorCarriesTheReason) {
  const GemmParams p = gemm(1, 2, 3, 4, 5, false, false, 15, 20, 12, GemmEpilogue::Bias);
  const CUdeviceptr a = alloc(spanA(p) * 4), b = alloc(spanB(p) * 4), c = alloc((spanC(p) - 1) * 4);
  const CUdeviceptr bias = alloc(4 * 4);  // n = 4
  std::string error;
  auto runner = GemmRunner::create(*lt_, handle_, p, {a, b, c, bias, workspace_, kGemmWorkspaceBytes}, &error);
  ASSERT_NE(runner, nullptr) << error;
  EXPECT_FALSE(runner->run(stream_, &error));
  EXPECT_NE(error.find("cublasLtMatmul: CUBLAS_STATUS_INVALID_VALUE ("), std::string::npos) << error;
  EXPECT_NE(error.find("D ["), std::string::npos) << error;  // cuBLASLt's D is the runner's C
  EXPECT_NE(error.find("overruns"), std::string::npos) << error;
  // A bias with n - 1 elements.
  const CUdeviceptr c2 = alloc(spanC(p) * 4), shortBias = alloc(3 * 4);
  runner = GemmRunner::create(*lt_, handle_, p, {a, b, c2, shortBias, workspace_, kGemmWorkspaceBytes}, &error);
  ASSERT_NE(runner, nullptr) << error;
  EXPECT_FALSE(runner->run(stream_, &error));
  EXPECT_NE(error.find("bias ["), std::string::npos) << error;
  runner = GemmRunner::create(*lt_, handle_, p, {a, b, c2, bias, workspace_, kGemmWorkspaceBytes}, &error);
  ASSERT_NE(runner, nullptr) << error;
  EXPECT_TRUE(runner->run(stream_, &error)) << error;
}

TEST_F(EmulatedCublasLtAbi, MisalignedPointerIsRefused) {
  // The algo was chosen for 16-byte alignment: 4 bytes off is refused, though within A's allocation.
  const CUdeviceptr bigA = alloc((kM * kK + 1) * 4);
  ASSERT_NE(bigA, 0u);
  Call c = call();
  c.a = ptr(bigA + 4);
  expectRefused(c, "not aligned to 16 bytes");
  c = call();
  c.d = ptr(alloc((kM * kN + 1) * 4) + 4);
  ASSERT_EQ(run(c), kInvalidValue);
  EXPECT_NE(lastReason().find("not aligned to 16 bytes"), std::string::npos) << lastReason();
  // Chosen for 4 bytes, the same call is accepted; 2 bytes off is not even element-aligned.
  ASSERT_NO_FATAL_FAILURE(setAlignment(4));
  ASSERT_NO_FATAL_FAILURE(chooseAlgo());
  c = call();
  c.a = ptr(bigA + 4);
  upload(bigA + 4, aValues_);
  expectAccepted(c);
  ASSERT_NO_FATAL_FAILURE(setAlignment(1));
  ASSERT_NO_FATAL_FAILURE(chooseAlgo());
  c.a = ptr(bigA + 2);
  poisonD();
  expectRefused(c, "not aligned to 4 bytes");
}

TEST_F(EmulatedCublasLtAbi, WorkspaceOutsideDeviceMemoryIsRefused) {
  std::vector<char> host(1024);
  Call c = call();
  c.workspace = host.data();
  c.workspaceBytes = host.size();
  expectRefused(c, "workspace [");
  c = call();
  c.workspaceBytes = kGemmWorkspaceBytes + 1;
  expectRefused(c, "workspace [");
  c = call();
  c.workspace = nullptr;
  c.workspaceBytes = 0;  // no workspace at all is fine: the algo needs none
  expectAccepted(c);
}

TEST_F(EmulatedCublasLtAbi, HostPointerOperandIsRefused) {
  Call c = call();
  c.a = aValues_.data();
  expectRefused(c, "A [");
  EXPECT_NE(lastReason().find("not device memory"), std::string::npos) << lastReason();
  std::vector<float> d(kM * kN);
  c = call();
  c.d = d.data();
  ASSERT_EQ(run(c), kInvalidValue);
  for (float x : d) EXPECT_EQ(x, 0.0f);
  const void* bias = bValues_.data();
  const uint32_t epilogue = lt::kEpilogueBias;
  ASSERT_EQ(lt_->cublasLtMatmulDescSetAttribute(desc_, lt::kDescBiasPointer, &bias, sizeof(bias)), 0);
  ASSERT_EQ(lt_->cublasLtMatmulDescSetAttribute(desc_, lt::kDescEpilogue, &epilogue, sizeof(epilogue)), 0);
  ASSERT_NO_FATAL_FAILURE(chooseAlgo());
  expectRefused(call(), "bias [");
  // alpha and beta are host values: a device pointer there is refused.
  const uint32_t none = lt::kEpilogueDefault;
  ASSERT_EQ(lt_->cublasLtMatmulDescSetAttribute(desc_, lt::kDescEpilogue, &none, sizeof(none)), 0);
  ASSERT_NO_FATAL_FAILURE(chooseAlgo());
  c = call();
  c.alpha = ptr(bias_);
  expectRefused(c, "alpha");
  c = call();
  c.beta = nullptr;
  expectRefused(c, "beta is null");
  expectAccepted(call());
}

TEST_F(EmulatedCublasLtAbi, AlgoOfAnotherProblemIsRefused) {
  // m = 3 instead of 4: the same buffers are large enough, only the algo is wrong.
  void *a3 = nullptr, *d3 = nullptr;
  ASSERT_EQ(lt_->cublasLtMatrixLayoutCreate(&a3, lt::kDataR32F, 3, kK, 3), 0);
  ASSERT_EQ(lt_->cublasLtMatrixLayoutCreate(&d3, lt::kDataR32F, 3, kN, 3), 0);
  Call c = call();
  c.aLayout = a3;
  c.cLayout = c.dLayout = d3;
  expectRefused(c, "algo was chosen for another problem");
  // Another epilogue, compute type or transpose than the heuristic saw.
  const uint32_t relu = lt::kEpilogueRelu;
  ASSERT_EQ(lt_->cublasLtMatmulDescSetAttribute(desc_, lt::kDescEpilogue, &relu, sizeof(relu)), 0);
  expectRefused(call(), "algo was chosen for another problem");
  const uint32_t none = lt::kEpilogueDefault;
  ASSERT_EQ(lt_->cublasLtMatmulDescSetAttribute(desc_, lt::kDescEpilogue, &none, sizeof(none)), 0);
  void* tf32 = nullptr;
  ASSERT_EQ(lt_->cublasLtMatmulDescCreate(&tf32, lt::kCompute32FFastTf32, lt::kDataR32F), 0);
  c = call();
  c.desc = tf32;
  expectRefused(c, "algo was chosen for another problem");
  // Tampered with, zeroed, or null.
  CublasLtMatmulAlgo algo = algo_;
  algo.data[1] ^= 1;
  c = call();
  c.algo = &algo;
  expectRefused(c, "algo is not one");
  algo = {};
  expectRefused(c, "algo is not one");
  c.algo = nullptr;
  expectRefused(c, "algo is null");
  // A different alignment recorded: the checksum covers it.
  algo = algo_;
  algo.data[6] = 4 | uint64_t{4} << 32;
  c.algo = &algo;
  expectRefused(c, "algo is not one");
  expectAccepted(call());
  lt_->cublasLtMatmulDescDestroy(tf32);
  lt_->cublasLtMatrixLayoutDestroy(a3);
  lt_->cublasLtMatrixLayoutDestroy(d3);
}

// D may be C (in place) but may not overlap the inputs.
TEST_F(EmulatedCublasLtAbi, DOverlappingAnInputIsRefused) {
  const CUdeviceptr shared = alloc(256 + kM * kK * 4);
  ASSERT_NE(shared, 0u);
  Call c = call();
  c.a = ptr(shared);
  c.d = ptr(shared + 16);
  ASSERT_EQ(run(c), kInvalidValue);
  EXPECT_NE(lastReason().find("overlaps A ["), std::string::npos) << lastReason();
  c = call();
  c.b = ptr(shared);
  c.d = ptr(shared + 32);
  ASSERT_EQ(run(c), kInvalidValue);
  EXPECT_NE(lastReason().find("overlaps B ["), std::string::npos) << lastReason();
  // C overlapping D, not D itself.
  const float beta = 1.0f;
  c = call();
  c.beta = &beta;
  const CUdeviceptr big = alloc(2 * kM * kN * 4);
  c.c = ptr(big + 16);
  c.d = ptr(big);
  ASSERT_EQ(run(c), kInvalidValue);
  EXPECT_NE(lastReason().find("overlaps C ["), std::string::npos) << lastReason();
  expectAccepted(call());
}

TEST_F(EmulatedCublasLtAbi, UnknownStreamFailsExecution) {
  int notAStream = 0;
  Call c = call();
  c.stream = &notAStream;
  expectRefused(c, "enqueueing on stream", kExecutionFailed);
  expectAccepted(call());
}

TEST_F(EmulatedCublasLtAbi, StatusNamesAndVersion) {
  EXPECT_STREQ(lt_->cublasLtGetStatusName(0), "CUBLAS_STATUS_SUCCESS");
  EXPECT_STREQ(lt_->cublasLtGetStatusName(kInvalidValue), "CUBLAS_STATUS_INVALID_VALUE");
  EXPECT_STREQ(lt_->cublasLtGetStatusName(kExecutionFailed), "CUBLAS_STATUS_EXECUTION_FAILED");
  EXPECT_GE(lt_->cublasLtGetVersion(), 110000u);
  EXPECT_EQ(lt_->library, "nnc cuBLASLt emulator");
  // The reason belongs to the failing status and is gone after a successful call.
  EXPECT_EQ(lt_->cublasLtMatmulDescSetAttribute(desc_, 1000, &alpha_, sizeof(alpha_)), kInvalidValue);
  const std::string described = describeCublasStatus(*lt_, kInvalidValue, "cublasLtMatmulDescSetAttribute");
  EXPECT_NE(described.find("CUBLAS_STATUS_INVALID_VALUE (an invalid"), std::string::npos) << described;
  EXPECT_NE(described.find("attribute 1000: not emulated"), std::string::npos) << described;
  EXPECT_EQ(std::string(lt_->cublasLtGetStatusString(kNotInitialized)).find("attribute"), std::string::npos);
  ASSERT_EQ(run(call()), 0);
  EXPECT_EQ(lastReason().find("attribute"), std::string::npos) << lastReason();
}

}  // namespace
}  // namespace nnc::rt::cuda
