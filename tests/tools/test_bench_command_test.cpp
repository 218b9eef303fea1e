// `nnc test` on generated case directories (pass, wrong expected data, unsupported op, the
// --expect-pass ratchet, --write-passing, --shard) and `nnc bench` (table rows and --json).
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <sstream>

#include "tests/tools/nnc_cli_util.h"

namespace nnc::testing {
namespace {

class TestCommand : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_FALSE(dir.path().empty()); }
  RunResult nnc(const std::vector<std::string>& args) { return runNnc(args, dir.path()); }

  // cases/NAME/model.onnx + test_data_set_0 with inputs x, y and the expected output z.
  void addCase(const std::string& name, const OnnxModel& model, const std::vector<double>& expected) {
    const std::string c = dir / ("cases/" + name);
    writeFile(c + "/model.onnx", model.bytes());
    writeFile(c + "/test_data_set_0/input_0.pb", floatTensorBytes("x", {2, 3}, kX));
    writeFile(c + "/test_data_set_0/input_1.pb", floatTensorBytes("y", {2, 3}, kY));
    writeFile(c + "/test_data_set_0/output_0.pb",
              floatTensorBytes("z", {2, 3}, std::vector<float>(expected.begin(), expected.end())));
  }
  void addGoodCase(const std::string& name) { addCase(name, addReluMulModel(), addReluMulExpected(kX, kY)); }
  void addWrongCase(const std::string& name) {
    std::vector<double> wrong = addReluMulExpected(kX, kY);  // {0.75, 0, 10, 0, -4, 0}
    wrong[4] = -3.5;
    addCase(name, addReluMulModel(), wrong);
  }
  void addUnsupportedCase(const std::string& name) {
    OnnxModel m;
    m.input("x", {2, 3});
    m.input("y", {2, 3});
    m.node("NonZero", {"x"}, {"z"}, "nz1");
    m.output("z");
    addCase(name, m, addReluMulExpected(kX, kY));
  }

  ScratchDir dir;
};

TEST_F(TestCommand, PassingCase) {
  addGoodCase("test_good");
  RunResult r = nnc({"test", "cases/test_good"});
  ASSERT_EQ(r.exitCode, 0) << r;
  EXPECT_EQ(r.out, "PASS test_good\n1 passed, 0 failed, 0 skipped\n") << r;
}

TEST_F(TestCommand, WrongExpectedDataFailsWithMaxError) {
  addWrongCase("test_wrong");
  RunResult r = nnc({"test", "cases"});
  EXPECT_EQ(r.exitCode, 1) << r;
  EXPECT_TRUE(contains(r.out,
                       "FAIL test_wrong: test_data_set_0 output 0: 1 of 6 elements differ; "
                       "max error 0.5 at 4: -4, expected -3.5\n"))
      << r;
  EXPECT_TRUE(contains(r.out, "0 passed, 1 failed, 0 skipped\n")) << r;
}

TEST_F(TestCommand, ToleranceFlagsWiden) {
  addWrongCase("test_wrong");
  RunResult r = nnc({"test", "cases", "--atol=0.6"});
  EXPECT_EQ(r.exitCode, 0) << r;
  EXPECT_TRUE(contains(r.out, "PASS test_wrong\n")) << r;
}

TEST_F(TestCommand, UnsupportedOpIsSkippedWithTheOpNamed) {
  addGoodCase("test_good");
  addUnsupportedCase("test_nonzero");
  RunResult r = nnc({"test", "cases"});
  EXPECT_EQ(r.exitCode, 0) << r;  // a skip is not a failure
  EXPECT_TRUE(contains(r.out, "SKIP test_nonzero: ")) << r;
  EXPECT_TRUE(contains(r.out, "node 'nz1' (NonZero): unsupported operator NonZero")) << r;
  EXPECT_TRUE(contains(r.out, "1 passed, 0 failed, 1 skipped\n")) << r;
}

