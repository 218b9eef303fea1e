// Memory over time and memory exhaustion (issue 4): a model.so run 10,000 times, and created, run
// and destroyed 1,000 times, must not grow the process; a model whose arena cannot be allocated,
// and a compile whose weights cannot be, must fail with NNC_ERROR_OUT_OF_MEMORY or
// "nnc: error: out of memory" — never crash — under an address-space limit (RLIMIT_AS), which makes
// allocations fail the same way on any machine whatever its RAM.
//
// The measured figures are printed ("[ figure ] ...") and recorded as test properties; reproduce
// them with: build/tests/nnc_tools_tests --gtest_filter='LeakOom.*'
#include <sys/resource.h>

#include <chrono>
#include <iostream>

#include "ir/builder.h"
#include "tests/tools/hostile_util.h"

namespace nnc::testing {
namespace {

constexpr int kK = 32, kN = 16, kRows = 256;  // 256 rows: enough work per kernel to use both threads

// y = relu(x @ w + b): at -O0 three kernels with two intermediates in the arena, so every run
// touches the arena and the thread pool.
std::vector<float> denseWeights() {
  std::vector<float> w(kK * kN);
  for (int i = 0; i < kK * kN; ++i) w[i] = static_cast<float>((i * 37) % 19 - 9) / 16.0f;
  return w;
}
std::vector<float> denseBias() {
  std::vector<float> bias(kN);
  for (int i = 0; i < kN; ++i) bias[i] = static_cast<float>(i % 5) / 4.0f - 0.5f;
  return bias;
}

std::unique_ptr<Graph> denseGraph() {
  auto g = std::make_unique<Graph>();
  GraphBuilder b(*g);
  const std::vector<float> w = denseWeights(), bias = denseBias();
  Value* x = b.input("x", DType::F32, Shape{kRows, kK});
  b.output(b.relu(b.add(b.matmul(x, b.constant(Tensor::fromFloats(w, Shape{kK, kN}), "w")),
                        b.constant(Tensor::fromFloats(bias, Shape{kN}), "b"))));
  EXPECT_TRUE(b.status().isOk()) << b.status().message();
  return g;
}

Tensor denseInput() {
  std::vector<float> x(kRows * kK);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(static_cast<int>(i % 23) - 11) / 8.0f;
  return Tensor::fromFloats(x, Shape{kRows, kK});
}

// The first element that differs from the float64 formula by more than 1e-4, or -1.
int64_t denseMismatch(const Tensor& x, const Tensor& y) {
  const std::vector<float> w = denseWeights(), bias = denseBias();
  for (int r = 0; r < kRows; ++r)
    for (int n = 0; n < kN; ++n) {
      double acc = bias[n];
      for (int k = 0; k < kK; ++k) acc += x.getDouble(r * kK + k) * w[k * kN + n];
      if (std::fabs(y.getDouble(r * kN + n) - std::max(0.0, acc)) > 1e-4) return r * kN + n;
    }
  return -1;
}

class LeakOom : public ::testing::Test {
 protected:
  void SetUp() override {
#if defined(NNC_TESTS_UNDER_ASAN)
    GTEST_SKIP() << "ASan's quarantine and shadow memory make RSS and RLIMIT_AS meaningless; LeakSanitizer "
                    "checks leaks in that build";
#endif
    ASSERT_FALSE(dir.path().empty());
  }

  // Compiles the dense model at -O0 into dir/name and opens it.
  void compileDense(const std::string& name, SoApi* api) {
    auto g = denseGraph();
    CompileOptions o;
    o.optLevel = 0;
    CompileReport report;
    const std::string so = dir / name;
    Status s = compileToSharedLibrary(*g, o, so, &report);
    ASSERT_TRUE(s.isOk()) << s.message();
    ASSERT_GT(report.arenaBytes, 0u) << "the model should use the arena";
    std::string error;
    ASSERT_TRUE(openSo(so, api, &error)) << error;
  }

  void figure(const std::string& key, int64_t value, const std::string& line) {
    RecordProperty(key, std::to_string(value));
    std::cout << "[ figure ] " << line << std::endl;
  }

