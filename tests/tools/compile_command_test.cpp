// `nnc MODEL.onnx -o MODEL.so` end to end: the library appears (and nothing else), --emit prints
// each stage, --dump-graph, --time-passes, --print-after-all, --disable-pass, -v kernel counts.
#include <algorithm>
#include <regex>

#include "passes/pipeline.h"
#include "targets/target.h"
#include "tests/tools/nnc_cli_util.h"

namespace nnc::testing {
namespace {

class CompileCommand : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_FALSE(dir.path().empty());
    writeFile(dir / "model.onnx", addReluMulModel().bytes());
  }
  RunResult nnc(const std::vector<std::string>& args) { return runNnc(args, dir.path()); }
  ScratchDir dir;
};

// "nnc: 3 kernels, ..." from -v; -1 when the line is missing.
int verboseKernelCount(const std::string& err) {
  static const std::regex line(R"(nnc: (\d+) kernels?, (\d+) library calls, (\d+) host steps)");
  std::smatch m;
  return std::regex_search(err, m, line) ? std::stoi(m.str(1)) : -1;
}

TEST_F(CompileCommand, WritesSharedLibraryAndNothingElse) {
  RunResult r = nnc({"model.onnx", "-o", "model.so"});
  ASSERT_EQ(r.exitCode, 0) << r;
  EXPECT_EQ(r.err, "");
  EXPECT_EQ(listTree(dir.path()), (std::set<std::string>{"model.onnx", "model.so"}));
  // An ELF shared object.
  EXPECT_EQ(readFile(dir / "model.so").substr(0, 4),
            "\x7f"
            "ELF");
}

TEST_F(CompileCommand, OverwritesAnExistingOutput) {
  writeFile(dir / "model.so", "stale");
  RunResult r = nnc({"model.onnx", "-o", "model.so"});
  ASSERT_EQ(r.exitCode, 0) << r;
  EXPECT_EQ(readFile(dir / "model.so").substr(0, 4),
            "\x7f"
            "ELF");
  EXPECT_EQ(listTree(dir.path()), (std::set<std::string>{"model.onnx", "model.so"}));
}

// The arena layout depends on the graph only, not on where its values were allocated: a chain of 25
// same-sized -O0 results (each planned buffer a candidate for the same offsets) printed under three
// malloc configurations is one plan. (It was ordered by Value* address and differed.)
TEST_F(CompileCommand, ThePlanDoesNotDependOnHeapAddresses) {
  OnnxModel m;
  m.input("x", {4, 8});
  std::string prev = "x";
  for (int i = 0; i < 24; ++i) {
    const std::string next = "t" + std::to_string(i);
    m.node(i % 2 ? "Neg" : "Relu", {prev}, {next}, "n" + std::to_string(i));
    prev = next;
  }
  m.node("Add", {prev, "x"}, {"y"}, "add");
  m.output("y");
  writeFile(dir / "chain.onnx", m.bytes());
  const std::vector<std::string> args = {"chain.onnx", "-O0", "--emit=plan"};
  RunResult plain = runNnc(args, dir.path());
  ASSERT_EQ(plain.exitCode, 0) << plain;
  RunResult padded =
      runNnc(args, dir.path(), {{"GLIBC_TUNABLES", "glibc.malloc.mmap_threshold=4096:glibc.malloc.top_pad=1048576"}});
  RunResult oneArena =
      runNnc(args, dir.path(),
             {{"GLIBC_TUNABLES", "glibc.malloc.arena_max=1:glibc.malloc.tcache_count=0"}, {"MALLOC_PERTURB_", "7"}});
  EXPECT_EQ(padded.out, plain.out);
  EXPECT_EQ(oneArena.out, plain.out);
}

