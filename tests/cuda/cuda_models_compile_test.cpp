// Every kernel the cuda target generates for the real models and for a sample of the ONNX backend
// node tests becomes CUDA source that NVRTC compiles for sm_90 (no GPU needed). Kernels of several
// cases share one translation unit (renamed apart) to keep NVRTC calls few; a failing batch is
// recompiled case by case so that the report names the case.
#include <gtest/gtest.h>

#include <cstdlib>
#include <iostream>

#include "codegen/cuda/cuda_emitter.h"
#include "codegen/cuda/nvrtc_compiler.h"
#include "tests/cuda/cuda_lowering_util.h"

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
};

// Emits and compiles the kernels of `cases` as one translation unit, renamed apart; checks that the
// cubin is non-empty and the PTX has every entry. Returns "" on success, else why not.
std::string tryCompile(const std::vector<CaseKernels>& cases, const std::string& unitName) {
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
  NvrtcOptions opts;
  opts.useCache = false;  // really compile every time
  auto compiled = compileCuda(src->code, unitName, opts);
  if (!compiled.isOk()) return compiled.status().message().substr(0, 3000);
  if (compiled->cubin.empty()) return "empty cubin";
  for (const kir::Kernel& k : all)
    if (compiled->ptx.find(".entry " + k.name + "(") == std::string::npos) return "no PTX entry for " + k.name;
  return "";
}

// Compiles `cases` in one unit; when that fails, case by case, so that failures name their case.
void compileBatch(const std::vector<CaseKernels>& cases, Tally* tally) {
  int count = 0;
  for (const CaseKernels& c : cases) count += static_cast<int>(c.kernels.size());
  const std::string why = tryCompile(cases, cases.size() == 1 ? cases[0].name : "batch");
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
  // About 200 of the ~1300 cases by default; NNC_CUDA_ALL_NODE_TESTS=1 takes all of them.
  const char* all = std::getenv("NNC_CUDA_ALL_NODE_TESTS");
  const std::vector<path> cases = testing::sampleNodeTests(root, all && *all == '1' ? 1 : 6);
  if (cases.empty()) GTEST_SKIP() << "no ONNX backend node tests at " << root << " (is the onnx package installed?)";
  int unsupported = 0;
  Tally t = compileCases(cases, 40, &unsupported);
  std::cout << "[ cuda     ] node tests: " << cases.size() << " sampled, " << unsupported
            << " not compilable by the CPU pipeline either, " << t.cases << " lowered; " << t.compiled << "/"
            << t.kernels << " kernels compiled with NVRTC for sm_90\n";
  RecordProperty("kernels_compiled", t.compiled);
  EXPECT_GE(t.cases, 100) << "too few node tests lowered to be a meaningful sample";
  EXPECT_GT(t.kernels, 100);
  expectAllCompiled(t, "node tests");
}

}  // namespace
}  // namespace nnc::codegen::cuda