TEST_F(TestCommand, ListedCaseThatFailsIsARegression) {
  addGoodCase("test_good");
  addWrongCase("test_wrong");
  writeFile(dir / "passing.txt", "# cases that must pass\ntest_good\ntest_wrong\n");
  RunResult r = nnc({"test", "cases", "--expect-pass=passing.txt"});
  EXPECT_EQ(r.exitCode, 1) << r;
  EXPECT_TRUE(contains(r.out, "REGRESSION test_wrong: listed in passing.txt as passing\n")) << r;
  EXPECT_FALSE(contains(r.out, "REGRESSION test_good")) << r;
  EXPECT_TRUE(contains(r.out, "1 regressions against passing.txt\n")) << r;
}

TEST_F(TestCommand, UnlistedFailureIsNotARegression) {
  addGoodCase("test_good");
  addWrongCase("test_wrong");
  writeFile(dir / "passing.txt", "test_good\n");
  RunResult r = nnc({"test", "cases", "--expect-pass", "passing.txt"});
  EXPECT_EQ(r.exitCode, 0) << r;
  EXPECT_TRUE(contains(r.out, "FAIL test_wrong")) << r;
  EXPECT_TRUE(contains(r.out, "0 regressions against passing.txt\n")) << r;
}

TEST_F(TestCommand, MissingExpectPassFileIsNamed) {
  addGoodCase("test_good");
  RunResult r = nnc({"test", "cases", "--expect-pass=nothere.txt"});
  EXPECT_EQ(r.exitCode, 1) << r;
  EXPECT_TRUE(contains(r.err, "nnc: error: cannot read 'nothere.txt'")) << r;
}

TEST_F(TestCommand, WritePassingRecordsPasses) {
  addGoodCase("test_a");
  addWrongCase("test_b");
  addGoodCase("test_c");
  RunResult r = nnc({"test", "cases", "--write-passing=passing.txt"});
  EXPECT_EQ(r.exitCode, 1) << r;
  EXPECT_EQ(readFile(dir / "passing.txt"), "test_a\ntest_c\n");
}

TEST_F(TestCommand, UnwritablePassingListIsAnError) {
  addGoodCase("test_a");
  RunResult r = nnc({"test", "cases", "--write-passing=nodir/passing.txt"});
  EXPECT_EQ(r.exitCode, 1) << r;
  EXPECT_TRUE(contains(r.out, "PASS test_a\n")) << r;
  EXPECT_TRUE(contains(r.err, "nnc: error: cannot write 'nodir/passing.txt'")) << r;
}

// The case names on PASS/FAIL/SKIP lines of `out`.
std::vector<std::string> caseNames(const std::string& out) {
  std::vector<std::string> names;
  std::istringstream lines(out);
  for (std::string line; std::getline(lines, line);) {
    for (const char* prefix : {"PASS ", "FAIL ", "SKIP "})
      if (line.rfind(prefix, 0) == 0)
        names.push_back(line.substr(5, line.find(':') == std::string::npos ? std::string::npos : line.find(':') - 5));
  }
  return names;
}

TEST_F(TestCommand, ShardsSplitTheCases) {
  for (const char* name : {"test_a", "test_b", "test_c"}) addGoodCase(name);
  RunResult s0 = nnc({"test", "cases", "--shard=0/2"});
  RunResult s1 = nnc({"test", "cases", "--shard", "1/2"});
  ASSERT_EQ(s0.exitCode, 0) << s0;
  ASSERT_EQ(s1.exitCode, 0) << s1;
  EXPECT_EQ(caseNames(s0.out), (std::vector<std::string>{"test_a", "test_c"})) << s0;
  EXPECT_EQ(caseNames(s1.out), (std::vector<std::string>{"test_b"})) << s1;
  EXPECT_TRUE(contains(s1.out, "1 passed, 0 failed, 0 skipped\n")) << s1;
}