TEST_F(CompileCommand, EmitIrPrintsTheImportedGraph) {
  RunResult r = nnc({"model.onnx", "--emit=ir"});
  ASSERT_EQ(r.exitCode, 0) << r;
  EXPECT_TRUE(contains(r.out, "graph(%x: f32[2x3], %y: f32[2x3]) -> (%z: f32[2x3])")) << r.out;
  EXPECT_TRUE(contains(r.out, "%a = Add(%x, %y) : f32[2x3] @add1")) << r.out;
  EXPECT_TRUE(contains(r.out, "%r = Relu(%a) : f32[2x3] @relu1")) << r.out;
  EXPECT_TRUE(contains(r.out, "%z = Mul(%r, %y) : f32[2x3] @mul1")) << r.out;
  // --emit alone compiles in memory: no file appears.
  EXPECT_EQ(listTree(dir.path()), (std::set<std::string>{"model.onnx"}));
}

TEST_F(CompileCommand, EmitFusedIrShowsFewerKernelsThanNodes) {
  RunResult r = nnc({"model.onnx", "--emit=fused-ir"});
  ASSERT_EQ(r.exitCode, 0) << r;
  std::smatch m;
  static const std::regex header(R"(// (\d+) kernels? for (\d+) nodes)");
  ASSERT_TRUE(std::regex_search(r.out, m, header)) << r.out;
  EXPECT_EQ(std::stoi(m.str(2)), 3);
  EXPECT_LT(std::stoi(m.str(1)), std::stoi(m.str(2)));
  EXPECT_TRUE(contains(r.out, "kernel 0 (Add, Relu, Mul)")) << r.out;
}

TEST_F(CompileCommand, EmitFusedIrAtO0KeepsOneKernelPerNode) {
  RunResult r = nnc({"model.onnx", "--emit=fused-ir", "-O0"});
  ASSERT_EQ(r.exitCode, 0) << r;
  EXPECT_TRUE(contains(r.out, "// 3 kernels for 3 nodes")) << r.out;
}

TEST_F(CompileCommand, EmitKernelIrPrintsKernels) {
  RunResult r = nnc({"model.onnx", "--emit=kernel-ir"});
  ASSERT_EQ(r.exitCode, 0) << r;
  EXPECT_TRUE(contains(r.out, "kernel nnc_k0")) << r.out;
  EXPECT_TRUE(contains(r.out, "store %")) << r.out;
}

TEST_F(CompileCommand, EmitLlvmPrintsFunctionDefinitions) {
  RunResult r = nnc({"model.onnx", "--emit=llvm"});
  ASSERT_EQ(r.exitCode, 0) << r;
  EXPECT_TRUE(contains(r.out, "define ")) << r.out;
  EXPECT_TRUE(contains(r.out, "nnc_k0")) << r.out;
}

TEST_F(CompileCommand, EmitWithOutputWritesBoth) {
  RunResult r = nnc({"model.onnx", "--emit=ir", "-o", "model.so"});
  ASSERT_EQ(r.exitCode, 0) << r;
  EXPECT_TRUE(contains(r.out, "@relu1")) << r.out;
  EXPECT_TRUE(fileExists(dir / "model.so"));
}

TEST_F(CompileCommand, DumpGraphWritesDotWithKernelClusters) {
  RunResult r = nnc({"model.onnx", "-o", "model.so", "--dump-graph=graph.dot"});
  ASSERT_EQ(r.exitCode, 0) << r;
  const std::string dot = readFile(dir / "graph.dot");
  EXPECT_EQ(dot.rfind("digraph", 0), 0u) << dot;
  EXPECT_TRUE(contains(dot, "subgraph cluster")) << dot;
  EXPECT_TRUE(contains(dot, "add1")) << dot;
  EXPECT_TRUE(contains(dot, "mul1")) << dot;
}

TEST_F(CompileCommand, DumpGraphAloneNeedsNoOutputFile) {
  RunResult r = nnc({"model.onnx", "--dump-graph", "graph.dot"});
  ASSERT_EQ(r.exitCode, 0) << r;
  EXPECT_TRUE(contains(readFile(dir / "graph.dot"), "subgraph cluster"));
  EXPECT_EQ(listTree(dir.path()), (std::set<std::string>{"model.onnx", "graph.dot"}));
}

