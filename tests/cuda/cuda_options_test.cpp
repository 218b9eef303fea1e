// nnc_options of a cuda model: values are checked before any device is touched (so the errors are
// the same on every machine), device buffers run like host buffers and are themselves checked, and
// cuda_graphs overrides the environment. The GPU parts skip with the driver's reason where there is
// no GPU.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <random>

#include "driver/compiler.h"
#include "ir/builder.h"
#include "runtime/cuda/cuda_driver.h"
#include "runtime/cuda/cuda_executor.h"
#include "tests/cuda/test_kernel_cache.h"
#include "tests/driver/driver_test_util.h"

namespace nnc::testing {
namespace {

// y = softmax(x @ w + b): a GEMM with its bias, and a row-reduction kernel.
std::unique_ptr<Graph> denseSoftmax() {
  auto g = std::make_unique<Graph>();
  GraphBuilder b(*g);
  std::mt19937 rng(11);
  Value* x = b.input("x", DType::F32, Shape{16, 32});
  Value* mm = b.matmul(x, b.constant(randomTensor(DType::F32, Shape{32, 24}, rng), "w"));
  Value* y = b.add(mm, b.constant(randomTensor(DType::F32, Shape{24}, rng), "b"));
  b.output(b.op(OpKind::Softmax, {y}, {}, "softmax"));
  EXPECT_TRUE(b.status().isOk()) << b.status().message();
  return g;
}

CompileOptions cuda() {
  useTestKernelCache();
  CompileOptions o;
  o.target = "cuda";
  return o;
}

class CudaOptions : public ::testing::Test {
 protected:
  void SetUp() override {
    so_ = dir_.path() + "/dense.so";
    auto g = denseSoftmax();
    Status s = compileToSharedLibrary(*g, cuda(), so_);
    ASSERT_TRUE(s.isOk()) << s.message();
    std::string error;
    ASSERT_TRUE(openModelLibrary(so_, &api_, &error)) << error;
  }
  nnc_status create(nnc_model** m, nnc_options opts) { return api_.create(m, &opts); }