// A case that crashes fails alone, and the ones after it run, whether each case has its own child
// (the cpu's default) or cases share a worker process (cuda's default, NNC_TEST_WORKER=1 here); a
// failing case ends the worker, so the next one starts in a fresh process. Both give the same report.
TEST_F(TestCommand, ACrashFailsThatCaseAloneInBothIsolationModes) {
  addGoodCase("test_a");
  addGoodCase("test_b");
  addWrongCase("test_c");
  addGoodCase("test_d");
  const std::string want =
      "PASS test_a\nFAIL test_b: crashed with signal 6 (Aborted)\nFAIL test_c: test_data_set_0 output 0: ";
  std::string reports[2];
  for (const char* worker : {"0", "1"}) {
    RunResult r =
        runNnc({"test", "cases"}, dir.path(), {{"NNC_TEST_WORKER", worker}, {"NNC_TEST_CRASH_CASE", "test_b"}});
    EXPECT_EQ(r.exitCode, 1) << r;
    EXPECT_EQ(r.out.rfind(want, 0), 0u) << worker << "\n" << r;
    EXPECT_TRUE(contains(r.out, "PASS test_d\n2 passed, 2 failed, 0 skipped\n")) << worker << "\n" << r;
    reports[worker[0] - '0'] = r.out;
  }
  EXPECT_EQ(reports[0], reports[1]);
}

// A worker process outlives passing and skipped cases (a skip is decided before anything reaches a
// device) and ends after a failing one; NNC_TEST_TIMES=1 marks each case that started a worker.
TEST_F(TestCommand, OnlyAFailingCaseEndsTheWorker) {
  addGoodCase("test_a");
  addUnsupportedCase("test_b");
  addGoodCase("test_c");
  addWrongCase("test_d");
  addGoodCase("test_e");
  RunResult r = runNnc({"test", "cases"}, dir.path(), {{"NNC_TEST_WORKER", "1"}, {"NNC_TEST_TIMES", "1"}});
  EXPECT_EQ(r.exitCode, 1) << r;
  std::vector<std::string> started;
  std::istringstream lines(r.out);
  for (std::string line; std::getline(lines, line);)
    if (contains(line, "[new worker]")) started.push_back(line.substr(5, line.find(':') - 5));
  EXPECT_EQ(started, (std::vector<std::string>{"test_a", "test_e"})) << r;
  EXPECT_TRUE(contains(r.out, "3 passed, 1 failed, 1 skipped\n")) << r;
}

TEST_F(TestCommand, BadShardIsRejected) {
  addGoodCase("test_a");
  for (const char* shard : {"2/2", "a/2", "1/x", "1", "-1/2"}) {
    RunResult r = nnc({"test", "cases", std::string("--shard=") + shard});
    EXPECT_EQ(r.exitCode, 1) << shard << "\n" << r;
    EXPECT_TRUE(contains(r.err, "nnc: error: --shard expects K/N with 0 <= K < N, got '" + std::string(shard) + "'"))
        << r;
  }
}

TEST_F(TestCommand, DirectoryWithoutCasesIsAnError) {
  std::filesystem::create_directories(dir / "empty");
  RunResult r = nnc({"test", "empty"});
  EXPECT_EQ(r.exitCode, 1) << r;
  EXPECT_TRUE(contains(r.err, "nnc: error: no test cases (a folder with model.onnx) in 'empty'")) << r;
  RunResult missing = nnc({"test", "nothere"});
  EXPECT_EQ(missing.exitCode, 1) << missing;
  EXPECT_TRUE(contains(missing.err, "nnc: error: 'nothere' is not a directory")) << missing;
}

class BenchCommand : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_FALSE(dir.path().empty());
    writeFile(dir / "model.onnx", addReluMulModel().bytes());
  }
  RunResult nnc(const std::vector<std::string>& args) { return runNnc(args, dir.path()); }
  ScratchDir dir;
};