TEST_F(CompileCommand, DumpGraphToUnwritablePathFailsAndLeavesNoLibrary) {
  RunResult r = nnc({"model.onnx", "-o", "model.so", "--dump-graph=nodir/graph.dot"});
  EXPECT_EQ(r.exitCode, 1) << r;
  EXPECT_TRUE(contains(r.err, "nnc: error: cannot write 'nodir/graph.dot'")) << r;
  EXPECT_EQ(listTree(dir.path()), (std::set<std::string>{"model.onnx"}));
}

TEST_F(CompileCommand, TimePassesPrintsEveryPipelinePass) {
  RunResult r = nnc({"model.onnx", "-o", "model.so", "-O3", "--time-passes"});
  ASSERT_EQ(r.exitCode, 0) << r;
  Expected<std::unique_ptr<Target>> cpu = makeTarget(CompileOptions{});
  ASSERT_TRUE(cpu.isOk()) << cpu.status().message();
  for (const PassListing& p : allPasses()) {
    const std::regex line("  " + p.info.name + R"(\s+[0-9.]+ ms)");
    // A target pass the cpu does not list never runs for this cpu compile.
    const bool runs = std::find(p.targets.begin(), p.targets.end(), "cpu") != p.targets.end();
    EXPECT_EQ(std::regex_search(r.err, line), runs) << p.info.name << " in\n" << r.err;
  }
}

// Two identical Relus (CSE merges them) feeding an Add, and a dead Neg (DCE removes it).
OnnxModel cseDceModel() {
  OnnxModel m;
  m.input("x", {4});
  m.node("Relu", {"x"}, {"r1"}, "relu_a");
  m.node("Relu", {"x"}, {"r2"}, "relu_b");
  m.node("Add", {"r1", "r2"}, {"z"}, "add");
  m.node("Neg", {"x"}, {"dead"}, "unused_neg");
  m.output("z");
  return m;
}

TEST_F(CompileCommand, PrintAfterAllShowsChangingPasses) {
  writeFile(dir / "cse.onnx", cseDceModel().bytes());
  RunResult r = nnc({"cse.onnx", "--emit=fused-ir", "--print-after-all"});
  ASSERT_EQ(r.exitCode, 0) << r;
  // CSE points the Add at one Relu; DCE then drops the other Relu and the dead Neg.
  EXPECT_TRUE(contains(r.err, "// after cse")) << r.err;
  EXPECT_TRUE(contains(r.err, "%z = Add(%r1, %r1)")) << r.err;
  ASSERT_TRUE(contains(r.err, "// after dce")) << r.err;
  const std::string afterDce = r.err.substr(r.err.find("// after dce"));
  const std::string dceGraph = afterDce.substr(0, afterDce.find("\n}") + 2);
  EXPECT_EQ(dceGraph.find("Relu"), dceGraph.rfind("Relu")) << dceGraph;
  EXPECT_FALSE(contains(dceGraph, "Neg")) << dceGraph;
}

TEST_F(CompileCommand, DisablePassSkipsThatPass) {
  writeFile(dir / "cse.onnx", cseDceModel().bytes());
  RunResult r = nnc({"cse.onnx", "--emit=fused-ir", "--print-after-all", "--disable-pass=cse"});
  ASSERT_EQ(r.exitCode, 0) << r;
  EXPECT_FALSE(contains(r.err, "// after cse")) << r.err;
  EXPECT_TRUE(contains(r.out, "@relu_a")) << r.out;
  EXPECT_TRUE(contains(r.out, "@relu_b")) << r.out;
}

TEST_F(CompileCommand, DisablePassRejectsUnknownPassNames) {
  RunResult r = nnc({"model.onnx", "-o", "model.so", "--disable-pass=no-such-pass"});
  EXPECT_EQ(r.exitCode, 1) << r;
  EXPECT_TRUE(contains(r.err, "nnc: error: --disable-pass: unknown pass 'no-such-pass'")) << r;
  EXPECT_EQ(listTree(dir.path()), (std::set<std::string>{"model.onnx"}));
}