  ScratchDir dir_;
  std::string so_;
  ModelApi api_;
};

TEST_F(CudaOptions, InvalidValuesAreRefusedBeforeTheDevice) {
  nnc_model* m = nullptr;
  EXPECT_EQ(create(&m, {sizeof(nnc_options), 0, 0, 2, 0}), NNC_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(std::string(api_.lastError()), "nnc_model_create: nnc_options.device_buffers is 2, expected 0 or 1");
  EXPECT_EQ(create(&m, {sizeof(nnc_options), 0, 0, 0, 3}), NNC_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(std::string(api_.lastError()),
            "nnc_model_create: nnc_options.cuda_graphs is 3, expected an nnc_cuda_graphs value (0, 1 or 2)");
  EXPECT_EQ(create(&m, {sizeof(nnc_options), 0, 0, 0, -1}), NNC_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(m, nullptr);
  // Valid options: created where there is a GPU, refused for that reason where there is none.
  std::string why;
  const nnc_status st = create(&m, {sizeof(nnc_options), 0, 0, 1, NNC_CUDA_GRAPHS_OFF});
  if (rt::cuda::cudaDeviceAvailable(&why)) {
    ASSERT_EQ(st, NNC_OK) << api_.lastError();
    api_.destroy(m);
  } else {
    EXPECT_EQ(st, NNC_ERROR_NO_DEVICE);
    EXPECT_EQ(std::string(api_.lastError()), "no CUDA driver/GPU: " + why);
  }
}

// --- On a GPU ---------------------------------------------------------------------------------------

// The driver with the primary context of device 0 current for the scope; device allocations.
class Device {
 public:
  explicit Device(std::string* why) {
    if (!rt::cuda::cudaDeviceAvailable(why)) return;
    api_ = rt::cuda::openDriver(why);
    if (!api_ || api_->cuDeviceGet(&dev_, 0) != rt::cuda::kCudaSuccess ||
        api_->cuDevicePrimaryCtxRetain(&ctx_, dev_) != rt::cuda::kCudaSuccess ||
        api_->cuCtxPushCurrent(ctx_) != rt::cuda::kCudaSuccess) {
      *why = "cannot make device 0's context current";
      api_ = nullptr;
    }
  }
  ~Device() {
    if (!api_) return;
    for (rt::cuda::CUdeviceptr p : allocations_) api_->cuMemFree(p);
    rt::cuda::CUcontext popped = nullptr;
    api_->cuCtxPopCurrent(&popped);
    api_->cuDevicePrimaryCtxRelease(dev_);
  }
  bool ok() const { return api_ != nullptr; }
  rt::cuda::CUdeviceptr alloc(size_t bytes) {
    rt::cuda::CUdeviceptr p = 0;
    if (api_->cuMemAlloc(&p, bytes) != rt::cuda::kCudaSuccess) return 0;
    allocations_.push_back(p);
    return p;
  }
  bool toDevice(rt::cuda::CUdeviceptr dst, const Tensor& t) {
    return api_->cuMemcpyHtoDAsync(dst, t.data(), t.byteSize(), nullptr) == rt::cuda::kCudaSuccess &&
           api_->cuStreamSynchronize(nullptr) == rt::cuda::kCudaSuccess;
  }
  bool toHost(Tensor& t, rt::cuda::CUdeviceptr src) {
    return api_->cuMemcpyDtoHAsync(t.mutableData(), src, t.byteSize(), nullptr) == rt::cuda::kCudaSuccess &&
           api_->cuStreamSynchronize(nullptr) == rt::cuda::kCudaSuccess;
  }

 private:
  const rt::cuda::DriverApi* api_ = nullptr;
  rt::cuda::CUdevice dev_ = 0;
  rt::cuda::CUcontext ctx_ = nullptr;
  std::vector<rt::cuda::CUdeviceptr> allocations_;
};

void* asPointer(rt::cuda::CUdeviceptr p) { return reinterpret_cast<void*>(static_cast<uintptr_t>(p)); }

TEST_F(CudaOptions, DeviceBuffersRunLikeHostBuffersAndAreChecked) {
  std::string why;
  Device device(&why);
  if (!device.ok()) GTEST_SKIP() << "no CUDA driver/GPU: " << why;
  nnc_model *host = nullptr, *dev = nullptr;
  ASSERT_EQ(create(&host, {sizeof(nnc_options), 0, 0, 0, 0}), NNC_OK) << api_.lastError();
  ASSERT_EQ(create(&dev, {sizeof(nnc_options), 0, 0, 1, 0}), NNC_OK) << api_.lastError();
  std::mt19937 rng(3);
  for (int run = 0; run < 3; ++run) {  // new inputs each run: the captured graph stays right
    const Tensor x = randomTensor(DType::F32, Shape{16, 32}, rng);
    auto want = runThroughAbi(api_, host, {x});
    ASSERT_TRUE(want.isOk()) << want.status().message();
    const rt::cuda::CUdeviceptr dx = device.alloc(x.byteSize()), dy = device.alloc(16 * 24 * 4);
    ASSERT_TRUE(dx && dy && device.toDevice(dx, x));
    const int64_t xShape[] = {16, 32}, yShape[] = {16, 24};
    nnc_tensor in{asPointer(dx), x.byteSize(), NNC_DTYPE_F32, 2, xShape};
    nnc_tensor out{asPointer(dy), 16 * 24 * 4, NNC_DTYPE_F32, 2, yShape};
    ASSERT_EQ(api_.run(dev, &in, 1, &out, 1), NNC_OK) << api_.modelLastError(dev);
    Tensor y(DType::F32, Shape{16, 24});
    ASSERT_TRUE(device.toHost(y, dy));
    expectNear(y, (*want)[0], 0, 0, "device buffers, run " + std::to_string(run));  // the same kernels: equal bits
  }
  // A host pointer, a too-small allocation, and an offset that runs past the end are refused.
  const Tensor x = randomTensor(DType::F32, Shape{16, 32}, rng);
  const int64_t xShape[] = {16, 32}, yShape[] = {16, 24};
  const rt::cuda::CUdeviceptr dy = device.alloc(16 * 24 * 4), small = device.alloc(64);
  nnc_tensor hostIn{const_cast<std::byte*>(x.data()), x.byteSize(), NNC_DTYPE_F32, 2, xShape};
  nnc_tensor out{asPointer(dy), 16 * 24 * 4, NNC_DTYPE_F32, 2, yShape};
  EXPECT_EQ(api_.run(dev, &hostIn, 1, &out, 1), NNC_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(std::string(api_.modelLastError(dev)),
            "input 0 ('x'): nnc_options.device_buffers is set, but the data pointer is not CUDA device memory");
  nnc_tensor smallIn{asPointer(small), x.byteSize(), NNC_DTYPE_F32, 2, xShape};
  EXPECT_EQ(api_.run(dev, &smallIn, 1, &out, 1), NNC_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(std::string(api_.modelLastError(dev)),
            "input 0 ('x'): nnc_options.device_buffers is set, but the data pointer points into an allocation with "
            "fewer than 2048 bytes left");
  const rt::cuda::CUdeviceptr dx = device.alloc(x.byteSize());
  ASSERT_TRUE(dx && device.toDevice(dx, x));
  nnc_tensor in{asPointer(dx), x.byteSize(), NNC_DTYPE_F32, 2, xShape};
  nnc_tensor late{asPointer(dy + 64), 16 * 24 * 4, NNC_DTYPE_F32, 2, yShape};
  EXPECT_EQ(api_.run(dev, &in, 1, &late, 1), NNC_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(api_.modelLastError(dev)).find("output 0 ('softmax_out0')"), std::string::npos)
      << api_.modelLastError(dev);
  EXPECT_EQ(api_.run(dev, &in, 1, &out, 1), NNC_OK) << "the handle stays usable";
  api_.destroy(host);
  api_.destroy(dev);
}

TEST(CudaOptionsJit, CudaGraphsOptionOverridesTheEnvironment) {
  std::string why;
  if (!rt::cuda::cudaDeviceAvailable(&why)) GTEST_SKIP() << "no CUDA driver/GPU: " << why;
  auto g = denseSoftmax();
  CompileOptions off = cuda();
  off.cudaGraphs = NNC_CUDA_GRAPHS_OFF;
  auto model = compileJit(*g, off);
  ASSERT_TRUE(model.isOk()) << model.status().message();
  std::mt19937 rng(1);
  ASSERT_TRUE((*model)->run({randomTensor(DType::F32, Shape{16, 32}, rng)}).isOk());
  rt::cuda::CudaRunStats stats;
  ASSERT_TRUE(rt::cuda::cudaRunStats((*model)->handle(), &stats));
  EXPECT_FALSE(stats.graphsEnabled);
  EXPECT_EQ(stats.graphsOffReason, "nnc_options.cuda_graphs is off");
  EXPECT_EQ(stats.graphLaunches, 0);

  setenv("NNC_CUDA_GRAPHS", "0", 1);
  auto g2 = denseSoftmax();
  CompileOptions on = cuda();
  on.cudaGraphs = NNC_CUDA_GRAPHS_ON;
  auto forced = compileJit(*g2, on);
  unsetenv("NNC_CUDA_GRAPHS");
  ASSERT_TRUE(forced.isOk()) << forced.status().message();
  for (int i = 0; i < 2; ++i) ASSERT_TRUE((*forced)->run({randomTensor(DType::F32, Shape{16, 32}, rng)}).isOk());
  ASSERT_TRUE(rt::cuda::cudaRunStats((*forced)->handle(), &stats));
  EXPECT_TRUE(stats.graphsEnabled) << stats.graphsOffReason;
  EXPECT_EQ(stats.captures, 1);
  EXPECT_EQ(stats.graphLaunches, 2);
}

// A model too large for the GPU (a 1 TiB intermediate): creation fails with NNC_ERROR_OUT_OF_MEMORY
// and a message naming the allocation, and whatever was allocated before is freed again.
TEST(CudaRuntime, TooLargeForTheDeviceIsOutOfMemoryAndLeaksNothing) {
  std::string why;
  if (!rt::cuda::cudaDeviceAvailable(&why)) GTEST_SKIP() << "no CUDA driver/GPU: " << why;
  auto g = std::make_unique<Graph>();
  GraphBuilder b(*g);
  Value* x = b.input("x", DType::F32, Shape{int64_t(1) << 38});
  b.output(b.op(OpKind::Exp, {b.op(OpKind::Exp, {x})}));
  ASSERT_TRUE(b.status().isOk()) << b.status().message();
  size_t before = 0, after = 0, total = 0;
  std::string error;
  ASSERT_TRUE(rt::cuda::cudaDeviceMemory(0, &before, &total, &error)) << error;
  CompileOptions o = cuda();
  o.optLevel = 0;  // the intermediate lives in the arena
  auto model = compileJit(*g, o);
  ASSERT_FALSE(model.isOk());
  EXPECT_NE(model.status().message().find("out of device memory allocating the "), std::string::npos)
      << model.status().message();
  ASSERT_TRUE(rt::cuda::cudaDeviceMemory(0, &after, &total, &error)) << error;
  EXPECT_LE(before > after ? before - after : 0, size_t(64) << 20) << "device memory was not freed";
}

}  // namespace
}  // namespace nnc::testing
