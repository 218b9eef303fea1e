// Codegen against the reference: every fusion case of tests/passes/fusion_graphs.h JIT-compiled at
// -O0 (one kernel per node) and -O2 (fused) must match the reference evaluator on random inputs.
#include <gtest/gtest.h>

#include "ir/reference.h"
#include "tests/driver/driver_test_util.h"
#include "tests/passes/fusion_graphs.h"

namespace nnc::testing {
namespace {

class FusionNumerics : public ::testing::TestWithParam<FusionCase> {};

TEST_P(FusionNumerics, JitMatchesReference) {
  const FusionCase& c = GetParam();
  std::mt19937 rng(42);
  auto reference = parseOrDie(c.text);
  std::vector<std::vector<Tensor>> inputs, want;
  for (int trial = 0; trial < 3; ++trial) {
    inputs.push_back(randomInputs(*reference, rng));
    Expected<std::vector<Tensor>> w = evaluateGraph(*reference, inputs.back());
    ASSERT_TRUE(w.isOk()) << w.status().message();
    want.push_back(std::move(*w));
  }
  for (int level : {0, 2}) {
    auto g = parseOrDie(c.text);
    const size_t numNodes = g->numNodes();
    CompileOptions options;
    options.optLevel = level;
    options.verifyEachPass = true;
    options.numThreads = 2;
    Expected<std::unique_ptr<CompiledModel>> model = compileJit(*g, options);
    ASSERT_TRUE(model.isOk()) << c.name << " -O" << level << ": " << model.status().message();
    // -O0 is one group per node (of the graph after the pipeline: conv-to-gemm adds nodes); -O2 runs
    // exactly the groups the partition tests expect, or the cpu target's own.
    const CompileReport& report = (*model)->report();
    const std::string header = report.irAfter.substr(0, report.irAfter.find('\n'));
    const size_t nodesAfter = std::stoul(header.substr(header.find(" for ") + 5));
    EXPECT_GE(nodesAfter, numNodes) << c.name;
    const size_t groups = level == 0               ? nodesAfter
                          : c.cpuKernelsFused >= 0 ? static_cast<size_t>(c.cpuKernelsFused)
                                                   : static_cast<size_t>(c.groupsFused);
    EXPECT_EQ(header, "// " + std::to_string(groups) + " kernels for " + std::to_string(nodesAfter) + " nodes")
        << c.name << " -O" << level;
    if (level > 0) {
      EXPECT_EQ(report.numKernels + report.numBuiltins, c.cpuKernelsFused >= 0 ? c.cpuKernelsFused : c.kernelsFused)
          << c.name << "\n"
          << report.irAfter;
    }
    for (size_t trial = 0; trial < inputs.size(); ++trial) {
      Expected<std::vector<Tensor>> got = (*model)->run(inputs[trial]);
      ASSERT_TRUE(got.isOk()) << got.status().message();
      ASSERT_EQ(got->size(), want[trial].size());
      for (size_t i = 0; i < got->size(); ++i)
        expectNear((*got)[i], want[trial][i], 1e-5, 1e-6,
                   std::string(c.name) + " -O" + std::to_string(level) + " trial " + std::to_string(trial) +
                       " output " + std::to_string(i));
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Cases, FusionNumerics, ::testing::ValuesIn(kFusionCases),
                         [](const ::testing::TestParamInfo<FusionCase>& info) { return info.param.name; });

}  // namespace
}  // namespace nnc::testing