TEST_F(BenchCommand, PrintsEagerAndFusedRows) {
  RunResult r = nnc({"bench", "model.onnx", "--iterations=3", "--warmup=1"});
  ASSERT_EQ(r.exitCode, 0) << r;
  EXPECT_TRUE(contains(r.out, "3 iterations after 1 warm-up")) << r.out;
  // label, kernels, bytes moved, median, p10, p90
  static const std::regex eager(R"(eager \(-O0\)\s+3\s+\d+\s+[0-9.]+\s+[0-9.]+\s+[0-9.]+\n)");
  static const std::regex fused(R"(fused \(-O2\)\s+1\s+\d+\s+[0-9.]+\s+[0-9.]+\s+[0-9.]+\n)");
  EXPECT_TRUE(std::regex_search(r.out, eager)) << r.out;
  EXPECT_TRUE(std::regex_search(r.out, fused)) << r.out;
  EXPECT_TRUE(contains(r.out, "fused vs eager: ")) << r.out;
}

// The stdin of the nnc that runNncServe starts (a plain function pointer cannot capture it).
std::string serveInputPath;
bool stdinFromServeInput(size_t) {
  const int fd = open(serveInputPath.c_str(), O_RDONLY);
  return fd >= 0 && dup2(fd, 0) == 0;
}

// --serve (bench/run_benchmarks.py interleaves nnc with other runtimes through it): a ready line with
// both variants' kernel counts, then for each "run N" line N samples of each, as JSON lines; a line
// that is not a command is an error.
TEST_F(BenchCommand, ServeAnswersEachRunWithThatManySamplesOfEach) {
  serveInputPath = dir / "commands";
  writeFile(serveInputPath, "run 2\nrun 3 5\n");  // the second after 5 ms of untimed runs
  RunResult r = runNnc({"bench", "model.onnx", "--serve", "--warmup=1"}, dir.path(), {}, stdinFromServeInput);
  ASSERT_EQ(r.exitCode, 0) << r;
  std::istringstream lines(r.out);
  std::string line;
  std::vector<std::unique_ptr<Json>> replies;
  while (std::getline(lines, line)) {
    JsonReader reader(line);
    replies.push_back(reader.parse());
    ASSERT_TRUE(replies.back()) << reader.error() << "\n" << line;
  }
  ASSERT_EQ(replies.size(), 3u) << r.out;
  EXPECT_TRUE((*replies[0])["ready"].b) << r.out;
  EXPECT_EQ((*replies[0])["kernels"].array.at(0).number, 3) << r.out;
  EXPECT_EQ((*replies[0])["kernels"].array.at(1).number, 1) << r.out;
  for (size_t i = 1; i < 3; ++i)
    for (const char* variant : {"eager", "fused"}) {
      const Json& samples = (*replies[i])[variant];
      ASSERT_EQ(samples.array.size(), i + 1) << r.out;
      for (const Json& ms : samples.array) EXPECT_GT(ms.number, 0) << r.out;
    }
  writeFile(serveInputPath, "walk 2\n");
  RunResult bad = runNnc({"bench", "model.onnx", "--serve", "--warmup=0"}, dir.path(), {}, stdinFromServeInput);
  EXPECT_EQ(bad.exitCode, 1) << bad;
  EXPECT_TRUE(contains(bad.err, "nnc bench --serve: expected 'run N', got 'walk 2'")) << bad.err;
}

