// --target=cuda through the driver, the runtime and the CLI: the plan format (version 2, version 1
// still read), the launch rule, --emit=cuda/ptx text, cuda model.so files (embedded cubin + PTX,
// NNC_ERROR_NO_DEVICE without a GPU), the real models compiled for cuda, and the nnc command line.
// Where a GPU is present the same tests run the models and compare with the CPU JIT or with ONNX
// Runtime's outputs; where none is, those parts skip (GTEST_SKIP) with the driver's reason.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <random>
#include <sstream>

#include "driver/compiler.h"
#include "frontend/onnx/importer.h"
#include "ir/builder.h"
#include "ir/reference.h"
#include "runtime/cuda/cuda_executor.h"
#include "runtime/cuda/launch_dims.h"
#include "runtime/model_handle.h"
#include "runtime/plan.h"
#include "targets/cuda/codegen/cuda_emitter.h"
#include "targets/target.h"
#include "tests/cuda/cuda_cli_util.h"
#include "tests/cuda/cuda_lowering_util.h"
#include "tests/cuda/test_kernel_cache.h"
#include "tests/driver/driver_test_util.h"
#include "tests/passes/fusion_graphs.h"

namespace nnc::testing {
namespace {

namespace fs = std::filesystem;

// Whether a CUDA device can run models here; *why says why not.
bool haveGpu(std::string* why) { return rt::cuda::cudaDeviceAvailable(why); }

// y = softmax(relu(x @ w + b)) over the last axis, and the top-3 of y per row (values, indices):
// a GEMM, an epilogue, a row reduction (warp-per-point) and the TopK host builtin.
std::unique_ptr<Graph> smallGraph(bool withTopK) {
  auto g = std::make_unique<Graph>();
  GraphBuilder b(*g);
  std::mt19937 rng(3);
  Value* x = b.input("x", DType::F32, Shape{6, 40});
  Value* w = b.constant(randomTensor(DType::F32, Shape{40, 48}, rng), "w");
  Value* bias = b.constant(randomTensor(DType::F32, Shape{48}, rng), "bias");
  Attributes axis;
  axis.set("axis", int64_t{-1});
  Value* y = b.op(OpKind::Softmax, {b.relu(b.add(b.matmul(x, w), bias))}, axis, "softmax");
  b.output(y);
  if (withTopK) {
    Attributes topk;
    topk.set("k", int64_t{3});
    std::vector<Value*> outs = b.opMulti(OpKind::TopK, {y}, topk, -1, "topk");
    if (outs.size() == 2) {
      b.output(outs[0]);
      b.output(outs[1]);
    }
  }
  EXPECT_TRUE(b.status().isOk()) << b.status().message();
  return g;
}

CompileOptions cudaOptions(int level = 2) {
  useTestKernelCache();
  CompileOptions o;
  o.target = "cuda";
  o.optLevel = level;
  o.verifyEachPass = true;
  return o;
}

// --- plan format ------------------------------------------------------------------------------

// A version-1 plan, written out by hand from the format description in runtime/plan.cpp: one
// weight buffer, one kernel step.
const std::vector<uint8_t> kPlanV1 = {
    'N',  'N',  'C', 'P', 1,   0,   0, 0,                             // magic, version 1
    0x02, 0x01, 0,   0,   0,   0,   0, 0,                             // arena size 0x102
    16,   0,    0,   0,   0,   0,   0, 0,                             // weights size 16
    0,    0,    0,   0,   0,   0,   0, 0,                             // no inputs, no outputs
    1,    0,    0,   0,                                               // one buffer
    1,    8,    0,   0,   0,   0,   0, 0, 0, 8, 0, 0, 0, 0, 0, 0, 0,  // Weight, offset 8, size 8
    1,    0,    0,   0,                                               // one step
    0,    1,    0,   0,   0,   'k',                                   // Kernel "k"
    1,    0,    0,   0,   0,   0,   0, 0,                             // args {0}
    3,    0,    0,   0,   0,   0,   0, 0, 5, 0, 0, 0, 0, 0, 0, 0,     // outer size 3, work per point 5
    0,    0,    0,   0,                                               // no params
    1,    0,    0,   0,   'o',                                        // origin "o"
};

TEST(CudaPlan, Version1StillDeserialisesAsACpuPlan) {
  rt::Plan p;
  std::string error;
  ASSERT_TRUE(rt::deserializePlan(kPlanV1.data(), kPlanV1.size(), &p, &error)) << error;
  EXPECT_EQ(p.target, rt::Target::Cpu);
  EXPECT_EQ(p.arenaSize, 0x102u);
  EXPECT_EQ(p.weightsSize, 16u);
  ASSERT_EQ(p.steps.size(), 1u);
  EXPECT_EQ(p.steps[0].name, "k");
  EXPECT_EQ(p.steps[0].outerSize, 3);
  EXPECT_EQ(p.steps[0].workPerPoint, 5);
  EXPECT_EQ(p.steps[0].origin, "o");
  EXPECT_EQ(p.steps[0].gpuMapping, rt::GpuMapping::ThreadPerPoint);
  // Re-serialised it is a plan of the newest version: the same bytes up to the end of the steps,
  // then (version 2 on) the target and each step's mapping.
  const std::vector<uint8_t> again = rt::serializePlan(p);
  ASSERT_GT(again.size(), kPlanV1.size() + 2);
  EXPECT_GE(again[4], 2);
  EXPECT_TRUE(std::equal(kPlanV1.begin() + 8, kPlanV1.end(), again.begin() + 8));
  EXPECT_EQ(again[kPlanV1.size()], 0);      // target cpu
  EXPECT_EQ(again[kPlanV1.size() + 1], 0);  // step 0: thread per point
}

// kPlanV1 as a version-2 plan: target and one step mapping appended.
std::vector<uint8_t> planV2(uint8_t target, uint8_t mapping) {
  std::vector<uint8_t> v2 = kPlanV1;
  v2[4] = 2;
  v2.push_back(target);
  v2.push_back(mapping);
  return v2;
}

TEST(CudaPlan, Version2CarriesTheTargetAndEachStepsMapping) {
  // Every mapping, including the ones added later (block per point, thread per vector of 2..16
  // points), reads from a version-2 plan and survives re-serialisation.
  const rt::GpuMapping all[] = {rt::GpuMapping::ThreadPerPoint,   rt::GpuMapping::WarpPerPoint,
                                rt::GpuMapping::BlockPerPoint,    rt::GpuMapping::ThreadPerVector2,
                                rt::GpuMapping::ThreadPerVector4, rt::GpuMapping::ThreadPerVector8,
                                rt::GpuMapping::ThreadPerVector16};
  for (rt::GpuMapping mapping : all) {
    const uint8_t byte = static_cast<uint8_t>(mapping);
    const std::vector<uint8_t> v2 = planV2(1, byte);
    rt::Plan back;
    std::string error;
    ASSERT_TRUE(rt::deserializePlan(v2.data(), v2.size(), &back, &error)) << error;
    EXPECT_EQ(back.target, rt::Target::Cuda);
    EXPECT_EQ(back.steps[0].gpuMapping, mapping);
    const std::vector<uint8_t> bytes = rt::serializePlan(back);
    ASSERT_GT(bytes.size(), kPlanV1.size() + 1);
    EXPECT_EQ(bytes[kPlanV1.size()], 1);  // cuda
    EXPECT_EQ(bytes[kPlanV1.size() + 1], byte);
    rt::Plan again;
    ASSERT_TRUE(rt::deserializePlan(bytes.data(), bytes.size(), &again, &error)) << error;
    EXPECT_EQ(again.steps[0].gpuMapping, mapping);
    EXPECT_EQ(rt::serializePlan(again), bytes);
  }
  rt::Plan back;
  std::string error;
  std::vector<uint8_t> bad = planV2(7, 0);
  EXPECT_FALSE(rt::deserializePlan(bad.data(), bad.size(), &back, &error));
  EXPECT_EQ(error, "unknown target 7");
  bad = planV2(1, 7);
  EXPECT_FALSE(rt::deserializePlan(bad.data(), bad.size(), &back, &error));
  EXPECT_EQ(error, "unknown GPU mapping 7");
  bad.resize(bad.size() - 2);  // a version-2 header without its tail
  EXPECT_FALSE(rt::deserializePlan(bad.data(), bad.size(), &back, &error));
  EXPECT_EQ(error, "truncated plan: target runs past the end");
  bad = kPlanV1;
  bad[4] = 200;
  EXPECT_FALSE(rt::deserializePlan(bad.data(), bad.size(), &back, &error));
  EXPECT_EQ(error.rfind("unsupported plan version 200 (this runtime reads versions 1 to ", 0), 0u) << error;
  // An in-memory plan with an unknown mapping is refused too.
  rt::Plan p;
  ASSERT_TRUE(rt::deserializePlan(kPlanV1.data(), kPlanV1.size(), &p, nullptr));
  p.steps[0].gpuMapping = static_cast<rt::GpuMapping>(7);
  EXPECT_FALSE(rt::validatePlan(p, &error));
  EXPECT_NE(error.find("unknown GPU mapping 7"), std::string::npos) << error;
}

TEST(CudaPlan, EachExecutorRefusesTheOtherTargetsPlan) {
  rt::Plan cpuPlan;
  ASSERT_TRUE(rt::deserializePlan(kPlanV1.data(), kPlanV1.size(), &cpuPlan, nullptr));
  const uint8_t weights[16] = {};
  std::string error;
  nnc_status status = NNC_OK;
  // Checked before the driver is touched, so this holds with or without a GPU.
  nnc_model* m = rt::cuda::createCudaModelHandle(cpuPlan, weights, nullptr, {}, nullptr, &error, &status);
  EXPECT_EQ(m, nullptr);
  EXPECT_EQ(status, NNC_ERROR_INTERNAL);
  EXPECT_EQ(error, "the plan is for the cpu target; the CUDA executor runs cuda plans only");

  rt::Plan cudaPlan = cpuPlan;
  cudaPlan.target = rt::Target::Cuda;
  rt::SymbolTable symbols;
  m = rt::createModelHandle(cudaPlan, weights, nullptr, symbols, nullptr, &error, &status);
  EXPECT_EQ(m, nullptr);
  EXPECT_EQ(status, NNC_ERROR_INTERNAL);
  EXPECT_EQ(error, "the plan is for the cuda target; the CPU executor runs cpu plans only");

  // A cuda plan with kernels but no module images.
  m = rt::cuda::createCudaModelHandle(cudaPlan, weights, nullptr, {}, nullptr, &error, &status);
  EXPECT_EQ(m, nullptr);
  EXPECT_EQ(status, NNC_ERROR_INTERNAL);
  EXPECT_EQ(error, "the plan has kernels but the model carries no CUDA module");
}

// --- launch rule ------------------------------------------------------------------------------

TEST(CudaLaunch, RuntimeAndEmitterShareTheRule) {
  using rt::GpuMapping;
  using rt::cuda::launchShape;
  // 256-thread blocks; a thread per point, or a warp (8 per block) per point; 1 <= grid <= 65536.
  EXPECT_EQ(launchShape(GpuMapping::ThreadPerPoint, 1000).gridX, 4u);
  EXPECT_EQ(launchShape(GpuMapping::ThreadPerPoint, 1024).gridX, 4u);
  EXPECT_EQ(launchShape(GpuMapping::ThreadPerPoint, 1025).gridX, 5u);
  EXPECT_EQ(launchShape(GpuMapping::WarpPerPoint, 1000).gridX, 125u);
  EXPECT_EQ(launchShape(GpuMapping::WarpPerPoint, 1).gridX, 1u);
  EXPECT_EQ(launchShape(GpuMapping::ThreadPerPoint, 0).gridX, 1u);
  EXPECT_EQ(launchShape(GpuMapping::ThreadPerPoint, int64_t{1} << 40).gridX, 65536u);
  EXPECT_EQ(launchShape(GpuMapping::WarpPerPoint, 7).blockX, 256u);
  // A block per point; a thread per vector of N points.
  EXPECT_EQ(launchShape(GpuMapping::BlockPerPoint, 1000).gridX, 1000u);
  EXPECT_EQ(launchShape(GpuMapping::ThreadPerVector4, 4096).gridX, 4u);
  EXPECT_EQ(launchShape(GpuMapping::ThreadPerVector16, 4096).gridX, 1u);
  EXPECT_EQ(launchShape(GpuMapping::ThreadPerVector2, 4097).gridX, 9u);
  EXPECT_EQ(rt::cuda::pointsPerThread(GpuMapping::ThreadPerVector8), 8);
  EXPECT_EQ(rt::cuda::pointsPerThread(GpuMapping::BlockPerPoint), 1);
  using codegen::cuda::ThreadMapping;
  struct Pair {
    ThreadMapping mapping;
    int width;
    GpuMapping plan;
  };
  for (Pair p : {Pair{ThreadMapping::ThreadPerPoint, 1, GpuMapping::ThreadPerPoint},
                 Pair{ThreadMapping::WarpPerPoint, 1, GpuMapping::WarpPerPoint},
                 Pair{ThreadMapping::BlockPerPoint, 1, GpuMapping::BlockPerPoint},
                 Pair{ThreadMapping::ThreadPerVector, 2, GpuMapping::ThreadPerVector2},
                 Pair{ThreadMapping::ThreadPerVector, 4, GpuMapping::ThreadPerVector4},
                 Pair{ThreadMapping::ThreadPerVector, 8, GpuMapping::ThreadPerVector8},
                 Pair{ThreadMapping::ThreadPerVector, 16, GpuMapping::ThreadPerVector16}}) {
    EXPECT_EQ(codegen::cuda::planMapping({p.mapping, p.width}), p.plan);
    for (int64_t points : {1, 31, 256, 257, 5000, 1 << 20, 1 << 30}) {
      auto e = codegen::cuda::launchDims(p.mapping, points, p.width);
      auto r = launchShape(p.plan, points);
      EXPECT_EQ(e.gridX, r.gridX) << points;
      EXPECT_EQ(e.blockX, r.blockX) << points;
    }
  }
}

// --- the driver -------------------------------------------------------------------------------

TEST(CudaDriver, EmitsCudaSourceAndPtxForASmallGraph) {
  auto g = smallGraph(/*withTopK=*/true);
  CompileReport report;
  Status s = compileForEmit(*g, cudaOptions(), &report);
  ASSERT_TRUE(s.isOk()) << s.message();
  EXPECT_GE(report.numKernels, 1);
  EXPECT_EQ(report.numBuiltins, 1) << "TopK runs as a host builtin";
  EXPECT_TRUE(report.llvmIr.empty()) << "no LLVM for the cuda target";
  EXPECT_NE(report.cudaSource.find("// Generated by nnc's CUDA backend."), std::string::npos);
  EXPECT_NE(report.cudaSource.find("__shfl_xor_sync"), std::string::npos) << "softmax reduces over a warp";
  EXPECT_NE(report.ptx.find(".target sm_90"), std::string::npos);
  // Every kernel of the kernel IR is a __global__ function in the source and an entry in the PTX.
  int kernels = 0;
  for (size_t at = report.kernelIr.find("kernel "); at != std::string::npos;
       at = report.kernelIr.find("kernel ", at + 1)) {
    const size_t end = report.kernelIr.find_first_of(" (\n", at + 7);
    const std::string name = report.kernelIr.substr(at + 7, end - at - 7);
    if (name.rfind("nnc_k", 0) != 0) continue;
    ++kernels;
    EXPECT_NE(report.cudaSource.find("extern \"C\" __global__ void " + name + "("), std::string::npos) << name;
    EXPECT_NE(report.ptx.find(".entry " + name + "("), std::string::npos) << name;
  }
  EXPECT_EQ(kernels, report.numKernels) << report.kernelIr.substr(0, 400);
}

// The plan records the mapping the emitter chose for each kernel (the launch grid follows from it),
// and an index check is a kernel step of its own whose result the executor reads back.
TEST(CudaDriver, PlanCarriesEachKernelsMappingAndCheckSteps) {
  auto g = std::make_unique<Graph>();
  GraphBuilder b(*g);
  Value* x = b.input("x", DType::F32, Shape{64, 256});
  Value* rows = b.input("rows", DType::F32, Shape{4, 8192});
  Value* idx = b.input("idx", DType::I64, Shape{3});
  Value* small = b.input("small", DType::F32, Shape{8192, 4});
  Attributes sumAxis;
  sumAxis.set("axes", std::vector<int64_t>{1});
  b.output(b.op(OpKind::Relu, {x}, {}, "relu1"));              // pointwise f32: 16-byte vectors
  b.output(b.op(OpKind::ReduceSum, {rows}, sumAxis, "sum1"));  // 8192-element rows, only 4
  b.output(b.op(OpKind::Gather, {x, idx}, {}, "gather1"));     // data-dependent rows: checked
  b.output(b.op(OpKind::Softmax, {small}, {}, "softmax1"));    // tiny rows, many of them
  ASSERT_TRUE(b.status().isOk()) << b.status().message();
  CompileOptions o = cudaOptions();
  o.optLevel = 0;
  CompileReport report;
  Status s = compileForEmit(*g, o, &report);
  ASSERT_TRUE(s.isOk()) << s.message();
  auto stepLine = [&](const std::string& origin) {
    std::istringstream lines(report.plan);
    std::string line, found;
    while (std::getline(lines, line))
      if (line.rfind("step ", 0) == 0 && line.size() > origin.size() &&
          line.compare(line.size() - origin.size(), origin.size(), origin) == 0)
        found += line + "\n";
    return found;
  };
  EXPECT_NE(report.plan.find("plan target=cuda"), std::string::npos) << report.plan;
  EXPECT_NE(stepLine("relu1").find(" vector4  ;"), std::string::npos) << report.plan;
  EXPECT_NE(stepLine("sum1").find(" block-per-point  ;"), std::string::npos) << report.plan;
  EXPECT_NE(stepLine("softmax1").find(" thread-per-point  ;"), std::string::npos) << report.plan;
  const std::string gather = stepLine("gather1");
  EXPECT_NE(gather.find(" outer=1 warp-per-point check  ;"), std::string::npos) << report.plan;
  EXPECT_EQ(std::count(gather.begin(), gather.end(), '\n'), 2) << "the check, then the gather\n" << report.plan;
}

// MatMuls and group-1 Convs become cuBLASLt GEMM steps (with the bias fused), the rest of each
// epilogue one kernel; -O0 keeps the GEMMs but fuses nothing into them.
TEST(CudaDriver, GemmsAndConvsAreCublasLtCalls) {
  auto build = [] {
    auto g = std::make_unique<Graph>();
    GraphBuilder b(*g);
    std::mt19937 rng(5);
    Value* x = b.input("x", DType::F32, Shape{2, 3, 8, 8});
    Attributes pads;
    pads.set("pads", std::vector<int64_t>{1, 1, 1, 1});
    Value* conv = b.op(OpKind::Conv,
                       {x, b.constant(randomTensor(DType::F32, Shape{4, 3, 3, 3}, rng), "w"),
                        b.constant(randomTensor(DType::F32, Shape{4}, rng), "b")},
                       pads, "conv1");
    Value* r = b.op(OpKind::Relu, {conv}, {}, "relu1");
    Attributes flatShape;
    flatShape.set("shape", std::vector<int64_t>{2, 256});
    Value* flat = b.op(OpKind::Reshape, {r}, flatShape, "flat");
    Value* fc =
        b.op(OpKind::MatMul, {flat, b.constant(randomTensor(DType::F32, Shape{256, 10}, rng), "fcw")}, {}, "fc");
    b.output(b.op(OpKind::Add, {fc, b.constant(randomTensor(DType::F32, Shape{10}, rng), "fcb")}, {}, "fc_bias"));
    EXPECT_TRUE(b.status().isOk()) << b.status().message();
    return g;
  };
  for (int level : {0, 2}) {
    auto g = build();
    CompileOptions o = cudaOptions();
    o.optLevel = level;
    CompileReport report;
    Status s = compileForEmit(*g, o, &report);
    ASSERT_TRUE(s.isOk()) << s.message();
    EXPECT_EQ(report.numLibraryCalls, 2) << report.plan;
    // The conv: 2 images of [4 x 27] x [27 x 64]; the weights are shared (stride 0).
    EXPECT_NE(report.plan.find("gemm f32 batch=2 m=4 n=64 k=27 stride=(0, 1728, 256)"), std::string::npos)
        << report.plan;
    EXPECT_NE(report.plan.find("kernel nnc_k0_im2col("), std::string::npos) << report.plan;
    if (level == 2) {
      // The classifier's bias is fused into the GEMM; the conv's bias is per row, so it goes with the
      // Relu into the kernel that the next Im2Col-free consumer (Flatten) inlines.
      EXPECT_NE(report.plan.find("gemm f32 batch=1 m=2 n=10 k=256 bias  ; fc, fc_bias"), std::string::npos)
          << report.plan;
      EXPECT_EQ(report.numKernels, 2) << report.plan;  // Im2Col; reshape + bias + relu + flatten
    } else {
      EXPECT_NE(report.plan.find("gemm f32 batch=1 m=2 n=10 k=256  ; fc"), std::string::npos) << report.plan;
    }
  }
}

TEST(CudaDriver, AllowTf32ReachesOnlyF32Gemms) {
  auto g = smallGraph(false);
  CompileOptions o = cudaOptions();
  o.allowTf32 = true;
  CompileReport report;
  ASSERT_TRUE(compileForEmit(*g, o, &report).isOk());
  EXPECT_NE(report.plan.find(" tf32"), std::string::npos) << report.plan;
  auto g2 = smallGraph(false);
  CompileReport exact;
  ASSERT_TRUE(compileForEmit(*g2, cudaOptions(), &exact).isOk());
  EXPECT_EQ(exact.plan.find(" tf32"), std::string::npos) << exact.plan;
}

TEST(CudaDriver, GpuArchSelectsThePtxTargetAndIsChecked) {
  auto g = smallGraph(false);
  CompileOptions o = cudaOptions();
  o.gpuArch = "sm_80";
  CompileReport report;
  Status s = compileForEmit(*g, o, &report);
  ASSERT_TRUE(s.isOk()) << s.message();
  EXPECT_NE(report.ptx.find(".target sm_80"), std::string::npos);
  for (const char* bad : {"compute_90", "sm_9", "sm_9x", "90", ""}) {
    auto g2 = smallGraph(false);
    o.gpuArch = bad;
    s = compileForEmit(*g2, o, &report);
    ASSERT_FALSE(s.isOk()) << bad;
    EXPECT_EQ(s.message(),
              "GPU architecture '" + std::string(bad) + "' is not a real architecture such as sm_80 or sm_90");
  }
  // bf16 GEMMs need sm_80; f16 ones do not.
  o.precision = Precision::BF16;
  for (const char* arch : {"sm_75", "sm_70"}) {
    auto g2 = smallGraph(false);
    o.gpuArch = arch;
    s = compileForEmit(*g2, o, &report);
    ASSERT_FALSE(s.isOk()) << arch;
    EXPECT_EQ(s.message(), "--precision=bf16 needs a GPU architecture of sm_80 or newer (bf16 tensor cores), not " +
                               std::string(arch) + " (use --precision=fp16 there)");
  }
  for (const char* arch : {"sm_80", "sm_90a", "sm_100"}) {
    auto g2 = smallGraph(false);
    o.gpuArch = arch;
    s = compileForEmit(*g2, o, &report);
    EXPECT_TRUE(s.isOk()) << arch << ": " << s.message();
  }
  o.precision = Precision::FP16;
  auto g3 = smallGraph(false);
  o.gpuArch = "sm_75";
  s = compileForEmit(*g3, o, &report);
  EXPECT_TRUE(s.isOk()) << s.message();
  EXPECT_NE(report.plan.find("gemm f16->f32"), std::string::npos) << report.plan;
}

TEST(CudaDriver, CpuTargetIsUnchanged) {
  auto g = smallGraph(true);
  CompileOptions o;
  CompileReport report;
  Status s = compileForEmit(*g, o, &report);
  ASSERT_TRUE(s.isOk()) << s.message();
  EXPECT_FALSE(report.llvmIr.empty());
  EXPECT_TRUE(report.cudaSource.empty());
  EXPECT_TRUE(report.ptx.empty());
}

// Where there is no device: compileJit compiles, then fails saying why (never crashes).
TEST(CudaDriver, JitWithoutADeviceSaysWhy) {
  std::string why;
  if (haveGpu(&why)) GTEST_SKIP() << "a CUDA device is present; this tests machines without one";
  auto g = smallGraph(true);
  Expected<std::unique_ptr<CompiledModel>> model = compileJit(*g, cudaOptions());
  ASSERT_FALSE(model.isOk());
  EXPECT_EQ(model.status().message(), "no CUDA driver/GPU: " + why);
}

// CUDA JIT vs CPU JIT on the same graph, three runs (buffers are reused across runs).
TEST(CudaDriver, JitMatchesTheCpuJitOnTheGpu) {
  std::string why;
  if (!haveGpu(&why)) GTEST_SKIP() << "no CUDA driver/GPU: " << why;
  std::mt19937 rng(11);
  auto cpuGraph = smallGraph(true);
  const std::vector<Tensor> inputs = randomInputs(*cpuGraph, rng);
  auto g = smallGraph(true);
  Expected<std::unique_ptr<CompiledModel>> model = compileJit(*g, cudaOptions());
  ASSERT_TRUE(model.isOk()) << model.status().message();
  auto cpu = compileJit(*cpuGraph, CompileOptions{});
  ASSERT_TRUE(cpu.isOk()) << cpu.status().message();
  auto want = (*cpu)->run(inputs);
  ASSERT_TRUE(want.isOk()) << want.status().message();
  for (int iteration = 0; iteration < 3; ++iteration) {
    auto got = (*model)->run(inputs);
    ASSERT_TRUE(got.isOk()) << got.status().message();
    ASSERT_EQ(got->size(), 3u);
    expectNear((*got)[0], (*want)[0], 1e-5, 1e-6, "softmax");
    expectNear((*got)[1], (*want)[1], 1e-5, 1e-6, "topk values");
    expectNear((*got)[2], (*want)[2], 0, 0, "topk indices");
  }
  // Bad arguments are checked before anything reaches the GPU.
  Tensor wrong(DType::F32, Shape{6, 41});
  auto bad = (*model)->run({wrong});
  ASSERT_FALSE(bad.isOk());
  EXPECT_NE(bad.status().message().find("expected shape [6x40], got [6x41]"), std::string::npos)
      << bad.status().message();
}

// An in-place concatenation (passes/fusion.cpp, rule 4) on the cuda target: the producers' kernels
// write their slices of one device buffer, the consumer and a later reader of a slice read it
// there; against the reference evaluator, three runs (the arena is reused).
TEST(CudaDriver, AConcatenationInPlaceMatchesTheReference) {
  std::string why;
  if (!haveGpu(&why)) GTEST_SKIP() << "no CUDA driver/GPU: " << why;
  auto reference = parseOrDie(kConcatInPlace);
  auto g = parseOrDie(kConcatInPlace);
  Expected<std::unique_ptr<CompiledModel>> model = compileJit(*g, cudaOptions());
  ASSERT_TRUE(model.isOk()) << model.status().message();
  const CompileReport& report = (*model)->report();
  EXPECT_TRUE(std::any_of(report.groups.begin(), report.groups.end(), [](const CompileReport::Group& group) {
    return group.kind == "in place";
  })) << report.irAfter;
  std::mt19937 rng(5);
  for (int run = 0; run < 3; ++run) {
    const std::vector<Tensor> inputs = randomInputs(*reference, rng);
    Expected<std::vector<Tensor>> want = evaluateGraph(*reference, inputs);
    ASSERT_TRUE(want.isOk()) << want.status().message();
    auto got = (*model)->run(inputs);
    ASSERT_TRUE(got.isOk()) << got.status().message();
    ASSERT_EQ(got->size(), want->size());
    for (size_t i = 0; i < got->size(); ++i)
      expectNear((*got)[i], (*want)[i], 1e-5, 1e-6, "run " + std::to_string(run) + " output " + std::to_string(i));
  }
}

// --- CUDA graphs ------------------------------------------------------------------------------

// y = relu(x @ w + b) -> TopK (host builtin) -> values * 2 + indices as f32: kernel steps on both
// sides of the builtin, so the plan has two graph segments.
std::unique_ptr<Graph> graphWithABuiltinInTheMiddle() {
  auto g = std::make_unique<Graph>();
  GraphBuilder b(*g);
  std::mt19937 rng(4);
  Value* x = b.input("x", DType::F32, Shape{6, 40});
  Value* w = b.constant(randomTensor(DType::F32, Shape{40, 48}, rng), "w");
  Value* bias = b.constant(randomTensor(DType::F32, Shape{48}, rng), "bias");
  Value* y = b.relu(b.add(b.matmul(x, w), bias));
  Attributes topk;
  topk.set("k", int64_t{3});
  std::vector<Value*> outs = b.opMulti(OpKind::TopK, {y}, topk, -1, "topk");
  if (outs.size() == 2) {
    Attributes to;
    to.set("to", static_cast<int64_t>(dtypeToOnnx(DType::F32)));
    Value* indices = b.op(OpKind::Cast, {outs[1]}, to);
    b.output(b.add(b.mul(outs[0], outs[0]), indices));
  }
  EXPECT_TRUE(b.status().isOk()) << b.status().message();
  return g;
}

rt::cuda::CudaRunStats statsOf(CompiledModel& model) {
  rt::cuda::CudaRunStats stats;
  EXPECT_TRUE(rt::cuda::cudaRunStats(model.handle(), &stats));
  return stats;
}

// Three runs with different inputs each, against the CPU JIT: the first captures each segment, the
// later ones replay the graphs, and the results follow the inputs (nothing stale is replayed).
void checkRunsAgainstCpu(const std::function<std::unique_ptr<Graph>()>& build, CompiledModel& model, uint32_t seed) {
  auto cpuGraph = build();
  auto cpu = compileJit(*cpuGraph, CompileOptions{});
  ASSERT_TRUE(cpu.isOk()) << cpu.status().message();
  std::mt19937 rng(seed);
  for (int run = 0; run < 3; ++run) {
    const std::vector<Tensor> inputs = randomInputs(*cpuGraph, rng);
    auto want = (*cpu)->run(inputs);
    ASSERT_TRUE(want.isOk()) << want.status().message();
    auto got = model.run(inputs);
    ASSERT_TRUE(got.isOk()) << got.status().message();
    ASSERT_EQ(got->size(), want->size());
    for (size_t i = 0; i < got->size(); ++i)
      expectNear((*got)[i], (*want)[i], 1e-5, 1e-6, "run " + std::to_string(run) + " output " + std::to_string(i));
  }
}

// Without a GPU: the test graph really has device steps (kernels, library GEMMs) on both sides of
// its builtin (two segments, as the executor splits them), and runs on the CPU.
TEST(CudaGraphs, TestGraphHasKernelsOnBothSidesOfTheBuiltin) {
  auto g = graphWithABuiltinInTheMiddle();
  std::vector<std::string> outputNames;
  for (const Value* v : g->outputs()) outputNames.push_back(v->name());
  ASSERT_TRUE(runPipeline(*g, cudaOptions()).isOk());
  auto target = makeTarget(cudaOptions());
  ASSERT_TRUE(target.isOk()) << target.status().message();
  auto lowered = lowerProgram(*g, outputNames, **target);
  ASSERT_TRUE(lowered.isOk()) << lowered.status().message();
  int segments = 0, builtins = 0;
  bool previousOnDevice = false;
  for (const rt::Step& step : lowered->plan.steps) {
    const bool onDevice = step.kind != rt::StepKind::Builtin;  // kernels and library GEMMs
    if (onDevice && !previousOnDevice) ++segments;
    builtins += !onDevice;
    previousOnDevice = onDevice;
  }
  EXPECT_EQ(builtins, 1);
  EXPECT_EQ(segments, 2);
  auto cpuGraph = graphWithABuiltinInTheMiddle();
  auto cpu = compileJit(*cpuGraph, CompileOptions{});
  ASSERT_TRUE(cpu.isOk()) << cpu.status().message();
  std::mt19937 rng(1);
  EXPECT_TRUE((*cpu)->run(randomInputs(*cpuGraph, rng)).isOk());
}

TEST(CudaGraphs, StatsNeedACudaHandle) {
  rt::cuda::CudaRunStats stats;
  EXPECT_FALSE(rt::cuda::cudaRunStats(nullptr, &stats));
}

TEST(CudaGraphs, CapturedOnceAndReplayedWithNewInputs) {
  std::string why;
  if (!haveGpu(&why)) GTEST_SKIP() << "no CUDA driver/GPU: " << why;
  for (auto build : {std::function<std::unique_ptr<Graph>()>([] { return smallGraph(true); }),
                     std::function<std::unique_ptr<Graph>()>(graphWithABuiltinInTheMiddle)}) {
    auto g = build();
    auto model = compileJit(*g, cudaOptions());
    ASSERT_TRUE(model.isOk()) << model.status().message();
    ASSERT_NO_FATAL_FAILURE(checkRunsAgainstCpu(build, **model, 21));
    const rt::cuda::CudaRunStats stats = statsOf(**model);
    EXPECT_TRUE(stats.graphsEnabled) << stats.graphsOffReason;
    EXPECT_GE(stats.segments, 1);
    EXPECT_EQ(stats.captureFailures, 0);
    EXPECT_EQ(stats.captures, stats.segments) << "every segment captured once";
    EXPECT_EQ(stats.graphLaunches, 3 * stats.segments);
    EXPECT_EQ(stats.plainSegmentRuns, 0);
  }
  auto g = graphWithABuiltinInTheMiddle();
  auto model = compileJit(*g, cudaOptions());
  ASSERT_TRUE(model.isOk()) << model.status().message();
  EXPECT_EQ(statsOf(**model).segments, 2) << "kernels before and after the TopK builtin";
}

TEST(CudaGraphs, OffWithTheEnvironmentVariable) {
  std::string why;
  if (!haveGpu(&why)) GTEST_SKIP() << "no CUDA driver/GPU: " << why;
  ScopedEnv off("NNC_CUDA_GRAPHS", "0");
  auto g = graphWithABuiltinInTheMiddle();
  auto model = compileJit(*g, cudaOptions());
  ASSERT_TRUE(model.isOk()) << model.status().message();
  ASSERT_NO_FATAL_FAILURE(checkRunsAgainstCpu(graphWithABuiltinInTheMiddle, **model, 22));
  const rt::cuda::CudaRunStats stats = statsOf(**model);
  EXPECT_FALSE(stats.graphsEnabled);
  EXPECT_EQ(stats.graphsOffReason, "NNC_CUDA_GRAPHS=0");
  EXPECT_EQ(stats.captures, 0);
  EXPECT_EQ(stats.graphLaunches, 0);
  EXPECT_EQ(stats.plainSegmentRuns, 3 * stats.segments);
}

TEST(CudaGraphs, OffWhenSynchronisingEachStep) {
  std::string why;
  if (!haveGpu(&why)) GTEST_SKIP() << "no CUDA driver/GPU: " << why;
  ScopedEnv sync("NNC_CUDA_SYNC", "1");
  auto g = smallGraph(true);
  auto model = compileJit(*g, cudaOptions());
  ASSERT_TRUE(model.isOk()) << model.status().message();
  ASSERT_NO_FATAL_FAILURE(checkRunsAgainstCpu([] { return smallGraph(true); }, **model, 23));
  const rt::cuda::CudaRunStats stats = statsOf(**model);
  EXPECT_FALSE(stats.graphsEnabled);
  EXPECT_EQ(stats.graphsOffReason, "NNC_CUDA_SYNC=1 synchronises after every step");
  EXPECT_EQ(stats.graphLaunches, 0);
}

// --- model.so ---------------------------------------------------------------------------------

// Compiles the small graph to `so` for cuda; the report when asked.
void compileSmallCudaLibrary(const std::string& so, CompileReport* report) {
  auto g = smallGraph(true);
  Status s = compileToSharedLibrary(*g, cudaOptions(), so, report);
  ASSERT_TRUE(s.isOk()) << s.message();
  ASSERT_TRUE(fs::exists(so));
}

// Cross-compiling: the model.so carries cubin and PTX; nnc_model_create succeeds on a GPU and
// fails with NNC_ERROR_NO_DEVICE and the reason elsewhere.
TEST(CudaSharedLibrary, EmbedsTheKernelsAndCreatesOnlyWithADevice) {
  ScratchDir dir;
  ASSERT_FALSE(dir.path().empty());
  const std::string so = dir.path() + "/small_cuda.so";
  CompileReport report;
  ASSERT_NO_FATAL_FAILURE(compileSmallCudaLibrary(so, &report));
  // The PTX text rides along in .rodata (for GPUs newer than the cubin's architecture).
  const std::string bytes = readFile(so);
  ASSERT_FALSE(report.ptx.empty());
  const size_t entry = report.ptx.find(".entry ");
  ASSERT_NE(entry, std::string::npos);
  EXPECT_NE(bytes.find(report.ptx.substr(entry, report.ptx.find('(', entry) - entry)), std::string::npos);
  EXPECT_NE(bytes.find("\x7f"
                       "ELF",
                       64),
            std::string::npos)
      << "an embedded cubin (an ELF image) after the header";

  ModelApi api;
  std::string error;
  ASSERT_TRUE(openModelLibrary(so, &api, &error)) << error;
  nnc_model* m = reinterpret_cast<nnc_model*>(0x1);
  const nnc_status st = api.create(&m, nullptr);
  std::string why;
  if (haveGpu(&why)) {
    ASSERT_EQ(st, NNC_OK) << api.lastError();
    EXPECT_EQ(api.numInputs(m), 1u);
    EXPECT_EQ(api.numOutputs(m), 3u);
    api.destroy(m);
    return;
  }
  EXPECT_EQ(st, NNC_ERROR_NO_DEVICE);
  EXPECT_EQ(m, nullptr);
  EXPECT_EQ(std::string(api.lastError()), "no CUDA driver/GPU: " + why);
}

TEST(CudaSharedLibrary, RunsLikeTheCpuJitOnTheGpu) {
  std::string why;
  if (!haveGpu(&why)) GTEST_SKIP() << "no CUDA driver/GPU: " << why;
  ScratchDir dir;
  const std::string so = dir.path() + "/small_cuda.so";
  ASSERT_NO_FATAL_FAILURE(compileSmallCudaLibrary(so, nullptr));
  ModelApi api;
  std::string error;
  ASSERT_TRUE(openModelLibrary(so, &api, &error)) << error;
  nnc_model* m = nullptr;
  ASSERT_EQ(api.create(&m, nullptr), NNC_OK) << api.lastError();
  std::mt19937 rng(5);
  auto cpuGraph = smallGraph(true);
  const std::vector<Tensor> inputs = randomInputs(*cpuGraph, rng);
  auto cpu = compileJit(*cpuGraph, CompileOptions{});
  ASSERT_TRUE(cpu.isOk()) << cpu.status().message();
  auto want = (*cpu)->run(inputs);
  ASSERT_TRUE(want.isOk()) << want.status().message();
  auto got = runThroughAbi(api, m, inputs);
  ASSERT_TRUE(got.isOk()) << got.status().message();
  expectNear((*got)[0], (*want)[0], 1e-5, 1e-6, "softmax");
  expectNear((*got)[1], (*want)[1], 1e-5, 1e-6, "topk values");
  expectNear((*got)[2], (*want)[2], 0, 0, "topk indices");
  api.destroy(m);
}

// Create/run/destroy in a loop: device memory stays flat (GPU only).
TEST(CudaSharedLibrary, DeviceMemoryStaysFlatOverCreateRunDestroy) {
  std::string why;
  if (!haveGpu(&why)) GTEST_SKIP() << "no CUDA driver/GPU: " << why;
  auto g = smallGraph(true);
  auto anchor = compileJit(*g, cudaOptions());  // keeps the primary context alive throughout
  ASSERT_TRUE(anchor.isOk()) << anchor.status().message();
  std::mt19937 rng(9);
  const std::vector<Tensor> inputs = randomInputs(*g, rng);
  auto cycle = [&] {
    auto g2 = smallGraph(true);
    auto model = compileJit(*g2, cudaOptions());
    ASSERT_TRUE(model.isOk()) << model.status().message();
    ASSERT_TRUE((*model)->run(inputs).isOk());
  };
  cycle();  // warm-up: lazy driver allocations happen once
  size_t before = 0, after = 0, total = 0;
  std::string error;
  ASSERT_TRUE(rt::cuda::cudaDeviceMemory(0, &before, &total, &error)) << error;
  for (int i = 0; i < 20; ++i) cycle();
  ASSERT_TRUE(rt::cuda::cudaDeviceMemory(0, &after, &total, &error)) << error;
  // Allocation granularity is 2 MiB; 20 leaked models would show as far more.
  EXPECT_LE(before > after ? before - after : 0, size_t{4} << 20) << "free " << before << " -> " << after;
}

// --- the real models --------------------------------------------------------------------------

// Each real model compiled to a cuda model.so and created: on a GPU it is run on its test data and
// compared with ONNX Runtime's outputs (rtol 1e-4, atol 1e-5); without one, creation must fail with
// NNC_ERROR_NO_DEVICE.
void checkRealModels(bool run) {
  const std::string root = std::string(NNC_BINARY_DIR) + "/models";
  const auto models = codegen::cuda::testing::realModels(root);
  if (models.empty())
    GTEST_SKIP() << "no real models in " << root << " (generate them with tests/models/make_models.py " << root << ")";
  std::string why;
  const bool gpu = haveGpu(&why);
  ASSERT_EQ(run, gpu);
  ScratchDir dir;
  int compiled = 0, ran = 0;
  for (const fs::path& caseDir : models) {
    SCOPED_TRACE(caseDir.filename().string());
    const std::string model = (caseDir / "model.onnx").string();
    auto graph = onnx::importModelFile(model, {});
    ASSERT_TRUE(graph.isOk()) << graph.status().message();
    const std::string so = dir.path() + "/" + caseDir.filename().string() + ".so";
    Status s = compileToSharedLibrary(**graph, cudaOptions(), so);
    ASSERT_TRUE(s.isOk()) << s.message().substr(0, 2000);
    ++compiled;
    ModelApi api;
    std::string error;
    ASSERT_TRUE(openModelLibrary(so, &api, &error)) << error;
    nnc_model* m = nullptr;
    const nnc_status st = api.create(&m, nullptr);
    if (!gpu) {
      EXPECT_EQ(st, NNC_ERROR_NO_DEVICE) << api.lastError();
      continue;
    }
    ASSERT_EQ(st, NNC_OK) << api.lastError();
    const std::vector<Tensor> inputs = codegen::cuda::testing::readFirstDataSet(caseDir);
    auto got = runThroughAbi(api, m, inputs);
    ASSERT_TRUE(got.isOk()) << got.status().message();
    for (size_t k = 0; k < got->size(); ++k) {
      const fs::path want = caseDir / "test_data_set_0" / ("output_" + std::to_string(k) + ".pb");
      auto expected = onnx::readTensorFile(want.string());
      ASSERT_TRUE(expected.isOk()) << expected.status().message();
      expectNear((*got)[k], *expected, 1e-4, 1e-5, caseDir.filename().string() + " output " + std::to_string(k));
    }
    api.destroy(m);
    ++ran;
  }
  std::cout << "[ cuda     ] real models: " << compiled << " compiled to cuda model.so files, " << ran
            << " run on the device (a GPU, or the CUDA emulator with NNC_CUDA_EMULATE=1)\n";
  EXPECT_EQ(compiled, static_cast<int>(models.size()));
  EXPECT_EQ(ran, gpu ? compiled : 0);
}

TEST(CudaSharedLibrary, RealModelsCompileForCudaWithoutADevice) {
  std::string why;
  if (haveGpu(&why)) GTEST_SKIP() << "a CUDA device is present: RealModelsMatchOnnxRuntimeOnTheGpu covers this";
  checkRealModels(/*run=*/false);
}

TEST(CudaSharedLibrary, RealModelsMatchOnnxRuntimeOnTheGpu) {
  std::string why;
  if (!haveGpu(&why)) GTEST_SKIP() << "no CUDA driver/GPU: " << why;
  checkRealModels(/*run=*/true);
}

// --- the command line -------------------------------------------------------------------------

class CudaCli : public ::testing::Test {
 protected:
  void SetUp() override {
    caseDir_ = std::string(NNC_ONNX_NODE_TESTS) + "/test_softmax_axis_1";
    if (!fs::exists(caseDir_ + "/model.onnx")) GTEST_SKIP() << "no ONNX node test at " << caseDir_;
    ASSERT_FALSE(dir_.path().empty());
  }
  std::string caseDir_;
  ScratchDir dir_;
};

TEST_F(CudaCli, EmitCudaAndPtxNeedNoGpu) {
  const std::string model = caseDir_ + "/model.onnx";
  CliResult r = runNnc({model, "--target=cuda", "--emit=cuda"}, dir_.path());
  ASSERT_EQ(r.exitCode, 0) << r.err;
  EXPECT_NE(r.out.find("// Generated by nnc's CUDA backend."), std::string::npos);
  EXPECT_NE(r.out.find("extern \"C\" __global__ void nnc_k0_softmax("), std::string::npos) << r.out.substr(0, 3000);
  r = runNnc({model, "--target", "cuda", "--gpu-arch=sm_80", "--emit=ptx"}, dir_.path());
  ASSERT_EQ(r.exitCode, 0) << r.err;
  EXPECT_NE(r.out.find(".target sm_80"), std::string::npos);
  EXPECT_NE(r.out.find(".entry nnc_k0_softmax("), std::string::npos) << r.out.substr(0, 2000);

  r = runNnc({model, "--emit=cuda"}, dir_.path());
  EXPECT_EQ(r.exitCode, 1);
  EXPECT_EQ(r.err, "nnc: error: --emit=cuda needs --target=cuda\n");
  r = runNnc({model, "--allow-tf32", "--emit=plan"}, dir_.path());
  EXPECT_EQ(r.exitCode, 1);
  EXPECT_EQ(r.err, "nnc: error: --allow-tf32 needs --target=cuda\n");
  r = runNnc({model, "--target=cuda", "--allow-tf32", "--emit=plan"}, dir_.path());
  EXPECT_EQ(r.exitCode, 0) << r.err;
  EXPECT_NE(r.out.find("plan target=cuda"), std::string::npos) << r.out;
  r = runNnc({model, "--target=cuda", "--gpu-arch=compute_90", "--emit=ptx"}, dir_.path());
  EXPECT_EQ(r.exitCode, 1);
  EXPECT_NE(r.err.find("GPU architecture 'compute_90' is not a real architecture such as sm_80 or sm_90"),
            std::string::npos)
      << r.err;
  EXPECT_EQ(r.out, "");
}

TEST_F(CudaCli, CrossCompilesAModelSoThatRunsOnlyOnAGpu) {
  const std::string model = caseDir_ + "/model.onnx";
  CliResult r = runNnc({model, "-o", "softmax.so", "--target=cuda"}, dir_.path());
  ASSERT_EQ(r.exitCode, 0) << r.err;
  ASSERT_TRUE(fs::exists(dir_.path() + "/softmax.so"));
  r = runNnc({"run", "softmax.so", "--input", "x=" + caseDir_ + "/test_data_set_0/input_0.pb", "--output-dir", "out"},
             dir_.path());
  std::string why;
  if (!haveGpu(&why)) {  // the machine has no GPU: a clean failure that says why
    EXPECT_EQ(r.exitCode, 1);
    EXPECT_EQ(r.err, "nnc: error: softmax.so: no CUDA driver/GPU: " + why + "\n");
    EXPECT_FALSE(fs::exists(dir_.path() + "/out"));
    return;
  }
  ASSERT_EQ(r.exitCode, 0) << r.err;
  auto got = onnx::readTensorFile(dir_.path() + "/out/y.pb");
  auto want = onnx::readTensorFile(caseDir_ + "/test_data_set_0/output_0.pb");
  ASSERT_TRUE(got.isOk()) << got.status().message();
  ASSERT_TRUE(want.isOk()) << want.status().message();
  expectNear(*got, *want, 1e-5, 1e-6, "softmax");
}

}  // namespace
}  // namespace nnc::testing
