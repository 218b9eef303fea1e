// Every kernel the cuda target generates for the real models and for the conformance suites (the ONNX
// backend node tests and Debian's pytorch-converted/-operator cases) becomes CUDA source that NVRTC compiles
// for sm_90 (no GPU needed), and `ptxas -arch=sm_90 -v` then reports each kernel's registers, shared
// memory, spills and stack: a kernel that could not launch on an H100 with the runtime's launch shape
// (rt::cuda::kBlockSize threads per block: registers x block <= 64K, static shared memory <= 48 KB)
// fails the test; spills are reported. Kernels of several cases share one translation unit (renamed
// apart) to keep NVRTC calls few; a failing batch is recompiled case by case so that the report names
// the case.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <regex>

#include "runtime/cuda/launch_dims.h"
#include "targets/cuda/codegen/cuda_emitter.h"
#include "targets/cuda/codegen/nvrtc_compiler.h"
#include "tests/cuda/cuda_lowering_util.h"
#include "tests/cuda/test_kernel_cache.h"

namespace nnc::codegen::cuda {
namespace {

using testing::fs::path;

struct CaseKernels {
  std::string name;
  std::vector<kir::Kernel> kernels;
};

struct Tally {
  int cases = 0;
  int kernels = 0;
  int compiled = 0;
  std::vector<std::string> failures;
  // From ptxas -v (when ptxas was found): kernels checked, the largest register count and static
  // shared memory, and the kernels that spill.
  int checked = 0;
  int maxRegisters = 0;
  int maxSharedBytes = 0;
  std::vector<std::string> spills;
};

constexpr int kRegistersPerBlock = 64 * 1024;  // sm_90: 64K 32-bit registers per block (and per SM)
constexpr int kStaticSharedBytes = 48 * 1024;  // static __shared__ limit without opt-in
constexpr int kMaxRegistersPerThread = 255;

// `ptxas -arch=sm_90 -v` on `ptx`; checks every entry's resources against the launch shape and adds
// them to *tally. Returns "" when every kernel could launch, else the reasons.
std::string checkResources(const std::string& ptx, const std::string& unitName, Tally* tally) {
#ifdef NNC_PTXAS
  char dir[] = "/tmp/nnc-ptxas-XXXXXX";
  if (!mkdtemp(dir)) return "cannot make a scratch directory for ptxas";
  const std::string in = std::string(dir) + "/unit.ptx", log = std::string(dir) + "/ptxas.log";
  std::ofstream(in) << ptx;
  const std::string cmd =
      std::string("'") + NNC_PTXAS + "' -arch=sm_90 -v '" + in + "' -o /dev/null > '" + log + "' 2>&1";
  const int rc = std::system(cmd.c_str());
  std::ifstream logFile(log);
  const std::string out((std::istreambuf_iterator<char>(logFile)), std::istreambuf_iterator<char>());
  std::system(("rm -rf '" + std::string(dir) + "'").c_str());
  if (rc != 0) return "ptxas failed on " + unitName + ": " + out.substr(0, 2000);
  // Per entry: "Function properties for NAME", "N bytes stack frame, S bytes spill stores, L bytes
  // spill loads", "Used R registers, [B bytes smem, ]...".
  static const std::regex props(
      R"(Function properties for (\S+)\s+(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads\s+ptxas info\s+: Used (\d+) registers(?:, used \d+ barriers)?(?:, (\d+) bytes smem)?)");
  std::string problems;
  int entries = 0;
  for (auto it = std::sregex_iterator(out.begin(), out.end(), props); it != std::sregex_iterator(); ++it) {
    const std::smatch& m = *it;
    ++entries;
    const std::string name = m[1];
    const int stack = std::stoi(m[2]), spillStores = std::stoi(m[3]), spillLoads = std::stoi(m[4]);
    const int registers = std::stoi(m[5]), smem = m[6].matched ? std::stoi(m[6]) : 0;
    tally->maxRegisters = std::max(tally->maxRegisters, registers);
    tally->maxSharedBytes = std::max(tally->maxSharedBytes, smem);
    if (spillStores || spillLoads)
      tally->spills.push_back(name + " (" + std::to_string(spillStores) + "/" + std::to_string(spillLoads) +
                              " bytes spilled, " + std::to_string(stack) + " bytes stack)");
    const int64_t blockRegisters = int64_t{registers} * rt::cuda::kBlockSize;
    if (registers > kMaxRegistersPerThread)
      problems += name + ": " + std::to_string(registers) + " registers per thread > " +
                  std::to_string(kMaxRegistersPerThread) + "; ";
    else if (blockRegisters > kRegistersPerBlock)
      problems += name + ": " + std::to_string(registers) + " registers x " + std::to_string(rt::cuda::kBlockSize) +
                  " threads > " + std::to_string(kRegistersPerBlock) + "; ";
    if (smem > kStaticSharedBytes) problems += name + ": " + std::to_string(smem) + " bytes of static shared memory; ";
  }
  tally->checked += entries;
  const size_t ptxEntries = [&] {
    size_t n = 0;
    for (size_t at = ptx.find(".entry "); at != std::string::npos; at = ptx.find(".entry ", at + 1)) ++n;
    return n;
  }();
  if (static_cast<size_t>(entries) != ptxEntries)
    problems += "ptxas reported " + std::to_string(entries) + " of " + std::to_string(ptxEntries) +
                " entries (output format changed?); ";
  return problems;
#else
  (void)ptx;
  (void)unitName;
  (void)tally;
  return "";
#endif
}

// Emits and compiles the kernels of `cases` as one translation unit, renamed apart; checks that the
// cubin is non-empty and the PTX has every entry. Returns "" on success, else why not.
std::string tryCompile(const std::vector<CaseKernels>& cases, const std::string& unitName, Tally* tally) {
  std::vector<kir::Kernel> all;
  for (size_t c = 0; c < cases.size(); ++c) {
    for (kir::Kernel k : cases[c].kernels) {
      k.name = "c" + std::to_string(c) + "_" + k.name;
      all.push_back(std::move(k));
    }
  }
  if (all.empty()) return "";
  auto src = emitCudaSource(all);
  if (!src.isOk()) return src.status().message();
  // Through the kernel cache, like every compile: its key is everything the output depends on
  // (source, options, architecture, NVRTC version), so a hit is a compile this NVRTC already did. The
  // sanitizer tiers of scripts/test.sh share the Release tier's cache; ptxas below runs every time.
  nnc::testing::useTestKernelCache();
  auto compiled = compileCuda(src->code, unitName, NvrtcOptions{});
  if (!compiled.isOk()) return compiled.status().message().substr(0, 3000);
  if (compiled->cubin.empty()) return "empty cubin";
  for (const kir::Kernel& k : all)
    if (compiled->ptx.find(".entry " + k.name + "(") == std::string::npos) return "no PTX entry for " + k.name;
  return checkResources(compiled->ptx, unitName, tally);
}

// Compiles `cases` in one unit; when that fails, case by case, so that failures name their case.
void compileBatch(const std::vector<CaseKernels>& cases, Tally* tally) {
  int count = 0;
  for (const CaseKernels& c : cases) count += static_cast<int>(c.kernels.size());
  Tally resources;  // kept only when the batch passes; else the cases are retried one by one
  const std::string why = tryCompile(cases, cases.size() == 1 ? cases[0].name : "batch", &resources);
  if (why.empty() || cases.size() == 1) {
    tally->checked += resources.checked;
    tally->maxRegisters = std::max(tally->maxRegisters, resources.maxRegisters);
    tally->maxSharedBytes = std::max(tally->maxSharedBytes, resources.maxSharedBytes);
    tally->spills.insert(tally->spills.end(), resources.spills.begin(), resources.spills.end());
  }
  if (why.empty()) {
    tally->kernels += count;
    tally->compiled += count;
    return;
  }
  if (cases.size() == 1) {
    tally->kernels += count;
    tally->failures.push_back(cases[0].name + ": " + why);
    return;
  }
  for (const CaseKernels& c : cases) compileBatch({c}, tally);
}

// Lowers each case (skipping the ones the CPU pipeline cannot compile either) and compiles the
// kernels in batches of `batchSize` cases.
Tally compileCases(const std::vector<path>& dirs, size_t batchSize, int* unsupported) {
  Tally tally;
  std::vector<CaseKernels> batch;
  for (const path& dir : dirs) {
    auto kernels = testing::lowerModelKernels(dir);
    if (!kernels.isOk()) {
      // Not a CUDA problem: the CPU pipeline cannot compile the case either (unsupported op,
      // dtype or attribute). A few reasons are shown so that the count stays honest.
      if ((*unsupported)++ < 3)
        std::cout << "[ cuda     ] not lowered: " << kernels.status().message().substr(0, 160) << "\n";
      continue;
    }
    ++tally.cases;
    batch.push_back({dir.filename().string(), std::move(kernels).value()});
    if (batch.size() == batchSize) {
      compileBatch(batch, &tally);
      batch.clear();
    }
  }
  if (!batch.empty()) compileBatch(batch, &tally);
  return tally;
}

void expectAllCompiled(const Tally& t, const std::string& what) {
  for (const std::string& f : t.failures) ADD_FAILURE() << what << ": " << f;
  EXPECT_EQ(t.compiled, t.kernels) << what;
#ifdef NNC_PTXAS
  EXPECT_EQ(t.checked, t.kernels) << what << ": ptxas must report every kernel";
  std::cout << "[ cuda     ] " << what << ": ptxas -arch=sm_90 -v on " << t.checked << " kernels: at most "
            << t.maxRegisters << " registers and " << t.maxSharedBytes << " bytes of static shared memory ("
            << rt::cuda::kBlockSize << " threads per block fit); " << t.spills.size() << " spill\n";
  for (size_t i = 0; i < t.spills.size() && i < 10; ++i) std::cout << "[ cuda     ]   spills: " << t.spills[i] << "\n";
#else
  std::cout << "[ cuda     ] " << what << ": ptxas not found, resources not checked\n";
#endif
}

TEST(CudaModels, RealModelKernelsCompileForSm90) {
  const std::string root = std::string(NNC_BINARY_DIR) + "/models";
  const std::vector<path> models = testing::realModels(root);
  if (models.empty())
    GTEST_SKIP() << "no real models in " << root << " (generate them with tests/models/make_models.py " << root << ")";
  int unsupported = 0;
  // One translation unit per model.
  Tally t = compileCases(models, 1, &unsupported);
  EXPECT_EQ(unsupported, 0) << "the CPU pipeline compiles every real model";
  EXPECT_GT(t.kernels, 0);
  std::cout << "[ cuda     ] real models: " << t.cases << " models, " << t.compiled << "/" << t.kernels
            << " kernels compiled with NVRTC for sm_90\n";
  RecordProperty("kernels_compiled", t.compiled);
  expectAllCompiled(t, "real models");
}

TEST(CudaModels, NodeTestKernelsCompileForSm90) {
  const std::string root = NNC_ONNX_NODE_TESTS;
  // Every case of the conformance suites (about a minute); NNC_CUDA_SAMPLE_NODE_TESTS=1 takes one in
  // six of the ONNX node tests, for quick runs while developing.
  const char* sample = std::getenv("NNC_CUDA_SAMPLE_NODE_TESTS");
  const bool sampled = sample && *sample == '1';
  std::vector<path> cases = testing::sampleNodeTests(root, sampled ? 6 : 1);
  if (cases.empty()) GTEST_SKIP() << "no ONNX backend node tests at " << root << " (is the onnx package installed?)";
  if (!sampled)
    for (const char* suite :
         {"/usr/share/libonnx-testdata/data/pytorch-converted", "/usr/share/libonnx-testdata/data/pytorch-operator"})
      for (const path& c : testing::sampleNodeTests(suite, 1)) cases.push_back(c);
  int unsupported = 0;
  Tally t = compileCases(cases, 40, &unsupported);
  std::cout << "[ cuda     ] node tests: " << cases.size() << (sampled ? " sampled, " : " cases, ") << unsupported
            << " not compilable by the CPU pipeline either, " << t.cases << " lowered; " << t.compiled << "/"
            << t.kernels << " kernels compiled with NVRTC for sm_90\n";
  RecordProperty("kernels_compiled", t.compiled);
  EXPECT_GE(t.cases, sampled ? 100 : 1000) << "too few node tests lowered to be a meaningful check";
  EXPECT_GT(t.kernels, 100);
  expectAllCompiled(t, "node tests");
}

}  // namespace
}  // namespace nnc::codegen::cuda