TEST_F(BenchCommand, JsonParsesWithTheDocumentedKeys) {
  RunResult r = nnc({"bench", "model.onnx", "--iterations=3", "--warmup=1", "--json"});
  ASSERT_EQ(r.exitCode, 0) << r;
  JsonReader reader(r.out);
  std::unique_ptr<Json> json = reader.parse();
  ASSERT_TRUE(json) << reader.error() << "\n" << r.out;
  ASSERT_EQ(json->kind, Json::Object);
  for (const char* key : {"model", "cores", "load_before", "load_after", "iterations", "runs", "speedup_median"})
    EXPECT_TRUE(json->has(key)) << key;
  EXPECT_EQ((*json)["model"].string, "model.onnx");
  EXPECT_EQ((*json)["iterations"].number, 3);
  const Json& runs = (*json)["runs"];
  ASSERT_EQ(runs.kind, Json::Array);
  ASSERT_EQ(runs.array.size(), 2u);
  for (const Json& run : runs.array)
    for (const char* key : {"label", "opt_level", "kernels", "bytes_moved", "median_ms", "p10_ms", "p90_ms", "min_ms"})
      EXPECT_TRUE(run.has(key)) << key;
  EXPECT_EQ(runs.array[0]["label"].string, "eager (-O0)");
  EXPECT_EQ(runs.array[0]["opt_level"].number, 0);
  EXPECT_EQ(runs.array[0]["kernels"].number, 3);
  EXPECT_EQ(runs.array[1]["label"].string, "fused (-O2)");
  EXPECT_EQ(runs.array[1]["kernels"].number, 1);
  EXPECT_LE(runs.array[1]["min_ms"].number, runs.array[1]["median_ms"].number);
  EXPECT_LE(runs.array[1]["p10_ms"].number, runs.array[1]["p90_ms"].number);
}

// --aot times model.so files as a user deploys them: each variant compiled and linked by the host
// compiler nnc runs (NNC_CXX), loaded, and its temporary files removed. A linker that fails fails
// --aot; the in-process JIT needs none.
TEST_F(BenchCommand, AotTimesCompiledLibrariesAndLeavesNoFiles) {
  ScratchDir tmp, tools;
  RunResult r = runNnc({"bench", "model.onnx", "--aot", "--iterations=3", "--warmup=1", "--json"}, dir.path(),
                       {{"TMPDIR", tmp.path()}});
  ASSERT_EQ(r.exitCode, 0) << r;
  JsonReader reader(r.out);
  std::unique_ptr<Json> json = reader.parse();
  ASSERT_TRUE(json) << reader.error() << "\n" << r.out;
  EXPECT_EQ((*json)["artifact"].string, "so") << r.out;
  const Json& runs = (*json)["runs"];
  ASSERT_EQ(runs.array.size(), 2u) << r.out;
  EXPECT_EQ(runs.array[0]["kernels"].number, 3) << r.out;  // the compiler's report rides along
  EXPECT_EQ(runs.array[1]["kernels"].number, 1) << r.out;
  for (const Json& run : runs.array) EXPECT_GT(run["median_ms"].number, 0) << r.out;
  EXPECT_TRUE(listTree(tmp.path()).empty()) << r;

  writeFile(tools / "failing-cxx", "#!/bin/sh\necho 'no linker here' >&2\nexit 1\n");
  std::filesystem::permissions(tools / "failing-cxx", std::filesystem::perms::owner_all);
  const std::map<std::string, std::string> env = {{"TMPDIR", tmp.path()}, {"NNC_CXX", tools / "failing-cxx"}};
  RunResult noLinker = runNnc({"bench", "model.onnx", "--aot", "--iterations=1"}, dir.path(), env);
  EXPECT_EQ(noLinker.exitCode, 1) << noLinker;
  EXPECT_EQ(noLinker.err.rfind("nnc: error: model.onnx: ", 0), 0u) << noLinker;
  EXPECT_TRUE(contains(noLinker.err, "no linker here")) << noLinker;
  EXPECT_TRUE(listTree(tmp.path()).empty()) << noLinker;
  RunResult jit = runNnc({"bench", "model.onnx", "--iterations=1", "--json"}, dir.path(), env);
  EXPECT_EQ(jit.exitCode, 0) << jit;
  EXPECT_TRUE(contains(jit.out, "\"artifact\": \"jit\"")) << jit;
}

