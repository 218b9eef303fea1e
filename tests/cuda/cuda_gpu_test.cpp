// CUDA backend on a GPU: kernels compiled by NVRTC, loaded with the dlopen'd driver API, launched on
// random data and compared with the kernel-IR interpreter (and, for the corner cases, with
// constants computed independently). Skips, saying why, where there is no driver or GPU.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <limits>
#include <random>

#include "kir/interpreter.h"
#include "nnc/tensor.h"
#include "targets/cuda/codegen/cuda_emitter.h"
#include "targets/cuda/codegen/nvrtc_compiler.h"
#include "tests/cuda/cuda_device.h"
#include "tests/cuda/cuda_lowering_util.h"
#include "tests/cuda/cuda_test_kernels.h"

namespace nnc::codegen::cuda {
namespace {

// The device, opened once; nullptr (with the reason) when there is none.
CudaDevice* device(std::string* why) {
  static std::string reason;
  static std::unique_ptr<CudaDevice> dev = [] {
    auto d = CudaDevice::open(0);
    if (!d.isOk()) {
      reason = d.status().message();
      return std::unique_ptr<CudaDevice>();
    }
    return std::move(d).value();
  }();
  *why = reason;
  return dev.get();
}

#define NNC_REQUIRE_GPU(dev)           \
  std::string whyNoGpu;                \
  CudaDevice* dev = device(&whyNoGpu); \
  if (!dev) GTEST_SKIP() << "no CUDA driver/GPU: " << whyNoGpu

Tensor deepCopy(const Tensor& t) { return Tensor::fromBytes(t.dtype(), t.shape(), t.data(), t.byteSize()); }

// Runs `k` on the GPU on copies of `init`: the whole outer range in one launch, or in `pieces`
// launches over consecutive [begin, end) ranges. `misaligned`: every buffer starts one element past
// a 256-byte boundary (vectorised kernels must take their scalar path). Returns the buffers
// afterwards.
Expected<std::vector<Tensor>> runOnGpu(CudaDevice& dev, const kir::Kernel& k, const std::vector<Tensor>& init,
                                       int pieces = 1, bool misaligned = false) {
  NNC_ASSIGN_OR_RETURN(CudaSource src, emitCudaSource({k}));
  NvrtcOptions opts;
  opts.arch = "sm_" + std::to_string(dev.computeCapability());
  opts.useCache = false;
  NNC_ASSIGN_OR_RETURN(CompiledCuda compiled, compileCuda(src.code, k.name, opts));
  int module = 0;
  NNC_RETURN_IF_ERROR(dev.loadModule(compiled, src.code, &module));
  NNC_ASSIGN_OR_RETURN(void* fn, dev.function(module, k.name));
  std::vector<DevicePtr> allocations, ptrs;
  std::vector<Tensor> out;
  Status status;
  for (const Tensor& t : init) {
    const size_t shift = misaligned ? dtypeSize(t.dtype()) : 0;
    auto p = dev.alloc(t.byteSize() + shift);
    if (!p.isOk()) {
      status = p.status();
      break;
    }
    allocations.push_back(*p);
    ptrs.push_back(*p + shift);
    out.push_back(deepCopy(t));
    status = dev.copyToDevice(ptrs.back(), t.data(), t.byteSize());
    if (!status.isOk()) break;
  }
  const int64_t n = k.outer.size();
  for (int i = 0; i < pieces && status.isOk(); ++i) {
    const int64_t begin = n * i / pieces, end = n * (i + 1) / pieces;
    status = dev.launch(fn, ptrs, begin, end, launchDims(chooseMapping(k), end - begin));
  }
  if (status.isOk()) status = dev.synchronize();
  for (size_t s = 0; s < ptrs.size() && status.isOk(); ++s)
    status = dev.copyToHost(out[s].mutableData(), ptrs[s], out[s].byteSize());
  for (DevicePtr p : allocations) (void)dev.free(p);
  if (!status.isOk()) return status;
  return out;
}

bool near(double got, double want, double rel, double abs) {
  if (std::isnan(got) || std::isnan(want)) return std::isnan(got) && std::isnan(want);
  if (std::isinf(got) || std::isinf(want)) return got == want;
  return std::fabs(got - want) <= abs + rel * std::fabs(want);
}

// GPU vs interpreter on `init`: floats within rel/abs (transcendentals and summation order
// differ; rel = abs = 0 asks for bit-exact floats), integers and bools exactly. One launch, three
// launches, and with `misaligned` also one launch on buffers one element off alignment.
void expectMatchesInterpreter(CudaDevice& dev, const kir::Kernel& k, const std::vector<Tensor>& init, double rel = 1e-5,
                              double abs = 1e-6, bool misaligned = false) {
  std::vector<Tensor> want;
  for (const Tensor& t : init) want.push_back(deepCopy(t));
  std::vector<Tensor*> ptrs;
  for (Tensor& t : want) ptrs.push_back(&t);
  Status ref = kir::interpret(k, ptrs);
  ASSERT_TRUE(ref.isOk()) << k.name << ": " << ref.message();
  struct Variant {
    int pieces;
    bool misaligned;
  };
  std::vector<Variant> variants = {{1, false}, {3, false}};
  if (misaligned) variants.push_back({1, true});
  for (const Variant& variant : variants) {
    const int pieces = variant.pieces;
    auto got = runOnGpu(dev, k, init, pieces, variant.misaligned);
    ASSERT_TRUE(got.isOk()) << k.name << ": " << got.status().message();
    for (size_t s = 0; s < k.params.size(); ++s) {
      if (!k.params[s].isOutput) continue;
      for (int64_t i = 0; i < want[s].numel(); ++i) {
        if (isFloat(want[s].dtype())) {
          ASSERT_TRUE(near((*got)[s].getDouble(i), want[s].getDouble(i), rel, abs))
              << k.name << " param " << s << " element " << i << ": gpu " << (*got)[s].getDouble(i) << ", interpreter "
              << want[s].getDouble(i) << " (" << pieces << " launches" << (variant.misaligned ? ", misaligned" : "")
              << ")";
        } else {
          ASSERT_EQ((*got)[s].getInt(i), want[s].getInt(i))
              << k.name << " param " << s << " element " << i << " (" << pieces << " launches"
              << (variant.misaligned ? ", misaligned" : "") << ")";
        }
      }
    }
  }
}

// Random buffers for k's params: floats in [-3, 3], integers in [-20, 20] (or 0 where `zeroInts`,
// which keeps gather-like indices in range), outputs zeroed.
std::vector<Tensor> randomBuffers(const kir::Kernel& k, uint32_t seed, bool zeroInts = false) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> real(-3, 3);
  std::uniform_int_distribution<int> integer(-20, 20);
  std::vector<Tensor> bufs;
  for (const kir::Param& p : k.params) {
    Tensor t(p.dtype, Shape{p.numel});
    if (!p.isOutput) {
      for (int64_t i = 0; i < p.numel; ++i) {
        if (isFloat(p.dtype))
          t.setDouble(i, real(rng));
        else if (p.dtype == DType::Bool)
          t.setInt(i, rng() & 1);
        else
          t.setInt(i, zeroInts ? 0 : (isUnsignedInt(p.dtype) ? std::abs(integer(rng)) : integer(rng)));
      }
    }
    bufs.push_back(std::move(t));
  }
  return bufs;
}

TEST(CudaGpu, RepresentativeKernelsMatchTheInterpreter) {
  NNC_REQUIRE_GPU(dev);
  std::cout << "[ cuda     ] device: " << dev->name() << " (sm_" << dev->computeCapability() << ")\n";
  uint32_t seed = 1;
  for (const kir::Kernel& k : testing::representativeKernels())
    expectMatchesInterpreter(*dev, k, randomBuffers(k, seed++));
  // Bigger shapes: rows longer than a warp, many outer points, grid-stride iterations.
  for (const kir::Kernel& k :
       {testing::softmaxRows(3000, 517), testing::rowSum(70000, 3), testing::broadcastAdd(1000, 1003)})
    expectMatchesInterpreter(*dev, k, randomBuffers(k, seed++), 1e-5, 1e-6);
}

// ArgMax/ArgMin corner cases: 6 rows of 40 (more than a warp, so lanes hold competing partial
// results) with ties across lanes, all-equal rows, NaN first (wins) and later (ignored), -0 == +0.
struct ArgCase {
  kir::Kernel kernel;
  std::vector<Tensor> init;
  std::vector<std::vector<int64_t>> want;  // argmax first/last, argmin first/last, per row
};
ArgCase argCornerCases() {
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  const int rows = 6, cols = 40;
  std::vector<float> xs(rows * cols, 0.0f);
  for (int j = 0; j < cols; ++j) {
    xs[0 * cols + j] = (j == 3 || j == 35) ? 9.0f : (j == 7 || j == 38) ? -9.0f : 1.0f;
    xs[1 * cols + j] = -inf;
    xs[2 * cols + j] = (j == 0) ? nan : static_cast<float>(j);
    xs[3 * cols + j] = (j == 33) ? nan : static_cast<float>(j % 7);
    xs[4 * cols + j] = static_cast<float>((j * 13) % 40);  // a permutation: 39 at j=3, 0 at j=0
    xs[5 * cols + j] = (j % 2) ? -0.0f : 0.0f;
  }
  ArgCase c{testing::argMaxMin(rows, cols), {Tensor::fromFloats(xs, {rows, cols})}, {}};
  for (int i = 0; i < 4; ++i) c.init.emplace_back(DType::I64, Shape{rows});
  // numpy: np.argmax / np.argmin, and on the reversed row for "last".
  c.want = {{3, 0, 0, 6, 3, 0}, {35, 39, 0, 34, 3, 39}, {7, 0, 0, 0, 0, 0}, {38, 39, 0, 35, 0, 39}};
  return c;
}

// Integer corner cases: i32 div/floordiv/rem/floormod (by zero -> 0, MIN / -1 -> MIN), saturating
// f32 -> i32 (NaN -> 0), u32 shifts (amount >= 32 -> 0), as Python computes them.
struct IntCase {
  kir::Kernel kernel;
  std::vector<Tensor> init;
  std::vector<std::vector<int64_t>> want;  // per output, as the i32 stored
};
IntCase intCornerCases() {
  const int n = 8;
  const int64_t kMin = std::numeric_limits<int32_t>::min();
  const std::vector<int64_t> a = {7, -7, 7, -7, kMin, 5, 1, 3};
  const std::vector<int64_t> b = {2, 2, -2, 0, -1, 40, 31, 32};
  const std::vector<float> c = {2.9f, -2.9f, 3e10f, -3e10f, std::numeric_limits<float>::quiet_NaN(), 0.5f, -0.5f, 1e9f};
  IntCase ic{
      testing::intSemantics(n),
      {Tensor::fromInt64s(a).castTo(DType::I32), Tensor::fromInt64s(b).castTo(DType::I32), Tensor::fromFloats(c, {n})},
      {}};
  for (int i = 0; i < 7; ++i) ic.init.emplace_back(DType::I32, Shape{n});
  ic.want = {{3, -3, -3, 0, kMin, 0, 0, 0},                   // div
             {3, -4, -4, 0, kMin, 0, 0, 0},                   // floordiv
             {1, -1, 1, 0, 0, 5, 1, 3},                       // rem
             {1, 1, -1, 0, 0, 5, 1, 3},                       // floormod
             {2, -2, 2147483647, kMin, 0, 0, 0, 1000000000},  // f32 -> i32
             {28, -28, 0, -7, 0, 0, kMin, 0},                 // u32 shl, stored as i32
             {1, 1073741822, 0, -7, 0, 0, 0, 0}};             // u32 shr, stored as i32
  return ic;
}

void expectOutputs(const std::vector<Tensor>& bufs, size_t firstOutput, const std::vector<std::vector<int64_t>>& want,
                   const std::string& what) {
  for (size_t i = 0; i < want.size(); ++i)
    for (size_t j = 0; j < want[i].size(); ++j)
      EXPECT_EQ(bufs[firstOutput + i].getInt(static_cast<int64_t>(j)), want[i][j])
          << what << ": output " << i << " element " << j;
}

// Rows of 5000: ties across warps of the block, all-equal rows, NaN first (wins) and later
// (ignored), -0 == +0; and the same patterns over 5-element rows (thread-per-point), many rows.
std::vector<Tensor> argRows(int rows, int cols, uint32_t seed) {
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  std::mt19937 rng(seed);
  std::vector<float> xs(static_cast<size_t>(rows) * cols, 0.0f);
  for (int i = 0; i < rows; ++i) {
    for (int j = 0; j < cols; ++j) {
      float& x = xs[static_cast<size_t>(i) * cols + j];
      switch (i % 7) {
        // For 5000 columns and 256 threads: 3 and 4040 lie in warps 0 and 6, 7 and 4990 in 0 and 3.
        case 0: x = (j == 3 || j == cols - 960) ? 9.0f : (j == 7 || j == cols - 10) ? -9.0f : 1.0f; break;
        case 1: x = -inf; break;
        case 2: x = j == 0 ? nan : static_cast<float>(j % 11); break;
        case 3: x = j == cols / 2 ? nan : static_cast<float>(j % 7); break;
        case 4: x = static_cast<float>((j * 13) % cols); break;
        case 5: x = (j % 2) ? -0.0f : 0.0f; break;
        default: x = (rng() % 20 == 0) ? nan : static_cast<float>(rng() % 4); break;  // many ties
      }
    }
  }
  std::vector<Tensor> bufs = {Tensor::fromFloats(xs, {rows, cols})};
  return bufs;
}

// The row patterns of the block tests give the answers numpy gives (the interpreter agrees); and
// the kernels those tests pick have the mappings they are meant to cover. Runs without a GPU.
TEST(CudaGpuCases, BlockArgRowsHaveTheIntendedAnswers) {
  const int rows = 7, cols = 5000;
  std::vector<Tensor> bufs = argRows(rows, cols, 7);
  for (int i = 0; i < 4; ++i) bufs.emplace_back(DType::I64, Shape{rows});
  std::vector<Tensor*> ptrs;
  for (Tensor& t : bufs) ptrs.push_back(&t);
  const kir::Kernel k = testing::argMaxMin(rows, cols);
  ASSERT_TRUE(kir::interpret(k, ptrs).isOk());
  EXPECT_EQ(threadMapping(k), ThreadMapping::BlockPerPoint);
  // Row 0: 9 at 3 and 4040, -9 at 7 and 4990; row 1 all -inf; row 2 NaN first; row 5 all zeros.
  expectOutputs(bufs, 1, {{3, 0, 0}, {4040, 4999, 0}, {7, 0}, {4990, 4999}}, "block argmax rows");
  EXPECT_EQ(bufs[1].getInt(5), 0);
  EXPECT_EQ(bufs[2].getInt(5), 4999);
  int vectorised = 0, blocks = 0, threads = 0;
  for (const kir::Kernel& m : testing::mappingKernels()) {
    const ThreadMapping t = threadMapping(m);
    vectorised += t == ThreadMapping::ThreadPerVector;
    blocks += t == ThreadMapping::BlockPerPoint;
    threads += t == ThreadMapping::ThreadPerPoint;
  }
  EXPECT_EQ(vectorised, 11);
  EXPECT_EQ(blocks, 4);
  EXPECT_EQ(threads, 4);
}

// The expectations above hold for the interpreter (the spec) too; runs without a GPU.
TEST(CudaGpuCases, ExpectationsAgreeWithTheInterpreter) {
  auto check = [](const kir::Kernel& kernel, std::vector<Tensor> bufs, const std::vector<std::vector<int64_t>>& want,
                  size_t firstOutput) {
    std::vector<Tensor*> ptrs;
    for (Tensor& t : bufs) ptrs.push_back(&t);
    Status s = kir::interpret(kernel, ptrs);
    ASSERT_TRUE(s.isOk()) << s.message();
    expectOutputs(bufs, firstOutput, want, kernel.name);
  };
  ArgCase a = argCornerCases();
  check(a.kernel, a.init, a.want, 1);
  IntCase i = intCornerCases();
  check(i.kernel, i.init, i.want, 3);
}

TEST(CudaGpu, ArgMaxTiesAndNaNFollowTheInterpreter) {
  NNC_REQUIRE_GPU(dev);
  ArgCase c = argCornerCases();
  auto got = runOnGpu(*dev, c.kernel, c.init);
  ASSERT_TRUE(got.isOk()) << got.status().message();
  expectOutputs(*got, 1, c.want, "argmax/argmin");
  expectMatchesInterpreter(*dev, c.kernel, c.init);
}

TEST(CudaGpu, IntegerAndConversionCornerCases) {
  NNC_REQUIRE_GPU(dev);
  IntCase c = intCornerCases();
  auto got = runOnGpu(*dev, c.kernel, c.init);
  ASSERT_TRUE(got.isOk()) << got.status().message();
  expectOutputs(*got, 3, c.want, "int semantics");
  expectMatchesInterpreter(*dev, c.kernel, c.init);
}

// --- the vectorised, block and thread-per-point mappings (testing::mappingKernels)

// Each vectorised kernel on aligned buffers (vector path), in 3 launches whose bounds are not
// multiples of the width, and on buffers one element off alignment (both scalar fallback).
TEST(CudaGpu, VectorisedKernelsMatchTheInterpreterAlignedAndMisaligned) {
  NNC_REQUIRE_GPU(dev);
  uint32_t seed = 100;
  int checked = 0;
  for (const kir::Kernel& k : testing::mappingKernels()) {
    if (threadMapping(k) != ThreadMapping::ThreadPerVector) continue;
    SCOPED_TRACE(k.name);
    expectMatchesInterpreter(*dev, k, randomBuffers(k, seed++), 0, 0, /*misaligned=*/true);
    ++checked;
  }
  EXPECT_GE(checked, 10);
}

TEST(CudaGpu, BlockAndThreadReductionsMatchTheInterpreter) {
  NNC_REQUIRE_GPU(dev);
  uint32_t seed = 200;
  for (const kir::Kernel& k : testing::mappingKernels()) {
    const ThreadMapping m = threadMapping(k);
    if (m != ThreadMapping::BlockPerPoint && m != ThreadMapping::ThreadPerPoint) continue;
    SCOPED_TRACE(k.name);
    // A thread-per-point reduction folds in the interpreter's order: sums are bit-exact there. Blocks
    // sum in another order: float rounding differs.
    const bool exact = m == ThreadMapping::ThreadPerPoint && k.name.find("softmax") == std::string::npos;
    expectMatchesInterpreter(*dev, k, randomBuffers(k, seed++), exact ? 0 : 1e-4, exact ? 0 : 1e-3);
  }
}

TEST(CudaGpu, ArgMaxTiesAndNaNFollowTheInterpreterInBlocksAndThreads) {
  NNC_REQUIRE_GPU(dev);
  for (auto [rows, cols] : {std::pair{7, 5000}, std::pair{7 * 700, 5}}) {
    const kir::Kernel k = testing::argMaxMin(rows, cols);
    EXPECT_EQ(threadMapping(k), cols > 32 ? ThreadMapping::BlockPerPoint : ThreadMapping::ThreadPerPoint);
    std::vector<Tensor> init = argRows(rows, cols, 7);
    for (int i = 0; i < 4; ++i) init.emplace_back(DType::I64, Shape{rows});
    expectMatchesInterpreter(*dev, k, init);
  }
  // Max/Min propagate NaN, sums too, in blocks and in threads.
  for (auto [rows, cols] : {std::pair{7, 6000}, std::pair{7 * 600, 8}}) {
    const kir::Kernel k = testing::rowMaxMinSum(rows, cols);
    std::vector<Tensor> init = argRows(rows, cols, 9);
    for (int i = 0; i < 3; ++i) init.emplace_back(DType::F32, Shape{rows});
    expectMatchesInterpreter(*dev, k, init, 1e-4, 1e-3);
  }
}

TEST(CudaGpu, RealModelKernelsMatchTheInterpreter) {
  NNC_REQUIRE_GPU(dev);
  const std::string root = std::string(NNC_BINARY_DIR) + "/models";
  const auto models = testing::realModels(root);
  if (models.empty()) GTEST_SKIP() << "no real models in " << root << " (tests/models/make_models.py)";
  // The ThreadSanitizer tier wants only the kernels whose threads cooperate (warps and blocks): the
  // others run one thread at a time on the emulator, so there is nothing to race. Of those, the ones
  // with at most 1024 outer points: a kernel's code does not depend on its point count, and TSan
  // makes every shuffle of a warp-per-point kernel cost OS-thread wake-ups.
  const char* only = std::getenv("NNC_TEST_COOPERATIVE_KERNELS_ONLY");
  const bool cooperativeOnly = only && std::string(only) == "1";
  int checked = 0;
  for (const auto& dir : models) {
    auto kernels = testing::lowerModelKernels(dir);
    ASSERT_TRUE(kernels.isOk()) << dir << ": " << kernels.status().message();
    for (const kir::Kernel& k : *kernels) {
      if (k.outer.size() * std::max<int64_t>(1, k.inner.size()) > (int64_t{1} << 22)) continue;  // interpreter speed
      const ThreadMapping m = threadMapping(k);
      if (cooperativeOnly &&
          ((m != ThreadMapping::WarpPerPoint && m != ThreadMapping::BlockPerPoint) || k.outer.size() > 1024))
        continue;
      SCOPED_TRACE(dir.filename().string() + "/" + k.name);
      expectMatchesInterpreter(*dev, k, randomBuffers(k, static_cast<uint32_t>(checked) + 7, /*zeroInts=*/true), 1e-4,
                               1e-5);
      ++checked;
    }
  }
  std::cout << "[ cuda     ] " << checked << " real-model kernels matched the interpreter on \"" << dev->name()
            << "\"\n";
  EXPECT_GT(checked, 0);
}

TEST(CudaGpu, OpenWithoutADeviceExplainsWhy) {
  // Device 1000 never exists; the error must say so (or that the driver is missing).
  auto d = CudaDevice::open(1000);
  ASSERT_FALSE(d.isOk());
  const std::string& msg = d.status().message();
  EXPECT_TRUE(msg.find("no CUDA device 1000") != std::string::npos || msg.find("libcuda.so.1") != std::string::npos ||
              msg.find("cuInit") != std::string::npos)
      << msg;
}

}  // namespace
}  // namespace nnc::codegen::cuda