  ScratchDir dir;
};

// 10,000 runs on one handle. A leak of even 105 bytes per run would add 1 MiB, so the 1 MiB bound
// catches any per-run allocation that is not given back; it leaves room for the allocator's page
// granularity (a few 4 KiB pages of malloc bookkeeping may become resident late).
TEST_F(LeakOom, TenThousandRunsDoNotGrowMemory) {
  SoApi api;
  ASSERT_NO_FATAL_FAILURE(compileDense("runs.so", &api));
  nnc_options opts{sizeof(nnc_options), 2, 0, 0, 0};
  nnc_model* m = nullptr;
  ASSERT_EQ(api.create(&m, &opts), NNC_OK) << api.lastError();
  const Tensor x = denseInput();
  // Preallocated caller buffers, as a serving loop has: only nnc's own allocations are measured.
  Tensor y(DType::F32, Shape{kRows, kN});
  nnc_tensor in = tensorArg(x), out = tensorArg(y);
  out.data = y.mutableData();
  auto run = [&] { return api.run(m, &in, 1, &out, 1); };
  for (int i = 0; i < 500; ++i) ASSERT_EQ(run(), NNC_OK) << api.modelLastError(m);  // warm up pools, stacks
  // Every failing path too: error messages are kept per handle and must not pile up.
  nnc_tensor bad = in;
  bad.dtype = NNC_DTYPE_I32;
  ASSERT_EQ(api.run(m, &bad, 1, &out, 1), NNC_ERROR_DTYPE_MISMATCH);

  const size_t before = residentBytes();
  const auto start = std::chrono::steady_clock::now();
  constexpr int kRuns = 10000;
  for (int i = 0; i < kRuns; ++i) {
    ASSERT_EQ(run(), NNC_OK) << "run " << i << ": " << api.modelLastError(m);
    if (i % 100 == 0) {
      ASSERT_EQ(api.run(m, &bad, 1, &out, 1), NNC_ERROR_DTYPE_MISMATCH);
    }
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const size_t after = residentBytes();
  api.destroy(m);

  const int64_t growth = static_cast<int64_t>(after) - static_cast<int64_t>(before);
  figure("rss_growth_bytes_10000_runs", growth,
         "10000 runs (+100 failing runs) of a 3-kernel -O0 model.so: RSS " + std::to_string(before) + " -> " +
             std::to_string(after) + " bytes, growth " + std::to_string(growth) + " bytes, " + std::to_string(seconds) +
             " s");
  EXPECT_LT(growth, 1 << 20) << "RSS grew from " << before << " to " << after << " bytes over " << kRuns << " runs";
  EXPECT_EQ(denseMismatch(x, y), -1) << "the last run's result is wrong";
}

// 1,000 create/run/destroy cycles: each creates a thread pool (threads, stacks), the arena and the
// step tables, and must give all of it back. glibc keeps freed thread stacks in a cache, so the
// bound allows 2 MiB (one more cached stack's resident pages, say) — a leak of one arena (2 KiB)
// or one step table per cycle would still exceed it.
TEST_F(LeakOom, ThousandCreateRunDestroyCyclesDoNotGrowMemory) {
  SoApi api;
  ASSERT_NO_FATAL_FAILURE(compileDense("cycles.so", &api));
  const Tensor x = denseInput();
  nnc_options opts{sizeof(nnc_options), 2, 0, 0, 0};
  auto cycle = [&] {
    nnc_model* m = nullptr;
    if (api.create(&m, &opts) != NNC_OK) return false;
    Expected<std::vector<Tensor>> y = runSo(api, m, {x});
    api.destroy(m);
    return y.isOk() && denseMismatch(x, (*y)[0]) == -1;
  };
  for (int i = 0; i < 100; ++i) ASSERT_TRUE(cycle()) << api.lastError();
  const size_t before = residentBytes();
  const auto start = std::chrono::steady_clock::now();
  constexpr int kCycles = 1000;
  for (int i = 0; i < kCycles; ++i) ASSERT_TRUE(cycle()) << "cycle " << i << ": " << api.lastError();
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const size_t after = residentBytes();
  const int64_t growth = static_cast<int64_t>(after) - static_cast<int64_t>(before);
  figure("rss_growth_bytes_1000_cycles", growth,
         "1000 create/run/destroy cycles (2 threads each): RSS " + std::to_string(before) + " -> " +
             std::to_string(after) + " bytes, growth " + std::to_string(growth) + " bytes, " + std::to_string(seconds) +
             " s");
  EXPECT_LT(growth, 2 << 20) << "RSS grew from " << before << " to " << after << " bytes over " << kCycles << " cycles";
}

// x: f32[1] -> Expand to [2^17 x 2^17] -> ReduceSum -> y: f32[1]. At -O0 the Expand result is an
// arena buffer of 2^34 floats: a 64 GiB arena, more than the address-space limit below.
constexpr uint64_t kHugeArenaBytes = uint64_t{1} << 36;

OnnxModel hugeArenaModel() {
  OnnxModel m;
  m.input("x", {1});
  m.ints("shape", {int64_t{1} << 17, int64_t{1} << 17});
  m.node("Expand", {"x", "shape"}, {"e"}, "expand1");
  setInt(m.node("ReduceSum", {"e"}, {"y"}, "sum1"), "keepdims", 0);
  m.output("y");
  return m;
}

// The address-space limit for a child: what this process already maps plus `headroom`.
size_t limitAboveCurrent(size_t headroom) { return virtualBytes() + headroom; }

TEST_F(LeakOom, ArenaTooLargeForMemoryIsOutOfMemoryAtCreate) {
  auto g = hugeArenaModel().import();
  ASSERT_TRUE(g.isOk()) << g.status().message();
  CompileOptions o;
  o.optLevel = 0;
  CompileReport report;
  const std::string so = dir / "huge_arena.so";
  Status s = compileToSharedLibrary(**g, o, so, &report);
  ASSERT_TRUE(s.isOk()) << s.message();
  ASSERT_GE(report.arenaBytes, kHugeArenaBytes);
  figure("huge_arena_bytes", static_cast<int64_t>(report.arenaBytes),
         "-O0 Expand to 2^34 floats: arena " + std::to_string(report.arenaBytes) + " bytes");
  SoApi api;
  std::string error;
  ASSERT_TRUE(openSo(so, &api, &error)) << error;
  const std::string arenaBytes = std::to_string(report.arenaBytes);

  // In a child (the limit stays there): 1 GiB above what is mapped now is ample for everything but
  // the arena, so only the arena's allocation can fail.
  EXPECT_EXIT(
      {
        if (!limitAddressSpace(limitAboveCurrent(size_t{1} << 30))) _exit(3);
        nnc_model* m = reinterpret_cast<nnc_model*>(1);
        const nnc_status st = api.create(&m, nullptr);
        std::fprintf(stderr, "status %d, model %s: %s\n", static_cast<int>(st), m ? "non-null" : "null",
                     api.lastError());
        _exit(st == NNC_ERROR_OUT_OF_MEMORY && !m ? 0 : 1);
      },
      ::testing::ExitedWithCode(0),
      "status 4, model null: nnc_model_create: out of memory allocating the " + arenaBytes + "-byte arena");

  // The same plan through the JIT: compileJit creates the handle, so it fails the same way.
  EXPECT_EXIT(
      {
        if (!limitAddressSpace(limitAboveCurrent(size_t{1} << 30))) _exit(3);
        auto g2 = hugeArenaModel().import();
        if (!g2) _exit(4);
        Expected<std::unique_ptr<CompiledModel>> jit = compileJit(**g2, o);
        std::fprintf(stderr, "jit: %s\n", jit ? "created" : jit.status().message().c_str());
        _exit(jit ? 1 : 0);
      },
      ::testing::ExitedWithCode(0), "jit: out of memory allocating the " + arenaBytes + "-byte arena");
}

// A constant too big for memory: the compiler must say "out of memory", exit 1 and write nothing.
// The initializer's 8 GiB live in a sparse external-data file (no disk space used); nnc may use at
// most 2 GiB of address space, so reading the weights is what fails.
TEST_F(LeakOom, CompilerOutOfMemoryIsADiagnosticNotACrash) {
  constexpr int64_t kElements = int64_t{1} << 31;  // f32: 8 GiB
  OnnxModel m;
  m.input("x", {kElements});
  ::onnx::TensorProto* w = m.graph().add_initializer();
  w->set_name("w");
  w->set_data_type(::onnx::TensorProto::FLOAT);
  w->add_dims(kElements);
  w->set_data_location(::onnx::TensorProto::EXTERNAL);
  auto* location = w->add_external_data();
  location->set_key("location");
  location->set_value("w.bin");
  m.node("Add", {"x", "w"}, {"y"}, "add1");
  m.output("y");
  writeFile(dir / "big.onnx", m.bytes());
  { std::ofstream(dir / "w.bin").put('\0'); }
  std::filesystem::resize_file(dir / "w.bin", static_cast<uintmax_t>(kElements) * 4);  // sparse
  const std::set<std::string> before = listTree(dir.path());

  const auto start = std::chrono::steady_clock::now();
  RunResult r = runNncLimited({"big.onnx", "-o", "big.so"}, dir.path(), size_t{2} << 30);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(r.exitCode, 1) << r;
  EXPECT_EQ(r.err,
            "nnc: error: out of memory (a memory allocation failed: the model needs more memory than this "
            "process may use)\n")
      << r;
  EXPECT_EQ(r.out, "") << r;
  EXPECT_EQ(listTree(dir.path()), before) << "a partial output was left behind\n" << r;
  figure("compiler_oom_ms", static_cast<int64_t>(seconds * 1000),
         "nnc on an 8 GiB constant under a 2 GiB RLIMIT_AS: exit " + std::to_string(r.exitCode) + " in " +
             std::to_string(seconds) + " s");

  // `nnc run` goes through the same import: the same diagnostic.
  RunResult run = runNncLimited({"run", "big.onnx"}, dir.path(), size_t{2} << 30);
  EXPECT_EQ(run.exitCode, 1) << run;
  EXPECT_TRUE(contains(run.err, "nnc: error: out of memory")) << run;
  EXPECT_EQ(listTree(dir.path()), before) << run;
}

}  // namespace
}  // namespace nnc::testing