TEST_F(BenchCommand, PerKernelRatesContractionsAgainstTheMeasuredPeak) {
  // y = relu(x @ W + b): one packed contraction with its epilogue.
  OnnxModel m;
  m.input("x", {8, 64});
  m.floats("w", {64, 48}, std::vector<float>(64 * 48, 0.5f));
  m.floats("b", {48}, std::vector<float>(48, 1.0f));
  m.node("MatMul", {"x", "w"}, {"p"}, "mm");
  m.node("Add", {"p", "b"}, {"q"}, "bias");
  m.node("Relu", {"q"}, {"y"}, "act");
  m.output("y");
  writeFile(dir / "mlp.onnx", m.bytes());
  RunResult r = nnc({"bench", "mlp.onnx", "--iterations=3", "--warmup=1", "--threads=1", "--per-kernel"});
  ASSERT_EQ(r.exitCode, 0) << r;
  EXPECT_TRUE(contains(r.out, "per kernel, -O2, 1 thread(s): median of 3 runs; FMA peak ")) << r.out;
  // step, ms, share, GFLOP/s, % of peak, GB/s, kernel, [batch x m x n x k tile] nodes
  static const std::regex row(
      R"(\s+0\s+[0-9.]+\s+100\.0%\s+[0-9.]+\s+[0-9]+%\s+[0-9.]+\s+nnc_k0_matmul\s+\[1x8x48x64 tile \d+x\d+\] mm, bias, act\n)");
  EXPECT_TRUE(std::regex_search(r.out, row)) << r.out;
  EXPECT_TRUE(contains(r.out, "total ")) << r.out;
}

TEST_F(BenchCommand, JsonEscapesTheModelPath) {
  writeFile(dir / "we\"ird\\name.onnx", addReluMulModel().bytes());
  RunResult r = nnc({"bench", "we\"ird\\name.onnx", "--iterations=1", "--warmup=0", "--json"});
  ASSERT_EQ(r.exitCode, 0) << r;
  JsonReader reader(r.out);
  std::unique_ptr<Json> json = reader.parse();
  ASSERT_TRUE(json) << reader.error() << "\n" << r.out;
  EXPECT_EQ((*json)["model"].string, "we\"ird\\name.onnx");
}

TEST_F(BenchCommand, RejectsZeroIterationsAndPrecompiledLibraries) {
  RunResult zero = nnc({"bench", "model.onnx", "--iterations=0"});
  EXPECT_EQ(zero.exitCode, 1) << zero;
  EXPECT_TRUE(contains(zero.err, "nnc: error: --iterations must be at least 1")) << zero;
  ASSERT_EQ(nnc({"model.onnx", "-o", "model.so"}).exitCode, 0);
  RunResult so = nnc({"bench", "model.so", "--iterations=1"});
  EXPECT_EQ(so.exitCode, 1) << so;
  EXPECT_TRUE(contains(so.err,
                       "nnc: error: model.so: nnc bench compiles the model twice (eager and fused), so it "
                       "needs the .onnx file"))
      << so;
}

TEST_F(BenchCommand, ModelErrorsAreNamed) {
  OnnxModel m;
  m.input("x", {-1, 3});
  m.node("Relu", {"x"}, {"z"}, "r1");
  m.output("z");
  writeFile(dir / "sym.onnx", m.bytes());
  RunResult r = nnc({"bench", "sym.onnx", "--iterations=1"});
  EXPECT_EQ(r.exitCode, 1) << r;
  EXPECT_TRUE(contains(r.err, "nnc: error: sym.onnx: input 'x' has symbolic dim 'N'; give --shape x=")) << r;
  RunResult ok = nnc({"bench", "sym.onnx", "--iterations=1", "--warmup=0", "--shape", "x=2x3"});
  EXPECT_EQ(ok.exitCode, 0) << ok;
}

}  // namespace
}  // namespace nnc::testing
