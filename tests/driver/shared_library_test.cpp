// compileToSharedLibrary: the .so loads and matches the JIT; failures leave no file behind; one
// handle serves concurrent callers; create/run/destroy cycles do not leak.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <thread>

#include "ir/builder.h"
#include "tests/driver/driver_test_util.h"

namespace nnc::testing {
namespace {

// y = relu(x @ w + b), x: f32[rows x 32], w: f32[32 x 16] (constant), b: f32[16] (constant).
constexpr int kK = 32, kN = 16;

std::vector<float> weightValues() {
  std::vector<float> w(kK * kN);
  for (int i = 0; i < kK * kN; ++i) w[i] = static_cast<float>(((i * 37) % 19) - 9) / 16.0f;
  return w;
}
std::vector<float> biasValues() {
  std::vector<float> b(kN);
  for (int i = 0; i < kN; ++i) b[i] = static_cast<float>(i % 5) / 4.0f - 0.5f;
  return b;
}

std::unique_ptr<Graph> denseGraph(int64_t rows) {
  auto g = std::make_unique<Graph>();
  GraphBuilder b(*g);
  Value* x = b.input("x", DType::F32, Shape{rows, kK});
  Value* w = b.constant(Tensor::fromFloats(weightValues(), Shape{kK, kN}), "w");
  Value* bias = b.constant(Tensor::fromFloats(biasValues(), Shape{kN}), "b");
  b.output(b.relu(b.add(b.matmul(x, w), bias)));
  EXPECT_TRUE(b.status().isOk()) << b.status().message();
  return g;
}

// The same function in float64, independent of the compiler.
std::vector<double> denseExpected(const Tensor& x) {
  const std::vector<float> w = weightValues(), bias = biasValues();
  const int64_t rows = x.shape()[0];
  std::vector<double> y(rows * kN);
  for (int64_t r = 0; r < rows; ++r)
    for (int n = 0; n < kN; ++n) {
      double acc = bias[n];
      for (int k = 0; k < kK; ++k) acc += x.getDouble(r * kK + k) * w[k * kN + n];
      y[r * kN + n] = std::max(0.0, acc);
    }
  return y;
}

void expectDense(const Tensor& y, const Tensor& x, const std::string& what) {
  const std::vector<double> want = denseExpected(x);
  ASSERT_EQ(y.numel(), static_cast<int64_t>(want.size())) << what;
  for (size_t i = 0; i < want.size(); ++i) {
    if (std::fabs(y.getDouble(i) - want[i]) > 1e-4) {
      ADD_FAILURE() << what << " element " << i << ": got " << y.getDouble(i) << ", want " << want[i];
      return;
    }
  }
}

CompileOptions options() {
  CompileOptions o;
  o.verifyEachPass = true;
  return o;
}

std::vector<std::string> listDir(const std::string& dir) {
  std::vector<std::string> names;
  for (const auto& e : std::filesystem::directory_iterator(dir)) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

TEST(SharedLibrary, LoadsAndMatchesTheJit) {
  ScratchDir dir;
  ASSERT_FALSE(dir.path().empty());
  const std::string so = dir.path() + "/dense.so";
  auto g = denseGraph(8);
  CompileReport report;
  Status s = compileToSharedLibrary(*g, options(), so, &report);
  ASSERT_TRUE(s.isOk()) << s.message();
  EXPECT_EQ(report.numKernels, 1);
  EXPECT_EQ(listDir(dir.path()), std::vector<std::string>{"dense.so"});  // no temporaries left

  ModelApi api;
  std::string error;
  ASSERT_TRUE(openModelLibrary(so, &api, &error)) << error;
  nnc_model* m = nullptr;
  ASSERT_EQ(api.create(&m, nullptr), NNC_OK) << api.lastError();
  ASSERT_EQ(api.numInputs(m), 1u);
  nnc_tensor_info info;
  ASSERT_EQ(api.inputInfo(m, 0, &info), NNC_OK);
  EXPECT_STREQ(info.name, "x");
  EXPECT_EQ(info.rank, 2);

  std::mt19937 rng(3);
  Tensor x = randomTensor(DType::F32, Shape{8, kK}, rng);
  Expected<std::vector<Tensor>> fromSo = runThroughAbi(api, m, {x});
  ASSERT_TRUE(fromSo.isOk()) << fromSo.status().message();
  api.destroy(m);

  auto g2 = denseGraph(8);
  auto jit = compileJit(*g2, options());
  ASSERT_TRUE(jit.isOk()) << jit.status().message();
  Expected<std::vector<Tensor>> fromJit = (*jit)->run({x});
  ASSERT_TRUE(fromJit.isOk()) << fromJit.status().message();
  expectDense((*fromSo)[0], x, "model.so");
  expectNear((*fromSo)[0], (*fromJit)[0], 1e-6, 1e-6, "model.so vs JIT");
}

TEST(SharedLibrary, PathsWithQuotesAndSpacesWork) {
  // The toolchain is run through a shell: the output path must be quoted, not pasted.
  ScratchDir dir;
  const std::string so = dir.path() + "/it's a \"model\" $(false).so";
  auto g = denseGraph(2);
  Status s = compileToSharedLibrary(*g, options(), so);
  ASSERT_TRUE(s.isOk()) << s.message();
  EXPECT_EQ(listDir(dir.path()), std::vector<std::string>{"it's a \"model\" $(false).so"});
  ModelApi api;
  std::string error;
  ASSERT_TRUE(openModelLibrary(so, &api, &error)) << error;
  nnc_model* m = nullptr;
  ASSERT_EQ(api.create(&m, nullptr), NNC_OK) << api.lastError();
  Tensor x = Tensor::fromFloats(std::vector<float>(2 * kK, 0.5f), Shape{2, kK});
  Expected<std::vector<Tensor>> y = runThroughAbi(api, m, {x});
  ASSERT_TRUE(y.isOk()) << y.status().message();
  expectDense((*y)[0], x, "quoted path");
  api.destroy(m);
}

TEST(SharedLibrary, UnwritablePathFailsWithAMessageAndNoFile) {
  ScratchDir dir;
  const std::string missingDir = dir.path() + "/no/such/dir";
  const std::string so = missingDir + "/model.so";
  auto g = denseGraph(2);
  Status s = compileToSharedLibrary(*g, options(), so);
  ASSERT_FALSE(s.isOk());
  EXPECT_EQ(s.message(), "cannot write '" + so + "': No such file or directory");
  EXPECT_FALSE(std::filesystem::exists(missingDir));
  EXPECT_TRUE(listDir(dir.path()).empty());

  // A directory in place of the file: the rename fails; nothing is left beside it.
  const std::string asDir = dir.path() + "/taken.so";
  ASSERT_EQ(mkdir(asDir.c_str(), 0755), 0);
  auto g2 = denseGraph(2);
  Status s2 = compileToSharedLibrary(*g2, options(), asDir);
  ASSERT_FALSE(s2.isOk());
  EXPECT_EQ(s2.message().rfind("cannot write '" + asDir + "'", 0), 0u) << s2.message();
  EXPECT_EQ(listDir(dir.path()), std::vector<std::string>{"taken.so"});
}

TEST(SharedLibrary, FailedCompileNeverWritesTheOutput) {
  ScratchDir dir;
  const std::string so = dir.path() + "/model.so";
  CompileOptions bad = options();
  bad.target = "tpu";
  auto g = denseGraph(2);
  Status s = compileToSharedLibrary(*g, bad, so);
  ASSERT_FALSE(s.isOk());
  EXPECT_NE(s.message().find("unknown target 'tpu'"), std::string::npos) << s.message();
  EXPECT_FALSE(std::filesystem::exists(so));

  // An existing file at the path survives a failed compile untouched.
  { std::ofstream(so) << "previous model"; }
  auto g2 = denseGraph(2);
  bad.target = "cpu";
  bad.optLevel = 9;
  ASSERT_FALSE(compileToSharedLibrary(*g2, bad, so).isOk());
  std::ifstream in(so);
  std::string content((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(content, "previous model");
  EXPECT_EQ(listDir(dir.path()), std::vector<std::string>{"model.so"});
}

// `threads` threads share one handle, `runs` runs each; each checks its own results (the handle
// serialises runs, so the shared arena must never mix two runs' intermediates).
void hammer(const ModelApi& api, nnc_model* m, const std::string& what, int kThreads = 8, int kRuns = 40) {
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937 rng(100 + t);
      for (int r = 0; r < kRuns && failures == 0; ++r) {
        Tensor x = randomTensor(DType::F32, Shape{64, kK}, rng);
        Expected<std::vector<Tensor>> y = runThroughAbi(api, m, {x});
        if (!y.isOk()) {
          ++failures;
          continue;
        }
        const std::vector<double> want = denseExpected(x);
        for (size_t i = 0; i < want.size(); ++i)
          if (std::fabs((*y)[0].getDouble(i) - want[i]) > 1e-4) {
            ++failures;
            break;
          }
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(failures.load(), 0) << what;
}

TEST(SharedLibrary, OneHandleFromEightThreads) {
  // Two intermediates (the O0 kernels' arena buffers) make a race visible as wrong numbers.
  CompileOptions o0 = options();
  o0.optLevel = 0;
  o0.numThreads = 2;
  auto g = denseGraph(64);
  auto jit = compileJit(*g, o0);
  ASSERT_TRUE(jit.isOk()) << jit.status().message();
  ASSERT_GT((*jit)->report().arenaBytes, 0u);
  hammer(linkedApi(), (*jit)->handle(), "JIT handle");

  ScratchDir dir;
  const std::string so = dir.path() + "/threads.so";
  auto g2 = denseGraph(64);
  ASSERT_TRUE(compileToSharedLibrary(*g2, o0, so).isOk());
  ModelApi api;
  std::string error;
  ASSERT_TRUE(openModelLibrary(so, &api, &error)) << error;
  nnc_options opts{sizeof(nnc_options), 2, 0, 0, 0};
  nnc_model* m = nullptr;
  ASSERT_EQ(api.create(&m, &opts), NNC_OK) << api.lastError();
  hammer(api, m, "model.so handle");
  api.destroy(m);
}

// The policy under load: concurrent nnc_model_run calls on one handle all succeed (they are
// serialised), and separate handles of one model.so run at the same time. 16 threads x 250 runs on
// one handle, then 4 handles with 4 threads each, every result checked against float64.
TEST(SharedLibrary, ManyThreadsManyRunsOnOneHandleAndOnSeveral) {
  ScratchDir dir;
  const std::string so = dir.path() + "/stress.so";
  CompileOptions o0 = options();
  o0.optLevel = 0;
  auto g = denseGraph(64);
  ASSERT_TRUE(compileToSharedLibrary(*g, o0, so).isOk());
  ModelApi api;
  std::string error;
  ASSERT_TRUE(openModelLibrary(so, &api, &error)) << error;
  nnc_options opts{sizeof(nnc_options), 2, 0, 0, 0};
  nnc_model* m = nullptr;
  ASSERT_EQ(api.create(&m, &opts), NNC_OK) << api.lastError();
  hammer(api, m, "one handle, 16 threads", /*threads=*/16, /*runs=*/250);
  api.destroy(m);

  std::vector<nnc_model*> handles(4, nullptr);
  for (nnc_model*& h : handles) ASSERT_EQ(api.create(&h, &opts), NNC_OK) << api.lastError();
  std::vector<std::thread> perHandle;
  for (size_t i = 0; i < handles.size(); ++i)
    perHandle.emplace_back([&, i] { hammer(api, handles[i], "handle " + std::to_string(i), 4, 100); });
  for (std::thread& t : perHandle) t.join();
  for (nnc_model* h : handles) api.destroy(h);
}

size_t residentBytes() {
  std::ifstream statm("/proc/self/statm");
  size_t size = 0, resident = 0;
  statm >> size >> resident;
  return resident * static_cast<size_t>(sysconf(_SC_PAGESIZE));
}

TEST(SharedLibrary, CreateRunDestroyCyclesDoNotGrowMemory) {
#if defined(NNC_TESTS_UNDER_ASAN)
  GTEST_SKIP() << "ASan's quarantine holds freed memory, so RSS says nothing here; LeakSanitizer checks leaks";
#endif
  ScratchDir dir;
  const std::string so = dir.path() + "/cycles.so";
  auto g = denseGraph(16);
  CompileOptions o0 = options();
  o0.optLevel = 0;  // with arena buffers to allocate and free each cycle
  ASSERT_TRUE(compileToSharedLibrary(*g, o0, so).isOk());
  ModelApi api;
  std::string error;
  ASSERT_TRUE(openModelLibrary(so, &api, &error)) << error;
  std::mt19937 rng(5);
  Tensor x = randomTensor(DType::F32, Shape{16, kK}, rng);
  nnc_options opts{sizeof(nnc_options), 2, 0, 0, 0};
  auto cycle = [&] {
    nnc_model* m = nullptr;
    if (api.create(&m, &opts) != NNC_OK) return false;
    Expected<std::vector<Tensor>> y = runThroughAbi(api, m, {x});
    api.destroy(m);
    return y.isOk();
  };
  for (int i = 0; i < 50; ++i) ASSERT_TRUE(cycle());  // warm up allocator pools and thread stacks
  const size_t before = residentBytes();
  for (int i = 0; i < 1000; ++i) ASSERT_TRUE(cycle()) << "cycle " << i;
  const size_t after = residentBytes();
  EXPECT_LT(after, before + 4 * 1024 * 1024) << "RSS grew from " << before << " to " << after << " bytes";
}

}  // namespace
}  // namespace nnc::testing