TEST_F(CompileCommand, VerboseKernelCountsDropFromO0ToO2) {
  RunResult o0 = nnc({"model.onnx", "-o", "model0.so", "-O0", "-v"});
  RunResult o2 = nnc({"model.onnx", "-o", "model2.so", "-O2", "-v"});
  ASSERT_EQ(o0.exitCode, 0) << o0;
  ASSERT_EQ(o2.exitCode, 0) << o2;
  EXPECT_EQ(verboseKernelCount(o0.err), 3) << o0.err;
  EXPECT_EQ(verboseKernelCount(o2.err), 1) << o2.err;
}

TEST_F(CompileCommand, OptionValuesMayFollowAsSeparateArguments) {
  RunResult r = nnc({"model.onnx", "--emit", "ir", "--target", "cpu"});
  ASSERT_EQ(r.exitCode, 0) << r;
  EXPECT_TRUE(contains(r.out, "@mul1")) << r.out;
}

TEST(CommandLine, HelpListsUsageAndPasses) {
  ScratchDir dir;
  RunResult r = runNnc({"--help"}, dir.path());
  ASSERT_EQ(r.exitCode, 0) << r;
  EXPECT_TRUE(contains(r.out, "usage: nnc MODEL.onnx -o MODEL.so")) << r.out;
  for (const PassListing& p : allPasses()) EXPECT_TRUE(contains(r.out, p.info.name)) << p.info.name;
}

TEST(CommandLine, VersionNamesTheLlvmItCarriesAndTheTargets) {
  ScratchDir dir;
  RunResult r = runNnc({"--version"}, dir.path());
  ASSERT_EQ(r.exitCode, 0) << r;
  EXPECT_TRUE(std::regex_match(
      r.out, std::regex(R"(nnc [0-9]+\.[0-9]+\.[0-9]+ \(LLVM 19\.[0-9.]+, [a-z ]+; targets: cpu.*\)\n)")))
      << r.out;
}

// NVRTC is opened when a cuda compile first needs it: without one, the cuda target fails with a message
// that says what to install, and writes nothing; the cpu target does not notice.
TEST_F(CompileCommand, WithoutNvrtcTheCudaTargetSaysWhatIsMissing) {
  const std::map<std::string, std::string> noNvrtc = {{"NNC_NVRTC_LIBRARY", "/nonexistent/libnvrtc.so"}};
  if (!contains(runNnc({"--version"}, dir.path()).out, "cuda")) GTEST_SKIP() << "this build has no cuda target";
  RunResult r = runNnc({"model.onnx", "--target=cuda", "-o", "model.so"}, dir.path(), noNvrtc);
  EXPECT_EQ(r.exitCode, 1) << r;
  EXPECT_TRUE(contains(r.err, "NVRTC could not be opened (install the CUDA toolkit, or set NNC_NVRTC_LIBRARY)")) << r;
  EXPECT_FALSE(fileExists(dir / "model.so"));
  RunResult cpu = runNnc({"model.onnx", "-o", "model.so"}, dir.path(), noNvrtc);
  EXPECT_EQ(cpu.exitCode, 0) << cpu;
}

// `nnc serve` is the Python package's (python/nnc/serve.py, run by the wheel's nnc script): the
// binary says where it is instead of reading "serve" as a model file.
TEST(CommandLine, ServeSaysItIsThePythonPackages) {
  ScratchDir dir;
  RunResult r = runNnc({"serve", "model.so"}, dir.path());
  EXPECT_EQ(r.exitCode, 1) << r;
  EXPECT_TRUE(contains(r.err, "pip install '.[serve]'")) << r;
  EXPECT_TRUE(contains(r.err, "python -m nnc.serve")) << r;
}

TEST(CommandLine, NoArgumentsPrintsUsageAndFails) {
  ScratchDir dir;
  RunResult r = runNnc({}, dir.path());
  EXPECT_EQ(r.exitCode, 2) << r;
  EXPECT_TRUE(contains(r.err, "usage: nnc")) << r;
  EXPECT_EQ(r.out, "");
}

}  // namespace
}  // namespace nnc::testing
