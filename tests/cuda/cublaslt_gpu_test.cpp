// The cuBLASLt wrapper (runtime/cuda/cublaslt.h) on a GPU: GEMMs of odd sizes, batches (broadcast,
// folded, padded), transposes, every epilogue, f32/f64/TF32 and pointers off alignment against a
// float64 reference, exact fp32, a CUDA graph capture and a huge k. Skips, saying why, without a GPU.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "runtime/cuda/cublaslt.h"
#include "runtime/cuda/cuda_driver.h"
#include "runtime/cuda/cuda_executor.h"
#include "tests/cuda/cublaslt_test_util.h"

namespace nnc::rt::cuda {
namespace {

using namespace testing;  // NOLINT: the shared GEMM cases

// The device, a context, a stream, a cuBLASLt handle and the executor's workspace, set up once and
// kept for the process (null with the reason when there is no GPU).
struct Gpu {
  const DriverApi* drv = nullptr;
  const CublasLtApi* lt = nullptr;
  CUcontext ctx = nullptr;
  CUstream stream = nullptr;
  void* handle = nullptr;
  CUdeviceptr workspace = 0;
};

Gpu* gpu(std::string* why) {
  static std::string reason;
  static Gpu* instance = []() -> Gpu* {
    if (!cudaDeviceAvailable(&reason)) return nullptr;
    auto g = std::make_unique<Gpu>();
    g->drv = openDriver(&reason);
    g->lt = openCublasLt(&reason);
    if (!g->drv || !g->lt) return nullptr;
    CUdevice dev = 0;
    CUresult r = g->drv->cuDeviceGet(&dev, 0);
    if (r == kCudaSuccess) r = g->drv->cuDevicePrimaryCtxRetain(&g->ctx, dev);
    if (r == kCudaSuccess) r = g->drv->cuCtxPushCurrent(g->ctx);
    if (r != kCudaSuccess) {
      reason = describeError(*g->drv, r, "context");
      return nullptr;
    }
    r = g->drv->cuStreamCreate(&g->stream, kStreamNonBlocking);
    if (r == kCudaSuccess) r = g->drv->cuMemAlloc(&g->workspace, kGemmWorkspaceBytes);
    bool ok = r == kCudaSuccess;
    if (!ok) reason = describeError(*g->drv, r, "stream/workspace");
    ok = ok && createLtHandle(*g->lt, &g->handle, &reason);
    CUcontext popped = nullptr;
    g->drv->cuCtxPopCurrent(&popped);
    return ok ? g.release() : nullptr;
  }();
  *why = reason;
  return instance;
}

// Makes the test's context current for the test's scope.
class ContextScope {
 public:
  explicit ContextScope(const Gpu& g) : g_(g) { g_.drv->cuCtxPushCurrent(g_.ctx); }
  ~ContextScope() {
    CUcontext popped = nullptr;
    g_.drv->cuCtxPopCurrent(&popped);
  }

