// The targets as objects (targets/target.h): their pass lists, the registry's errors, and their fusion
// hooks — which groups their contraction anchors make, of which kind, and the plan steps they become.
#include "targets/target.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <sstream>

#include "driver/plan_builder.h"
#include "passes/fusion.h"
#include "passes/pipeline.h"
#include "tests/driver/driver_test_util.h"
#include "tests/passes/fusion_graphs.h"

namespace nnc {
namespace {

using namespace nnc::testing;

std::unique_ptr<Target> target(const std::string& name) {
  CompileOptions options;
  options.target = name;
  Expected<std::unique_ptr<Target>> t = makeTarget(options);
  if (!t) {
    // A build without NVRTC still knows the cuda target: what it declares needs no compiler.
    EXPECT_NE(t.status().message().find("is not available"), std::string::npos) << t.status().message();
    for (std::unique_ptr<Target>& known : allTargets())
      if (known->name() == name) return std::move(known);
    return nullptr;
  }
  return std::move(*t);
}

std::vector<std::string> passNames(const Target& t) {
  std::vector<std::string> names;
  for (const passes::TargetPass& p : t.passes()) names.emplace_back(p.name);
  return names;
}

bool runs(const Target& t, const std::string& pass) {
  const std::vector<std::string> passes = passNames(t);
  return std::find(passes.begin(), passes.end(), pass) != passes.end();
}

const char* kindName(GroupKind kind) {
  switch (kind) {
    case GroupKind::LoopKernel: return "loop";
    case GroupKind::Contraction: return "contraction";
    case GroupKind::LibraryCall: return "library";
    case GroupKind::Attention: return "attention";
    case GroupKind::HostBuiltin: return "builtin";
    case GroupKind::InPlace: return "in place";
  }
  return "?";
}

// The groups the target's fusion hooks make: "m a y" per group, " | " between them; with `kinds`,
// each group's kind after a colon ("m a:library | y:loop").
std::string partition(std::string_view text, const Target& t, bool kinds = false, std::ostream* log = nullptr) {
  auto g = parseOrDie(text);
  passes::FusionOptions options;
  options.contractions = t.contractionHooks();
  options.debugLog = log;
  std::ostringstream os;
  const std::vector<KernelGroup> groups = passes::partitionIntoKernels(*g, options);
  for (size_t i = 0; i < groups.size(); ++i) {
    os << (i ? " | " : "");
    for (size_t j = 0; j < groups[i].nodes.size(); ++j) os << (j ? " " : "") << groups[i].nodes[j]->name();
    if (kinds) os << ":" << kindName(groups[i].kind);
  }
  return os.str();
}

TEST(Targets, TheRegistryKnowsCpuAndCuda) {
  std::vector<std::string> names;
  for (const std::unique_ptr<Target>& t : allTargets()) names.push_back(t->name());
  EXPECT_EQ(names, (std::vector<std::string>{"cpu", "cuda"}));
  CompileOptions options;
  options.target = "tpu";
  Expected<std::unique_ptr<Target>> t = makeTarget(options);
  ASSERT_FALSE(t.isOk());
  EXPECT_EQ(t.status().message(), "unknown target 'tpu' (expected cpu or cuda)");
}

TEST(Targets, CudaNeedsNvrtcAndARealArchitecture) {
  CompileOptions options;
  options.target = "cuda";
  Expected<std::unique_ptr<Target>> t = makeTarget(options);
  if (!t) {
    EXPECT_EQ(t.status().message(),
              "target 'cuda' is not available: this nnc was built without the CUDA toolkit's NVRTC (use "
              "--target=cpu)");
    return;
  }
  options.gpuArch = "compute_90";
  t = makeTarget(options);
  ASSERT_FALSE(t.isOk());
  EXPECT_EQ(t.status().message(), "GPU architecture 'compute_90' is not a real architecture such as sm_80 or sm_90");
}

TEST(Targets, ChannelsLastAndExplicitPaddingAreTheCpusPasses) {
  auto cpu = target("cpu"), cuda = target("cuda");
  ASSERT_TRUE(cpu && cuda);
  EXPECT_EQ(passNames(*cpu),
            (std::vector<std::string>{"channels-last", "conv-to-gemm", "explicit-padding", "batch-rows"}));
  EXPECT_TRUE(runs(*cuda, "conv-to-gemm"));
  EXPECT_FALSE(runs(*cuda, "explicit-padding"));
  EXPECT_FALSE(runs(*cuda, "channels-last"));
  EXPECT_TRUE(runs(*cuda, "half-gemm-operands"));  // listed at every precision; changes nothing at f32
  EXPECT_FALSE(runs(*cpu, "half-gemm-operands"));
  // Every pass a target runs is listed as a target pass run by it, before the shared ones.
  const std::vector<PassListing> listed = allPasses();
  for (const std::unique_ptr<Target>& t : allTargets())
    for (const std::string& name : passNames(*t)) {
      bool found = false;
      for (const PassListing& p : listed)
        found |= p.info.name == name && p.info.targetPass &&
                 std::find(p.targets.begin(), p.targets.end(), t->name()) != p.targets.end();
      EXPECT_TRUE(found) << t->name() << ": " << name;
    }
  EXPECT_EQ(listed[5].info.name, "canonicalize");
  EXPECT_FALSE(listed[5].info.targetPass);
}

TEST(Targets, MatMulBiasGroupKinds) {
  auto cpu = target("cpu"), cuda = target("cuda");
  ASSERT_TRUE(cpu && cuda);
  // cpu: a packed contraction running the bias and Relu on its tiles; cuda: cuBLASLt with its bias
  // epilogue, Relu the next kernel.
  EXPECT_EQ(partition(kMatMulBiasRelu, *cpu, /*kinds=*/true), "m a y:contraction");
  EXPECT_EQ(partition(kMatMulBiasRelu, *cuda, /*kinds=*/true), "m a:library | y:loop");
  EXPECT_EQ(partition(kTopK, *cpu, /*kinds=*/true), "e:loop | topk:builtin");
  // The default options have no contraction hooks: the MatMul is a loop-nest anchor.
  auto g = parseOrDie(kMatMulBiasRelu);
  const std::vector<KernelGroup> groups = passes::partitionIntoKernels(*g, {});
  ASSERT_EQ(groups.size(), 1u);
  EXPECT_EQ(groups[0].kind, GroupKind::LoopKernel);
}

TEST(Targets, MatMulBiasPlanSteps) {
  for (const char* name : {"cpu", "cuda"}) {
    auto t = target(name);
    ASSERT_TRUE(t);
    auto g = parseOrDie(kMatMulBiasRelu);
    Expected<LoweredProgram> lowered = lowerProgram(*g, {"y"}, *t);
    ASSERT_TRUE(lowered.isOk()) << lowered.status().message();
    std::string steps;
    for (const rt::Step& s : lowered->plan.steps)
      steps +=
          (steps.empty() ? "" : " ") + std::string(s.kind == rt::StepKind::Library ? "library:" : "kernel:") + s.origin;
    if (std::string(name) == "cpu") {
      EXPECT_EQ(steps, "kernel:m, a, y");
      ASSERT_EQ(lowered->kernels.size(), 1u);
      EXPECT_TRUE(lowered->kernels[0].as<kir::Contraction>());
    } else {
      EXPECT_EQ(steps, "library:m, a kernel:y");
      ASSERT_EQ(lowered->kernels.size(), 1u);
      EXPECT_FALSE(lowered->kernels[0].as<kir::Contraction>());
    }
  }
}

TEST(Targets, CpuContractionsTakeStridedViewsAndAReshapeEpilogue) {
  auto cpu = target("cpu");
  ASSERT_TRUE(cpu);
  EXPECT_EQ(partition(kTransposeIntoMatMul, *cpu, /*kinds=*/true), "t y:contraction");
  // Arithmetic does not fold into the packed GEMM's operands; a Reshape of its result and the
  // elementwise nodes after it join the epilogue.
  std::ostringstream log;
  EXPECT_EQ(partition("graph(%x: f32[4x16], %w: f32[16x8]) -> (%y: f32[2x16]) {\n"
                      "  %e = Exp(%x) : f32[4x16]\n"
                      "  %m = MatMul(%e, %w) : f32[4x8]\n"
                      "  %r = Reshape(%m) {shape=[2, 16]} : f32[2x16]\n"
                      "  %y = Relu(%r) : f32[2x16]\n"
                      "}\n",
                      *cpu, /*kinds=*/true, &log),
            "e:loop | m r y:contraction");
  EXPECT_NE(log.str().find("fusion: m: not inlining e: the packed GEMM reads its operands from memory"),
            std::string::npos)
      << log.str();
}

// --- the cuda target: MatMuls as cuBLASLt calls ---------------------------------------------------

TEST(Targets, LibraryGemmTakesAnF32BiasAsItsEpilogue) {
  auto cuda = target("cuda");
  ASSERT_TRUE(cuda);
  EXPECT_EQ(partition(kMatMulBiasRelu, *cuda), "m a | y");
  // The bias may come first in the Add, and have leading 1s.
  EXPECT_EQ(partition("graph(%x: f32[2x4x16], %w: f32[16x8], %b: f32[1x1x8]) -> (%y: f32[2x4x8]) {\n"
                      "  %m = MatMul(%x, %w) : f32[2x4x8]\n"
                      "  %y = Add(%b, %m) : f32[2x4x8]\n"
                      "}\n",
                      *cuda),
            "m y");
  // cuBLASLt's bias epilogue is used for f32 only.
  EXPECT_EQ(partition("graph(%x: f64[4x16], %w: f64[16x8], %b: f64[8]) -> (%y: f64[4x8]) {\n"
                      "  %m = MatMul(%x, %w) : f64[4x8]\n"
                      "  %y = Add(%m, %b) : f64[4x8]\n"
                      "}\n",
                      *cuda),
            "m | y");
}

TEST(Targets, LibraryGemmLeavesTheRestOfTheEpilogueToTheNextKernel) {
  auto cuda = target("cuda");
  ASSERT_TRUE(cuda);
  std::ostringstream log;
  // MatMul + bias + Relu + Sigmoid: Relu and Sigmoid are the next kernel (cuBLASLt's Relu would turn
  // NaN into 0).
  EXPECT_EQ(partition("graph(%x: f32[4x16], %w: f32[16x8], %b: f32[8]) -> (%y: f32[4x8]) {\n"
                      "  %m = MatMul(%x, %w) : f32[4x8]\n"
                      "  %a = Add(%m, %b) : f32[4x8]\n"
                      "  %r = Relu(%a) : f32[4x8]\n"
                      "  %y = Sigmoid(%r) : f32[4x8]\n"
                      "}\n",
                      *cuda, /*kinds=*/false, &log),
            "m a | r y");
  EXPECT_NE(log.str().find("fusion: r: no epilogue fusion: cuBLASLt's epilogue is an f32 bias; this op runs as "
                           "the next kernel"),
            std::string::npos)
      << log.str();
  // A full-matrix Add (a residual) is not a bias; Relu before the bias cannot take it either.
  EXPECT_EQ(partition("graph(%x: f32[4x16], %w: f32[16x8], %z: f32[4x8]) -> (%y: f32[4x8]) {\n"
                      "  %m = MatMul(%x, %w) : f32[4x8]\n"
                      "  %y = Add(%m, %z) : f32[4x8]\n"
                      "}\n",
                      *cuda),
            "m | y");
  EXPECT_EQ(partition("graph(%x: f32[4x16], %w: f32[16x8], %b: f32[8]) -> (%y: f32[4x8]) {\n"
                      "  %m = MatMul(%x, %w) : f32[4x8]\n"
                      "  %r = Relu(%m) : f32[4x8]\n"
                      "  %y = Add(%r, %b) : f32[4x8]\n"
                      "}\n",
                      *cuda),
            "m | r y");
  // A bias over the rows ([4x1]) is not cuBLASLt's bias either.
  EXPECT_EQ(partition("graph(%x: f32[4x16], %w: f32[16x8], %b: f32[4x1]) -> (%y: f32[4x8]) {\n"
                      "  %m = MatMul(%x, %w) : f32[4x8]\n"
                      "  %y = Add(%m, %b) : f32[4x8]\n"
                      "}\n",
                      *cuda),
            "m | y");
}

TEST(Targets, LibraryGemmTakesNoPrologue) {
  auto cuda = target("cuda");
  ASSERT_TRUE(cuda);
  std::ostringstream log;
  EXPECT_EQ(partition(kTransposeIntoMatMul, *cuda, /*kinds=*/false, &log), "t | y");
  EXPECT_NE(log.str().find("fusion: y: not inlining t: the library GEMM reads its operands from memory"),
            std::string::npos)
      << log.str();
}

TEST(Targets, MatMulsThatAreNoLibraryGemmFuseAsKernels) {
  auto cuda = target("cuda");
  ASSERT_TRUE(cuda);
  // Integer MatMul, and batch dims that only partly broadcast: kernels, with the usual epilogue.
  EXPECT_EQ(partition("graph(%x: i32[4x16], %w: i32[16x8]) -> (%y: i32[4x8]) {\n"
                      "  %m = MatMul(%x, %w) : i32[4x8]\n"
                      "  %y = Neg(%m) : i32[4x8]\n"
                      "}\n",
                      *cuda, /*kinds=*/true),
            "m y:loop");
  EXPECT_EQ(partition("graph(%x: f32[2x1x4x16], %w: f32[1x3x16x8]) -> (%y: f32[2x3x4x8]) {\n"
                      "  %m = MatMul(%x, %w) : f32[2x3x4x8]\n"
                      "  %y = Neg(%m) : f32[2x3x4x8]\n"
                      "}\n",
                      *cuda, /*kinds=*/true),
            "m y:loop");
}

}  // namespace
}  // namespace nnc