 private:
  const Gpu& g_;
};

#define NNC_REQUIRE_GPU(g)                             \
  std::string whyNoGpu;                                \
  Gpu* g = gpu(&whyNoGpu);                             \
  if (!g) GTEST_SKIP() << kNoDevicePrefix << whyNoGpu; \
  ContextScope contextScope(*g)

#define NNC_ASSERT_CU(g, call)                                                   \
  do {                                                                           \
    const CUresult result_ = (call);                                             \
    ASSERT_EQ(result_, kCudaSuccess) << describeError(*(g).drv, result_, #call); \
  } while (0)

// A device allocation freed on scope exit.
class DeviceBuffer {
 public:
  DeviceBuffer(const Gpu& g, size_t bytes) : g_(g) {
    if (g_.drv->cuMemAlloc(&ptr_, bytes) != kCudaSuccess) ptr_ = 0;
  }
  ~DeviceBuffer() {
    if (ptr_) g_.drv->cuMemFree(ptr_);
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  CUdeviceptr get() const { return ptr_; }

 private:
  const Gpu& g_;
  CUdeviceptr ptr_ = 0;
};

template <class T>
std::vector<T> toType(const std::vector<double>& v) {
  return std::vector<T>(v.begin(), v.end());
}
template <class T>
std::vector<double> toDouble(const std::vector<T>& v) {
  return std::vector<double>(v.begin(), v.end());
}

// How far a GPU result may be from the float64 reference: abs + rel * sum |a||b|.
struct Tolerance {
  double abs, rel;
};
Tolerance toleranceFor(const GemmParams& p) {
  if (p.dtype == 11) return {1e-12, 1e-12};
  if (p.allowTf32) return {1e-5, 3e-3};  // inputs rounded to 10 mantissa bits
  return {1e-5, 1e-5};
}

// The buffers of one GEMM on the device, each pointer `offset` elements past cuMemAlloc's 256-byte
// alignment, C with a NaN-poisoned guard after it.
template <class T>
struct GemmDeviceData {
  static constexpr size_t kGuard = 16;
  GemmDeviceData(const Gpu& g, const GemmParams& p, size_t offset)
      : a(g, (spanA(p) + offset) * sizeof(T)),
        b(g, (spanB(p) + offset) * sizeof(T)),
        c(g, (spanC(p) + kGuard + offset) * sizeof(T)),
        bias(g, (static_cast<size_t>(p.n) + offset) * sizeof(T)),
        offsetBytes(offset * sizeof(T)) {}
  bool allocated() const { return a.get() && b.get() && c.get() && bias.get(); }
  GemmBuffers buffers(const GemmParams& p, size_t workspaceBytes, CUdeviceptr workspace) const {
    return {a.get() + offsetBytes,          b.get() + offsetBytes,
            c.get() + offsetBytes,          p.hasBias() ? bias.get() + offsetBytes : 0,
            workspaceBytes ? workspace : 0, workspaceBytes};
  }
  DeviceBuffer a, b, c, bias;
  size_t offsetBytes;
};

// Uploads A, B, bias and a NaN-poisoned C, runs `runner` (or `launch` instead, e.g. a graph), and
// checks every element of C against the float64 reference and that nothing outside C was written.
template <class T>
void runAndCheck(const Gpu& g, const GemmParams& p, const GemmDeviceData<T>& data, const GemmRunner& runner,
                 std::mt19937& rng, const std::function<bool(std::string*)>& launch = nullptr) {
  const std::vector<T> a = toType<T>(randomValues(spanA(p), rng)), b = toType<T>(randomValues(spanB(p), rng));
  const std::vector<T> bias = toType<T>(randomValues(static_cast<size_t>(p.n), rng));
  std::vector<double> want, scale;
  referenceGemm(p, toDouble(a), toDouble(b), toDouble(bias), &want, &scale);
  std::vector<T> c(spanC(p) + GemmDeviceData<T>::kGuard, std::numeric_limits<T>::quiet_NaN());
  const GemmBuffers buf = data.buffers(p, 0, 0);
  NNC_ASSERT_CU(g, g.drv->cuMemcpyHtoDAsync(buf.a, a.data(), a.size() * sizeof(T), g.stream));
  NNC_ASSERT_CU(g, g.drv->cuMemcpyHtoDAsync(buf.b, b.data(), b.size() * sizeof(T), g.stream));
  NNC_ASSERT_CU(g, g.drv->cuMemcpyHtoDAsync(buf.c, c.data(), c.size() * sizeof(T), g.stream));
  if (p.hasBias()) NNC_ASSERT_CU(g, g.drv->cuMemcpyHtoDAsync(buf.bias, bias.data(), bias.size() * sizeof(T), g.stream));
  std::string error;
  ASSERT_TRUE(launch ? launch(&error) : runner.run(g.stream, &error)) << error;
  NNC_ASSERT_CU(g, g.drv->cuMemcpyDtoHAsync(c.data(), buf.c, c.size() * sizeof(T), g.stream));
  NNC_ASSERT_CU(g, g.drv->cuStreamSynchronize(g.stream));
  const Tolerance tol = toleranceFor(p);
  for (size_t i = 0; i < c.size(); ++i) {
    if (i >= want.size() || std::isnan(want[i])) {
      ASSERT_TRUE(std::isnan(c[i])) << "element " << i << " outside C was written: " << c[i];
      continue;
    }
    const double err = std::fabs(static_cast<double>(c[i]) - want[i]);
    ASSERT_TRUE(err <= tol.abs + tol.rel * scale[i])  // false for NaN: every element must be written
        << "element " << i << ": gpu " << c[i] << ", reference " << want[i] << " (error " << err << ")";
  }
}

template <class T>
void expectGemmMatches(const Gpu& g, const GemmParams& p, uint32_t seed, size_t offset = 0,
                       size_t workspaceBytes = kGemmWorkspaceBytes) {
  SCOPED_TRACE(describeGemm(p) + (offset ? " offset " + std::to_string(offset) : std::string()) + " workspace " +
               std::to_string(workspaceBytes));
  GemmDeviceData<T> data(g, p, offset);
  ASSERT_TRUE(data.allocated());
  std::string error;
  std::unique_ptr<GemmRunner> runner =
      GemmRunner::create(*g.lt, g.handle, p, data.buffers(p, workspaceBytes, g.workspace), &error);
  ASSERT_NE(runner, nullptr) << error;
  EXPECT_LE(runner->algorithmWorkspaceBytes(), workspaceBytes);
  std::mt19937 rng(seed);
  runAndCheck<T>(g, p, data, *runner, rng);
}

void expectGemmMatchesAnyType(const Gpu& g, const GemmParams& p, uint32_t seed, size_t offset = 0) {
  if (p.dtype == 11)
    expectGemmMatches<double>(g, p, seed, offset);
  else
    expectGemmMatches<float>(g, p, seed, offset);
}

// The shared odd-size grid (oddSizeCases): odd sizes, every transpose and epilogue, some pointers one
// element off alignment.
void runSizeGrid(const Gpu& g, int32_t dtype, bool tf32) {
  for (const OddSizeCase& c : oddSizeCases(dtype, tf32)) {
    expectGemmMatchesAnyType(g, c.params, c.seed, c.offset);
    if (::testing::Test::HasFailure()) return;
  }
}

TEST(CublasLtGpu, F32OddSizes) {
  NNC_REQUIRE_GPU(g);
  runSizeGrid(*g, 1, false);
}

TEST(CublasLtGpu, F64OddSizes) {
  NNC_REQUIRE_GPU(g);
  runSizeGrid(*g, 11, false);
}

TEST(CublasLtGpu, F32Tf32OddSizes) {
  NNC_REQUIRE_GPU(g);
  runSizeGrid(*g, 1, true);
}

TEST(CublasLtGpu, Batched) {
  NNC_REQUIRE_GPU(g);
  const int64_t sizes[][3] = {{1, 1, 1}, {7, 33, 129}, {33, 7, 1}, {129, 129, 33}, {1, 33, 7}};
  uint32_t index = 0;
  int folded = 0;
  for (int32_t dtype : {1, 11})
    for (const auto& s : sizes)
      for (int t = 0; t < 4; ++t)
        for (GemmEpilogue e : kEpilogues) {
          if (dtype == 11 && static_cast<int>(e) != t) continue;  // f64: each epilogue once per transpose
          for (const GemmParams& p : batchedCases(dtype, s[0], s[1], s[2], t & 1, t & 2, e)) {
            LtGemmShape shape;
            std::string error;
            ASSERT_TRUE(ltGemmShape(p, &shape, &error)) << error;
            folded += shape.folded;
            ++index;
            expectGemmMatchesAnyType(*g, p, index, index % 4 == 0 ? 1 : 0);
            if (HasFailure()) return;
          }
        }
  EXPECT_GT(folded, 0);
}

// CUBLAS_COMPUTE_32F must not round inputs to TF32: A times the identity is A, bit for bit.
TEST(CublasLtGpu, F32IsExactFp32) {
  NNC_REQUIRE_GPU(g);
  const GemmParams p = gemm(1, 1, 256, 128, 128, false, false, 0, 0, 0, GemmEpilogue::None);
  GemmDeviceData<float> data(*g, p, 0);
  ASSERT_TRUE(data.allocated());
  std::mt19937 rng(3);
  std::vector<float> a = toType<float>(randomValues(spanA(p), rng));
  for (float& x : a) x = std::nextafter(x, 2.0f);  // low mantissa bits set that TF32 would drop
  std::vector<float> identity(spanB(p), 0.0f);
  for (int64_t i = 0; i < p.k; ++i) identity[static_cast<size_t>(i * p.n + i)] = 1.0f;
  std::string error;
  auto runner = GemmRunner::create(*g->lt, g->handle, p, data.buffers(p, kGemmWorkspaceBytes, g->workspace), &error);
  ASSERT_NE(runner, nullptr) << error;
  const GemmBuffers buf = data.buffers(p, 0, 0);
  NNC_ASSERT_CU(*g, g->drv->cuMemcpyHtoDAsync(buf.a, a.data(), a.size() * sizeof(float), g->stream));
  NNC_ASSERT_CU(*g, g->drv->cuMemcpyHtoDAsync(buf.b, identity.data(), identity.size() * sizeof(float), g->stream));
  ASSERT_TRUE(runner->run(g->stream, &error)) << error;
  std::vector<float> c(spanC(p));
  NNC_ASSERT_CU(*g, g->drv->cuMemcpyDtoHAsync(c.data(), buf.c, c.size() * sizeof(float), g->stream));
  NNC_ASSERT_CU(*g, g->drv->cuStreamSynchronize(g->stream));
  for (size_t i = 0; i < c.size(); ++i) ASSERT_EQ(c[i], a[i]) << "element " << i;
}

// Captures the runner's GEMM into a CUDA graph on its first use and replays it twice, with new inputs
// each time (the graph reads the buffers when replayed).
template <class T>
void expectGraphReplayMatches(const Gpu& g, const GemmParams& p) {
  SCOPED_TRACE(describeGemm(p));
  GemmDeviceData<T> data(g, p, 0);
  ASSERT_TRUE(data.allocated());
  std::string error;
  auto runner = GemmRunner::create(*g.lt, g.handle, p, data.buffers(p, kGemmWorkspaceBytes, g.workspace), &error);
  ASSERT_NE(runner, nullptr) << error;
  CUgraph graph = nullptr;
  CUgraphExec exec = nullptr;
  NNC_ASSERT_CU(g, g.drv->cuStreamBeginCapture(g.stream, kStreamCaptureModeThreadLocal));
  const bool enqueued = runner->run(g.stream, &error);
  const CUresult ended = g.drv->cuStreamEndCapture(g.stream, &graph);
  const CUresult instantiated = ended == kCudaSuccess ? g.drv->cuGraphInstantiateWithFlags(&exec, graph, 0) : ended;
  if (graph) g.drv->cuGraphDestroy(graph);  // the executable graph does not need it
  ASSERT_TRUE(enqueued) << error;
  NNC_ASSERT_CU(g, ended);
  NNC_ASSERT_CU(g, instantiated);
  const auto replay = [&](std::string* why) {
    const CUresult r = g.drv->cuGraphLaunch(exec, g.stream);
    if (r != kCudaSuccess) *why = describeError(*g.drv, r, "cuGraphLaunch");
    return r == kCudaSuccess;
  };
  std::mt19937 rng(11);
  for (int i = 0; i < 2 && !::testing::Test::HasFailure(); ++i) runAndCheck<T>(g, p, data, *runner, rng, replay);
  g.drv->cuGraphExecDestroy(exec);
}

// The executor captures GEMM steps into CUDA graphs on their first run and replays them.
TEST(CublasLtGpu, CapturedIntoAGraphAndReplayed) {
  NNC_REQUIRE_GPU(g);
  if (!g->drv->hasGraphs()) GTEST_SKIP() << "the driver lacks the CUDA graph API";
  expectGraphReplayMatches<float>(*g, gemm(1, 1, 65, 33, 129, false, true, 0, 0, 0, GemmEpilogue::BiasRelu));
  expectGraphReplayMatches<float>(*g, gemm(1, 3, 7, 33, 129, false, false, 7 * 129, 0, 7 * 33, GemmEpilogue::Bias));
  expectGraphReplayMatches<double>(*g, gemm(11, 3, 33, 7, 5, true, false, 0, 35, 7 * 33, GemmEpilogue::Relu));
}

// A long reduction whose fastest algorithms split k and want workspace: with the executor's 32 MiB,
// and with none, the runner either works or says clearly that it cannot.
TEST(CublasLtGpu, HugeKWithinTheWorkspace) {
  NNC_REQUIRE_GPU(g);
  const GemmParams p = gemm(1, 1, 8, 8, int64_t(1) << 21, false, false, 0, 0, 0, GemmEpilogue::Bias);
  for (size_t workspaceBytes : {kGemmWorkspaceBytes, size_t{0}}) {
    SCOPED_TRACE("workspace " + std::to_string(workspaceBytes));
    GemmDeviceData<float> data(*g, p, 0);
    ASSERT_TRUE(data.allocated());
    std::string error;
    auto runner = GemmRunner::create(*g->lt, g->handle, p, data.buffers(p, workspaceBytes, g->workspace), &error);
    if (!runner) {
      EXPECT_EQ(error.rfind("cuBLASLt has no algorithm for " + describeGemm(p) + " (", 0), 0u) << error;
      continue;
    }
    EXPECT_LE(runner->algorithmWorkspaceBytes(), workspaceBytes);
    std::mt19937 rng(5);
    runAndCheck<float>(*g, p, data, *runner, rng);
  }
}

}  // namespace
}  // namespace nnc::rt::cuda
