// CUDA backend without a GPU: the emitted source of representative kernels (key lines of the thread
// mapping, reductions, conversions), NVRTC compiles of them for sm_90 (cubin + PTX with each entry),
// errors, and the on-disk kernel cache.
#include "targets/cuda/codegen/cuda_emitter.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "targets/cuda/codegen/nvrtc_compiler.h"
#include "tests/cuda/cuda_test_kernels.h"

namespace nnc::codegen::cuda {
namespace {

namespace fs = std::filesystem;
using kir::ExprId;
using kir::ExprOp;
using kir::ReduceOp;

// The definition of kernel `name` in `code` (from its signature to the closing brace at column 0).
std::string definitionOf(const std::string& code, const std::string& name) {
  const std::string head = "extern \"C\" __global__ void " + name + "(";
  size_t at = code.find(head);
  at = code.find(head, at + 1);  // the first match is the declaration
  if (at == std::string::npos) return "";
  const size_t end = code.find("\n}\n", at);
  return code.substr(at, end == std::string::npos ? std::string::npos : end + 3 - at);
}

std::string emitOne(const kir::Kernel& k) {
  auto src = emitCudaSource({k});
  EXPECT_TRUE(src.isOk()) << src.status().message();
  return src.isOk() ? definitionOf(src->code, k.name) : "";
}

void expectContains(const std::string& text, const std::vector<std::string>& lines) {
  for (const std::string& l : lines)
    EXPECT_NE(text.find(l), std::string::npos) << "missing: " << l << "\nin:\n" << text;
}

// A private cache directory per test, removed afterwards.
class CacheDir {
 public:
  CacheDir()
      : path_(fs::temp_directory_path() /
              ("nnc_cuda_cache_" + std::to_string(::getpid()) + "_" + std::to_string(counter_++))) {
    fs::remove_all(path_);
  }
  ~CacheDir() { fs::remove_all(path_); }
  std::string str() const { return path_.string(); }

 private:
  static inline int counter_ = 0;
  fs::path path_;
};

TEST(CudaEmitter, PointwiseBroadcastAddIsAGridStrideLoop) {
  const std::string k = emitOne(testing::broadcastAdd());
  expectContains(
      k, {
             "extern \"C\" __global__ void bcast_add(const float* __restrict__ p0, const float* __restrict__ p1, "
             "float* p2, i64 begin, i64 end) {",
             "  // p1: 'b' f32[7]",
             "  for (i64 f = begin + (i64)blockIdx.x * blockDim.x + threadIdx.x; f < end; "
             "f += (i64)gridDim.x * blockDim.x) {",
             // The 5x7 outer domain unflattened in 32-bit arithmetic.
             "    const u32 q0 = (u32)f;",
             "    const i64 v1 = (i64)(q0 % 7u);",
             "    const i64 v0 = (i64)q1;",
             // b is indexed by the column only (the broadcast), each value is one typed temporary.
             "    const float t5 = p1[v1];",
             "    const float t6 = t4 + t5;",
             "    p2[t3] = t6;",
         });
  EXPECT_EQ(k.find("lane"), std::string::npos) << "a pointwise kernel uses no warps";
  EXPECT_EQ(k.find("p0[t3]"), k.rfind("p0[t3]")) << "the load of a is emitted once";
}

TEST(CudaEmitter, RowReductionSplitsLanesAndShuffles) {
  const std::string k = emitOne(testing::rowSum());
  expectContains(k, {
                        "  const int lane = threadIdx.x & 31;",
                        "    // reduction 0: sum over 100 elements",
                        "    float acc0 = (-0.0f);",
                        "    for (i64 j0 = lane; j0 < 100LL; j0 += 32) {",
                        "      acc0 = acc0 + t2;",
                        "    for (int m = 16; m > 0; m >>= 1) {",
                        "      const float other = nnc_shfl(acc0, m);",
                        "      acc0 = acc0 + other;",
                        "    const float red0 = acc0;",
                        "    if (lane == 0) {",
                        "      p1[f] = red0;",
                    });
}

// A full-mask shuffle must be run by every lane: inside the integer max's ?: (or bool's ||) only the
// lanes taking that branch would run it, which is undefined behaviour (on an H200 it gave wrong
// maxima in MaxPool over uint8 and MaxUnpool's index search).
TEST(CudaEmitter, WarpShufflesRunOnEveryLaneWhateverTheCombine) {
  for (DType t : {DType::U8, DType::I32, DType::I64, DType::Bool, DType::F32}) {
    const std::string k = emitOne(testing::rowMax(t));
    SCOPED_TRACE(k);
    const size_t shuffle = k.find("nnc_shfl(acc0, m)");
    ASSERT_NE(shuffle, std::string::npos);
    EXPECT_EQ(shuffle, k.rfind("nnc_shfl(acc0, m)")) << "one shuffle per step";
    const size_t lineStart = k.rfind('\n', shuffle) + 1;
    const std::string line = k.substr(lineStart, k.find('\n', shuffle) - lineStart);
    EXPECT_NE(line.find("const "), std::string::npos) << line;
    EXPECT_NE(line.find(" other = nnc_shfl(acc0, m);"), std::string::npos) << line;
  }
}

TEST(CudaEmitter, SoftmaxRowKernelHasTwoReductionsAndALaneSplitInnerLoop) {
  const std::string k = emitOne(testing::softmaxRows());
  expectContains(k, {
                        "    float acc0 = (-NNC_F32_INF);",
                        "      acc0 = nnc_fmax(acc0, t2);",
                        "    const float red0 = acc0;",
                        "      const float t6 = t5 - red0;",
                        "      const float t7 = expf(t6);",
                        "      acc1 = acc1 + t7;",
                        "    const float red1 = acc1;",
                        // The inner loop is split over the lanes; both reduction results are used directly.
                        "    for (i64 j8 = lane; j8 < 70LL; j8 += 32) {",
                        "      const float t12 = t11 - red0;",
                        "      const float t14 = t13 / red1;",
                        "      p1[t10] = t14;",
                    });
  EXPECT_EQ(k.find("if (lane == 0)"), std::string::npos) << "no per-point stores";
}

TEST(CudaEmitter, ArgMaxCarriesValueAndIndexWithTieRule) {
  const std::string k = emitOne(testing::argMaxMin());
  expectContains(k, {
                        "    bool ok0 = false;",
                        "    i64 idx0 = 0;",
                        "      if (nnc_arg_takes<float, true, false>(ok0, acc0, idx0, true, t2, j0)) {",
                        "      const i64 idxOther = nnc_shfl(idx0, m);",
                        "      if (nnc_arg_takes<float, true, false>(ok0, acc0, idx0, okOther, accOther, idxOther)) {",
                        "    // reduction 1: argmax over 5 elements (last index on ties)",
                        "nnc_arg_takes<float, true, true>",
                        "    float acc2 = (NNC_F32_INF);",
                        "nnc_arg_takes<float, false, true>",
                        "      p4[f] = red3;",
                    });
}

TEST(CudaEmitter, HalfStorageLoadsAsF32AndStoresRounded) {
  const std::string k = emitOne(testing::halfScale());
  expectContains(k, {
                        "(const u16* __restrict__ p0, u16* p1, i64 begin, i64 end)",
                        "    const float t0 = nnc_f16_to_f32(p0[f]);",
                        "    const float t1 = t0 * 2.0f;",
                        "    p1[f] = nnc_f32_to_f16(t2);",
                    });
}

TEST(CudaEmitter, IntegerOpsUseThePreludeHelpers) {
  const std::string k = emitOne(testing::intSemantics());
  expectContains(k, {"nnc_div(t0, t1)", "nnc_floordiv(t0, t1)", "nnc_rem(t0, t1)", "nnc_floormod(t0, t1)",
                     "nnc_sat_i32(t6)", "nnc_shl(t8, (u64)t9)", "nnc_shr(t8, (u64)t9)", "p8[f] = (i32)t10;"});
  // The prelude defines them with the interpreter's rules.
  const std::string prelude = preludeSource();
  expectContains(prelude, {"if (b == 0) return 0;", "return (b == 0 || b == -1) ? (T)0 : (T)(a % b);",
                           "s >= (BITS) ? (T)0", "if (v != v) return (T)0;", "u16 nnc_f32_to_f16(float f)"});
}

TEST(CudaEmitter, ModuleHasPreludeDeclarationsThenDefinitions) {
  auto src = emitCudaSource(testing::representativeKernels());
  ASSERT_TRUE(src.isOk()) << src.status().message();
  const std::string& code = src->code;
  const size_t prelude = code.find("typedef long long i64;");
  const size_t decls = code.find("// --- kernels (6)");
  const size_t decl = code.find(
      "extern \"C\" __global__ void row_sum(const float* __restrict__ p0, float* p1, "
      "i64 begin, i64 end);");
  const size_t def = code.find(
      "extern \"C\" __global__ void bcast_add(const float* __restrict__ p0, "
      "const float* __restrict__ p1, float* p2, i64 begin, i64 end) {");
  ASSERT_NE(prelude, std::string::npos);
  EXPECT_LT(prelude, decls);
  EXPECT_LT(decls, decl);
  EXPECT_LT(decl, def);
  ASSERT_EQ(src->kernels.size(), 6u);
  EXPECT_EQ(src->kernels[0].mapping, ThreadMapping::ThreadPerPoint);
  EXPECT_EQ(src->kernels[1].mapping, ThreadMapping::WarpPerPoint);
  EXPECT_EQ(src->kernels[1].outerSize, 6);
}

TEST(CudaEmitter, LaunchDims) {
  EXPECT_EQ(launchDims(ThreadMapping::ThreadPerPoint, 1000).gridX, 4u);
  EXPECT_EQ(launchDims(ThreadMapping::WarpPerPoint, 1000).gridX, 125u);  // 8 warps per block
  EXPECT_EQ(launchDims(ThreadMapping::ThreadPerPoint, 0).gridX, 1u);
  EXPECT_EQ(launchDims(ThreadMapping::ThreadPerPoint, int64_t{1} << 40).gridX, 65536u);
  EXPECT_EQ(launchDims(ThreadMapping::WarpPerPoint, 7).blockX, 256u);
}

// --- vectorised pointwise kernels

TEST(CudaEmitter, VectorisedPointwiseHasVectorAccessesAndAScalarFallback) {
  const kir::Kernel kernel = testing::broadcastAdd(64, 256);
  const KernelMapping m = chooseMapping(kernel);
  EXPECT_EQ(m.mapping, ThreadMapping::ThreadPerVector);
  EXPECT_EQ(m.vectorWidth, 4);
  const std::string k = emitOne(kernel);
  expectContains(
      k,
      {
          // One uniform test per launch: every vector-accessed pointer aligned, begin/end multiples of 4.
          "  const bool vectorised = (((u64)p0 & 15u) | ((u64)p1 & 15u) | ((u64)p2 & 15u)) == 0 && begin % 4 == 0 && "
          "end % 4 == 0;",
          // The scalar fallback: the thread-per-point loop.
          "  if (!vectorised) {",
          "    for (i64 f = begin + (i64)blockIdx.x * blockDim.x + threadIdx.x; f < end; "
          "f += (i64)gridDim.x * blockDim.x) {",
          "      const float t5 = p1[v1];",
          "      p2[t3] = t6;",
          "    return;",
          // The vector path: 4 points of one row per thread.
          "  for (i64 g = begin / 4 + (i64)blockIdx.x * blockDim.x + threadIdx.x; g < end / 4; "
          "g += (i64)gridDim.x * blockDim.x) {",
          "    const i64 f = g * 4;",
          "    const nnc_vec<float, 4> ld11 = *reinterpret_cast<const nnc_vec<float, 4>*>(p1 + v1);",
          "    const nnc_vec<float, 4> ld12 = *reinterpret_cast<const nnc_vec<float, 4>*>(p0 + t10);",
          "    nnc_vec<float, 4> st13;",
          "    #pragma unroll",
          "    for (int ln = 0; ln < 4; ++ln) {",
          "      const float t14 = ld12.v[ln] + ld11.v[ln];",
          "      st13.v[ln] = t14;",
          "    *reinterpret_cast<nnc_vec<float, 4>*>(p2 + t10) = st13;",
      });
  // The vector type the casts use is in the prelude, 16-byte aligned for 4 floats.
  expectContains(preludeSource(), {"struct __align__(sizeof(T) * N) nnc_vec {"});
}

TEST(CudaEmitter, BroadcastValuesAreLoadedOncePerVector) {
  // out[i, j] = a[i, j] + c[i]: c[i] is the same for the 4 points of a vector.
  const std::string k = emitOne(testing::rowBiasAdd(16, 64));
  expectContains(
      k, {
             "  const bool vectorised = (((u64)p0 & 15u) | ((u64)p2 & 15u)) == 0 && begin % 4 == 0 && end % 4 == 0;",
             "    const float t10 = p1[v0];",
             "    const nnc_vec<float, 4> ld12 = *reinterpret_cast<const nnc_vec<float, 4>*>(p0 + t11);",
             "      const float t14 = ld12.v[ln] + t10;",
         });
  const size_t lanes = k.find("for (int ln = 0;");
  ASSERT_NE(lanes, std::string::npos);
  EXPECT_LT(k.find("p1[v0]", k.find("const i64 f = g * 4;")), lanes) << "the broadcast load is outside the lanes";
  EXPECT_EQ(k.find("p1 +"), std::string::npos) << "no vector load of the broadcast operand";
}

TEST(CudaEmitter, UnitStrideLoadsFromAnUnalignedBaseAreScalarPerLane) {
  // a[i, j + 1]: contiguous, but 1 element past a 16-byte boundary: scalar loads in the lanes,
  // the store is still one vector.
  const std::string k = emitOne(testing::shiftedCopy(4, 8, 1));
  EXPECT_EQ(vectorWidth(testing::shiftedCopy(4, 8, 1)), 4);
  expectContains(k, {
                        "  const bool vectorised = (((u64)p1 & 15u)) == 0 && begin % 4 == 0 && end % 4 == 0;",
                        "      const i64 t14 = (i64)((u64)t10 + (u64)(v1 + ln));",
                        "      const float t16 = p0[t15];",
                        "    *reinterpret_cast<nnc_vec<float, 4>*>(p1 + t12) = st13;",
                    });
  EXPECT_EQ(k.find("reinterpret_cast<const"), std::string::npos) << k;
  // Shifted by 4 elements the base is aligned again: a vector load.
  const std::string aligned = emitOne(testing::shiftedCopy(4, 8, 4));
  EXPECT_NE(aligned.find("*reinterpret_cast<const nnc_vec<float, 4>*>(p0 + "), std::string::npos) << aligned;
}

TEST(CudaEmitter, VectorWidthIs16BytesOfTheWidestElement) {
  struct Case {
    DType t;
    int width;
  };
  for (Case c :
       {Case{DType::F64, 2}, Case{DType::I64, 2}, Case{DType::F32, 4}, Case{DType::I32, 4}, Case{DType::F16, 8},
        Case{DType::BF16, 8}, Case{DType::I16, 8}, Case{DType::U8, 16}, Case{DType::I8, 16}, Case{DType::Bool, 16}}) {
    EXPECT_EQ(vectorWidth(testing::mulOf(c.t, 64)), c.width) << dtypeName(c.t);
    // The innermost extent must be a multiple of the width.
    EXPECT_EQ(vectorWidth(testing::mulOf(c.t, 64 + c.width / 2)), 1) << dtypeName(c.t);
  }
  // Mixed sizes: the f32 load sets the width (4); the f16 and bool stores move 8 and 4 bytes.
  const kir::Kernel mixed = testing::leakyReluToHalf(64);
  EXPECT_EQ(vectorWidth(mixed), 4);
  expectContains(emitOne(mixed), {
                                     "(((u64)p0 & 15u) | ((u64)p1 & 7u) | ((u64)p2 & 3u)) == 0",
                                     "    nnc_vec<u16, 4> st5;",
                                     "      st5.v[ln] = nnc_f32_to_f16(t9);",
                                     "    *reinterpret_cast<nnc_vec<u8, 4>*>(p2 + f) = st6;",
                                 });
  // f16 loads and stores: 8 per thread.
  EXPECT_EQ(vectorWidth(testing::halfScale(512)), 8);
  EXPECT_NE(emitOne(testing::halfScale(512)).find("nnc_f16_to_f32(ld"), std::string::npos);
}

TEST(CudaEmitter, KernelsThatDoNotQualifyStayScalar) {
  EXPECT_EQ(vectorWidth(testing::transpose(8, 64)), 1) << "strided loads";
  EXPECT_EQ(vectorWidth(testing::broadcastAdd(5, 7)), 1) << "rows of 7 are no multiple of 4";
  EXPECT_EQ(vectorWidth(testing::halfScale(300)), 1) << "300 is no multiple of 8";
  EXPECT_EQ(vectorWidth(testing::softmaxRows(4, 64)), 1) << "reductions";
  EXPECT_EQ(threadMapping(testing::transpose(8, 64)), ThreadMapping::ThreadPerPoint);
  EXPECT_EQ(emitOne(testing::transpose(8, 64)).find("vectorised"), std::string::npos);
  // A gather: the load index goes through another load.
  kir::KernelBuilder kb("gather_rows");
  int table = kb.addParam("table", DType::F32, 16 * 8, false);
  int ids = kb.addParam("ids", DType::I64, 64, false);
  int out = kb.addParam("out", DType::F32, 64, true);
  auto v = kb.setOuter({64});
  kb.addStore(out, v[0], kb.load(table, kb.add(kb.mul(kb.load(ids, v[0]), kb.i64(8)), kb.i64(1))), false);
  EXPECT_EQ(vectorWidth(kb.finish()), 1);
  // Trailing extent-1 dimensions do not hide the innermost varying one.
  kir::KernelBuilder kt("trailing_ones");
  int x = kt.addParam("x", DType::F32, 32, false);
  int y = kt.addParam("y", DType::F32, 32, true);
  auto w = kt.setOuter({32, 1, 1});
  kt.addStore(y, w[0], kt.load(x, kt.add(w[0], kt.add(w[1], w[2]))), false);
  EXPECT_EQ(vectorWidth(kt.finish()), 4);
}

// --- reduction mappings

TEST(CudaEmitter, ReductionMappingFollowsLoopAndDomainSizes) {
  EXPECT_EQ(threadMapping(testing::rowSum(8, 8192)), ThreadMapping::BlockPerPoint);
  EXPECT_EQ(threadMapping(testing::rowSum(2047, 4096)), ThreadMapping::BlockPerPoint);
  EXPECT_EQ(threadMapping(testing::rowSum(2048, 4096)), ThreadMapping::WarpPerPoint) << "enough rows for warps";
  EXPECT_EQ(threadMapping(testing::rowSum(8, 4095)), ThreadMapping::WarpPerPoint);
  EXPECT_EQ(threadMapping(testing::rowSum(8192, 4)), ThreadMapping::ThreadPerPoint);
  EXPECT_EQ(threadMapping(testing::rowSum(4096, 32)), ThreadMapping::ThreadPerPoint);
  EXPECT_EQ(threadMapping(testing::rowSum(4096, 33)), ThreadMapping::WarpPerPoint);
  EXPECT_EQ(threadMapping(testing::rowSum(4095, 4)), ThreadMapping::WarpPerPoint) << "too few points";
  EXPECT_EQ(threadMapping(testing::rowSum(6, 100)), ThreadMapping::WarpPerPoint);
  // The inner loop counts as work per point too.
  EXPECT_EQ(threadMapping(testing::softmaxRows(8192, 16)), ThreadMapping::ThreadPerPoint);
  EXPECT_EQ(threadMapping(testing::softmaxRows(8192, 64)), ThreadMapping::WarpPerPoint);
  EXPECT_EQ(threadMapping(testing::softmaxRows(4, 5000)), ThreadMapping::BlockPerPoint);
}

TEST(CudaEmitter, LargeRowReductionUsesABlockWithSharedMemoryAndShuffles) {
  const std::string k = emitOne(testing::rowSum(8, 8192));
  expectContains(k, {
                        "  __shared__ float smem0[32];",
                        "  const int warp = threadIdx.x >> 5;",
                        "  const int warps = blockDim.x >> 5;",
                        "  for (i64 f = begin + (i64)blockIdx.x; f < end; f += (i64)gridDim.x) {",
                        "    float acc0 = (-0.0f);",
                        "    for (i64 j0 = threadIdx.x; j0 < 8192LL; j0 += blockDim.x) {",
                        "      const float other = nnc_shfl(acc0, m);",
                        "      acc0 = acc0 + other;",
                        "    if (lane == 0) smem0[warp] = acc0;",
                        "    __syncthreads();",
                        "    acc0 = smem0[0];",
                        "    for (int w = 1; w < warps; ++w) acc0 = acc0 + smem0[w];",
                        "    __syncthreads();  // smem0 is rewritten for the next point",
                        "    if (threadIdx.x == 0) {",
                        "      p1[f] = red0;",
                    });
  // ArgMax: (ok, value, index) per warp through shared memory, folded with the tie rule.
  expectContains(
      emitOne(testing::argMaxMin(4, 5000)),
      {
          "  __shared__ bool smemOk1[32];",
          "  __shared__ i64 smemIdx1[32];",
          "      smemIdx0[warp] = idx0;",
          "      if (nnc_arg_takes<float, true, false>(ok0, acc0, idx0, smemOk0[w], smem0[w], smemIdx0[w])) {",
          "      if (nnc_arg_takes<float, false, true>(ok3, acc3, idx3, smemOk3[w], smem3[w], smemIdx3[w])) {",
      });
  // Softmax: both reductions per block, the inner loop split over the block's threads.
  expectContains(emitOne(testing::softmaxRows(4, 5000)),
                 {
                     "    for (int w = 1; w < warps; ++w) acc0 = nnc_fmax(acc0, smem0[w]);",
                     "    for (i64 j8 = threadIdx.x; j8 < 5000LL; j8 += blockDim.x) {",
                     "      const float t14 = t13 / red1;",
                 });
}

TEST(CudaEmitter, TinyReductionsRunSequentiallyInOneThread) {
  const std::string k = emitOne(testing::rowSum(8192, 4));
  expectContains(k, {
                        "  for (i64 f = begin + (i64)blockIdx.x * blockDim.x + threadIdx.x; f < end; "
                        "f += (i64)gridDim.x * blockDim.x) {",
                        "    float acc0 = (-0.0f);",
                        "    for (i64 j0 = 0; j0 < 4LL; ++j0) {",
                        "      acc0 = acc0 + t2;",
                        "    const float red0 = acc0;",
                        "    p1[f] = red0;",
                    });
  for (const char* absent : {"lane", "nnc_shfl", "__syncthreads", "__shared__"})
    EXPECT_EQ(k.find(absent), std::string::npos) << absent;
  // ArgMax scans in order with the interpreter's rule; nothing to combine.
  const std::string arg = emitOne(testing::argMaxMin(8192, 5));
  expectContains(arg,
                 {"    for (i64 j1 = 0; j1 < 5LL; ++j1) {",
                  "      if (nnc_arg_takes<float, true, true>(ok1, acc1, idx1, true, t5, j1)) {", "    p2[f] = red1;"});
  EXPECT_EQ(arg.find("nnc_shfl"), std::string::npos);
}

TEST(CudaEmitter, LaunchDimsOfTheNewMappings) {
  EXPECT_EQ(launchDims(ThreadMapping::ThreadPerVector, 1024, 4).gridX, 1u);  // 256 threads x 4 points
  EXPECT_EQ(launchDims(ThreadMapping::ThreadPerVector, 1028, 4).gridX, 2u);
  EXPECT_EQ(launchDims(ThreadMapping::ThreadPerVector, 4096, 16).gridX, 1u);
  EXPECT_EQ(launchDims(ThreadMapping::ThreadPerVector, 4096, 2).gridX, 8u);
  EXPECT_EQ(launchDims(ThreadMapping::BlockPerPoint, 7).gridX, 7u);
  EXPECT_EQ(launchDims(ThreadMapping::BlockPerPoint, 7).blockX, 256u);
  EXPECT_EQ(launchDims(ThreadMapping::BlockPerPoint, int64_t{1} << 40).gridX, 65536u);
  const KernelMapping m = chooseMapping(testing::broadcastAdd(64, 256));
  EXPECT_EQ(planMapping(m), rt::GpuMapping::ThreadPerVector4);
  EXPECT_EQ(launchDims(m, 64 * 256).gridX, 16u);
  auto src = emitCudaSource({testing::broadcastAdd(64, 256), testing::renamed(testing::rowSum(8, 8192), "a"),
                             testing::renamed(testing::rowSum(8192, 4), "b"), testing::rowSum()});
  ASSERT_TRUE(src.isOk()) << src.status().message();
  EXPECT_EQ(src->kernels[0].gpuMapping, rt::GpuMapping::ThreadPerVector4);
  EXPECT_EQ(src->kernels[0].vectorWidth, 4);
  EXPECT_EQ(src->kernels[1].gpuMapping, rt::GpuMapping::BlockPerPoint);
  EXPECT_EQ(src->kernels[2].gpuMapping, rt::GpuMapping::ThreadPerPoint);
  EXPECT_EQ(src->kernels[3].gpuMapping, rt::GpuMapping::WarpPerPoint);
}

TEST(CudaEmitter, ErrorsNameTheKernel) {
  kir::KernelBuilder kb("bad_op");
  int x = kb.addParam("x", DType::F32, 4, false);
  int out = kb.addParam("out", DType::F32, 4, true);
  auto v = kb.setOuter({4});
  kb.addStore(out, v[0], kb.unary(kir::ExprOp::BitNot, kb.load(x, v[0])), false);
  auto src = emitCudaSource({kb.finish()});
  ASSERT_FALSE(src.isOk());
  EXPECT_EQ(src.status().message(), "kernel 'bad_op': e2: bitnot on f32 is not supported by the cuda backend");

  auto dup = emitCudaSource({testing::rowSum(), testing::rowSum()});
  ASSERT_FALSE(dup.isOk());
  EXPECT_EQ(dup.status().message(), "cuda backend: duplicate kernel name 'row_sum'");
  kir::KernelBuilder named("not-an-identifier");
  auto badName = emitCudaSource({named.finish()});
  ASSERT_FALSE(badName.isOk());
  EXPECT_EQ(badName.status().message(), "cuda backend: kernel name 'not-an-identifier' is not a C identifier");
}

TEST(Nvrtc, RepresentativeKernelsCompileForSm90WithEntries) {
  CacheDir cache;
  NvrtcOptions opts;
  opts.cacheDir = cache.str();
  for (const kir::Kernel& k : testing::representativeKernels()) {
    auto src = emitCudaSource({k});
    ASSERT_TRUE(src.isOk()) << src.status().message();
    auto compiled = compileCuda(src->code, k.name, opts);
    ASSERT_TRUE(compiled.isOk()) << compiled.status().message();
    EXPECT_FALSE(compiled->fromCache);
    EXPECT_EQ(compiled->log, "") << k.name << ": NVRTC warned";
    ASSERT_GT(compiled->cubin.size(), 4u) << k.name;
    EXPECT_EQ(std::string(compiled->cubin.begin(), compiled->cubin.begin() + 4),
              "\x7f"
              "ELF")
        << k.name;
    EXPECT_NE(compiled->ptx.find(".target sm_90"), std::string::npos) << k.name;
    EXPECT_NE(compiled->ptx.find(".entry " + k.name + "("), std::string::npos) << k.name;
    // extern "C": the cubin's symbol is the plain name.
    const std::string cubin(compiled->cubin.begin(), compiled->cubin.end());
    EXPECT_NE(cubin.find(k.name + std::string(1, '\0')), std::string::npos) << k.name;
  }
}

// The kernels of the new mappings compile without warnings, and the PTX has what the mapping is for:
// 16-byte vector loads/stores, shared memory with barriers and butterfly shuffles.
TEST(Nvrtc, NewMappingsCompileForSm90) {
  const std::vector<kir::Kernel> kernels = testing::mappingKernels();
  auto src = emitCudaSource(kernels);
  ASSERT_TRUE(src.isOk()) << src.status().message();
  NvrtcOptions opts;
  opts.useCache = false;
  auto compiled = compileCuda(src->code, "new_mappings", opts);
  ASSERT_TRUE(compiled.isOk()) << compiled.status().message();
  EXPECT_EQ(compiled->log, "");
  auto entry = [&](const std::string& name) {
    const size_t at = compiled->ptx.find(".entry " + name + "(");
    EXPECT_NE(at, std::string::npos) << name;
    const size_t end = compiled->ptx.find(".entry ", at + 1);
    return compiled->ptx.substr(at, end == std::string::npos ? std::string::npos : end - at);
  };
  for (const kir::Kernel& k : kernels) entry(k.name);
  const std::string vec = entry("bcast_add_vec");
  EXPECT_NE(vec.find("ld.global.nc.v4.f32"), std::string::npos) << vec;
  EXPECT_NE(vec.find("st.global.v4.f32"), std::string::npos) << vec;
  EXPECT_NE(vec.find("ld.global.nc.f32"), std::string::npos) << "the scalar fallback";
  const std::string bytes = entry("mul_u8_vec");
  EXPECT_NE(bytes.find("ld.global.nc.v4.u32"), std::string::npos) << "16 bytes as one access";
  const std::string block = entry("row_sum_block");
  EXPECT_NE(block.find("bar.sync"), std::string::npos);
  EXPECT_NE(block.find("shfl.sync.bfly"), std::string::npos);
  EXPECT_NE(block.find(".shared"), std::string::npos);
  const std::string tiny = entry("row_sum_tiny");
  EXPECT_EQ(tiny.find("shfl.sync"), std::string::npos);
  EXPECT_EQ(tiny.find("bar.sync"), std::string::npos);
}

TEST(Nvrtc, AllRepresentativeKernelsInOneTranslationUnit) {
  CacheDir cache;
  NvrtcOptions opts;
  opts.cacheDir = cache.str();
  opts.arch = "sm_80";
  auto src = emitCudaSource(testing::representativeKernels());
  ASSERT_TRUE(src.isOk()) << src.status().message();
  auto compiled = compileCuda(src->code, "representative", opts);
  ASSERT_TRUE(compiled.isOk()) << compiled.status().message();
  EXPECT_NE(compiled->ptx.find(".target sm_80"), std::string::npos);
  for (const EmittedKernel& k : src->kernels)
    EXPECT_NE(compiled->ptx.find(".entry " + k.name + "("), std::string::npos) << k.name;
}

// Every op of expr_ops.def on every value dtype it allows, every cast between value dtypes, every
// reduction on every dtype, and f16/bf16/bool storage: the emitted source compiles without warnings.
TEST(Nvrtc, EveryOpAndDtypeCompiles) {
  const DType types[] = {DType::Bool, DType::I8,  DType::U8,  DType::I16, DType::U16, DType::I32,
                         DType::U32,  DType::I64, DType::U64, DType::F32, DType::F64};
  const ExprOp floatUnary[] = {
      ExprOp::Neg,       ExprOp::Abs,   ExprOp::Exp,   ExprOp::Log,        ExprOp::Sqrt,
      ExprOp::Sin,       ExprOp::Cos,   ExprOp::Tan,   ExprOp::Asin,       ExprOp::Acos,
      ExprOp::Atan,      ExprOp::Sinh,  ExprOp::Cosh,  ExprOp::Tanh,       ExprOp::Asinh,
      ExprOp::Acosh,     ExprOp::Atanh, ExprOp::Erf,   ExprOp::Floor,      ExprOp::Ceil,
      ExprOp::RoundEven, ExprOp::Trunc, ExprOp::IsNaN, ExprOp::RoundToF16, ExprOp::RoundToBF16};
  const ExprOp intUnary[] = {ExprOp::Neg, ExprOp::Abs, ExprOp::BitNot, ExprOp::Floor, ExprOp::Ceil};
  const ExprOp arith[] = {ExprOp::Add,      ExprOp::Sub, ExprOp::Mul, ExprOp::Div, ExprOp::Rem,
                          ExprOp::FloorMod, ExprOp::Pow, ExprOp::Min, ExprOp::Max, ExprOp::Eq,
                          ExprOp::Ne,       ExprOp::Lt,  ExprOp::Le,  ExprOp::Gt,  ExprOp::Ge};
  const ExprOp intOnly[] = {ExprOp::FloorDiv, ExprOp::BitAnd, ExprOp::BitOr, ExprOp::BitXor};
  const ReduceOp reductions[] = {ReduceOp::Sum, ReduceOp::Prod,   ReduceOp::Max,
                                 ReduceOp::Min, ReduceOp::ArgMax, ReduceOp::ArgMin};
  std::vector<kir::Kernel> kernels;
  for (DType t : types) {
    const std::string tn(dtypeName(t));
    kir::KernelBuilder kb("ops_" + tn);
    int a = kb.addParam("a", t, 64, false), b = kb.addParam("b", t, 64, false);
    int out = kb.addParam("out", DType::F64, 64, true);
    auto v = kb.setOuter({64});
    ExprId x = kb.load(a, v[0]), y = kb.load(b, v[0]);
    std::vector<ExprId> results;
    if (isFloat(t)) {
      for (ExprOp op : floatUnary) results.push_back(kb.unary(op, x));
      results.push_back(kb.isInf(x, true, true));
      results.push_back(kb.binary(ExprOp::FloorDiv, x, y));
    } else if (t == DType::Bool) {
      results.push_back(kb.unary(ExprOp::Not, x));
      for (ExprOp op : {ExprOp::And, ExprOp::Or, ExprOp::Xor, ExprOp::Add, ExprOp::Mul, ExprOp::Max})
        results.push_back(kb.binary(op, x, y));
    } else {
      for (ExprOp op : intUnary) results.push_back(kb.unary(op, x));
      for (ExprOp op : intOnly) results.push_back(kb.binary(op, x, y));
      for (ExprOp op : {ExprOp::Shl, ExprOp::Shr}) results.push_back(kb.binary(op, x, kb.load(b, v[0])));
    }
    if (t != DType::Bool)
      for (ExprOp op : arith) results.push_back(kb.binary(op, x, y));
    for (DType to : types) results.push_back(kb.cast(to, x));
    results.push_back(kb.select(kb.lt(x, y), x, y));
    ExprId total = kb.constant(DType::F64, 0);
    for (ExprId r : results) total = kb.add(total, kb.cast(DType::F64, r));
    kb.addStore(out, v[0], total, false);
    kernels.push_back(kb.finish());

    kir::KernelBuilder rb("reduce_" + tn);
    int x2 = rb.addParam("x", t, 6 * 40, false);
    int o = rb.addParam("o", t, 6, true);
    int oi = rb.addParam("oi", DType::I64, 6, true);
    auto w = rb.setOuter({6});
    ExprId acc = rb.i64(0);
    for (ReduceOp op : reductions) {
      auto r = rb.reductionVars({40});
      ExprId red = rb.reduce(op, r, rb.load(x2, rb.add(rb.mul(w[0], rb.i64(40)), r[0])));
      if (op == ReduceOp::ArgMax || op == ReduceOp::ArgMin)
        acc = rb.add(acc, red);
      else
        rb.addStore(o, w[0], red, false);
    }
    auto empty = rb.reductionVars({0});
    rb.addStore(o, w[0], rb.reduce(ReduceOp::Min, empty, rb.load(x2, empty[0])), false);
    rb.addStore(oi, w[0], acc, false);
    kernels.push_back(rb.finish());
  }
  for (DType storage : {DType::F16, DType::BF16, DType::Bool}) {
    kir::KernelBuilder kb(std::string("storage_") + std::string(dtypeName(storage)));
    int a = kb.addParam("a", storage, 10, false);
    int out = kb.addParam("out", storage, 10, true);
    int outF = kb.addParam("out_f64", DType::F64, 10, true);
    auto v = kb.setOuter({10});
    kb.addStore(out, v[0], kb.load(a, v[0]), false);
    kb.addStore(outF, v[0], kb.cast(DType::F64, kb.load(a, v[0])), false);
    kernels.push_back(kb.finish());
  }
  auto src = emitCudaSource(kernels);
  ASSERT_TRUE(src.isOk()) << src.status().message();
  NvrtcOptions opts;
  opts.useCache = false;
  auto compiled = compileCuda(src->code, "every_op", opts);
  ASSERT_TRUE(compiled.isOk()) << compiled.status().message();
  EXPECT_EQ(compiled->log, "");
  for (const kir::Kernel& k : kernels)
    EXPECT_NE(compiled->ptx.find(".entry " + k.name + "("), std::string::npos) << k.name;
}

TEST(Nvrtc, CompileErrorReturnsTheLogNamingTheKernel) {
  NvrtcOptions opts;
  opts.useCache = false;
  auto r = compileCuda("extern \"C\" __global__ void k(float* p) { p[0] = undefined_name; }", "nnc_k7_broken", opts);
  ASSERT_FALSE(r.isOk());
  const std::string& msg = r.status().message();
  EXPECT_EQ(msg.rfind("kernel 'nnc_k7_broken': nvrtc: NVRTC_ERROR_COMPILATION", 0), 0u) << msg;
  EXPECT_NE(msg.find("identifier \"undefined_name\" is undefined"), std::string::npos) << msg;

  opts.arch = "sm_1";
  auto badArch = compileCuda("extern \"C\" __global__ void k() {}", "k", opts);
  ASSERT_FALSE(badArch.isOk());
  EXPECT_EQ(badArch.status().message().rfind("kernel 'k': nvrtc: ", 0), 0u) << badArch.status().message();
}

TEST(Nvrtc, SecondCompileIsACacheHit) {
  CacheDir cache;
  NvrtcOptions opts;
  opts.cacheDir = cache.str();
  auto src = emitCudaSource({testing::softmaxRows()});
  ASSERT_TRUE(src.isOk());
  const KernelCacheStats before = kernelCacheStats();
  auto first = compileCuda(src->code, "softmax_rows", opts);
  ASSERT_TRUE(first.isOk()) << first.status().message();
  auto second = compileCuda(src->code, "softmax_rows", opts);
  ASSERT_TRUE(second.isOk()) << second.status().message();
  const KernelCacheStats after = kernelCacheStats();
  EXPECT_FALSE(first->fromCache);
  EXPECT_TRUE(second->fromCache);
  EXPECT_EQ(after.misses - before.misses, 1);
  EXPECT_EQ(after.hits - before.hits, 1);
  EXPECT_EQ(after.writes - before.writes, 1);
  EXPECT_EQ(second->cubin, first->cubin);
  EXPECT_EQ(second->ptx, first->ptx);
  // One entry, no temporary left behind.
  int entries = 0;
  for (const auto& e : fs::directory_iterator(cache.str())) {
    ++entries;
    EXPECT_EQ(e.path().extension(), ".nvcache") << e.path();
  }
  EXPECT_EQ(entries, 1);

  // Another architecture or other options are different keys.
  NvrtcOptions other = opts;
  other.arch = "sm_80";
  auto third = compileCuda(src->code, "softmax_rows", other);
  ASSERT_TRUE(third.isOk());
  EXPECT_FALSE(third->fromCache);
  other = opts;
  other.extraOptions = {"-lineinfo"};
  auto fourth = compileCuda(src->code, "softmax_rows", other);
  ASSERT_TRUE(fourth.isOk());
  EXPECT_FALSE(fourth->fromCache);
}

TEST(Nvrtc, CorruptCacheEntryIsAMissAndGetsRewritten) {
  CacheDir cache;
  NvrtcOptions opts;
  opts.cacheDir = cache.str();
  auto src = emitCudaSource({testing::rowSum()});
  ASSERT_TRUE(src.isOk());
  ASSERT_TRUE(compileCuda(src->code, "row_sum", opts).isOk());
  fs::path entry = fs::directory_iterator(cache.str())->path();
  fs::resize_file(entry, 30);  // truncated: sizes no longer match
  auto again = compileCuda(src->code, "row_sum", opts);
  ASSERT_TRUE(again.isOk()) << again.status().message();
  EXPECT_FALSE(again->fromCache);
  auto third = compileCuda(src->code, "row_sum", opts);
  ASSERT_TRUE(third.isOk());
  EXPECT_TRUE(third->fromCache);
  EXPECT_EQ(third->cubin, again->cubin);
}

TEST(Nvrtc, CacheDirectoryComesFromTheEnvironment) {
  const char* old = std::getenv("NNC_CACHE_DIR");
  const std::string saved = old ? old : "";
  ::setenv("NNC_CACHE_DIR", "/tmp/nnc-env-cache", 1);
  EXPECT_EQ(kernelCacheDir({}), "/tmp/nnc-env-cache");
  NvrtcOptions explicitDir;
  explicitDir.cacheDir = "/tmp/x";
  EXPECT_EQ(kernelCacheDir(explicitDir), "/tmp/x");
  ::unsetenv("NNC_CACHE_DIR");
  const char* home = std::getenv("HOME");
  if (home) {
    EXPECT_EQ(kernelCacheDir({}), std::string(home) + "/.cache/nnc/kernels");
  }
  if (old) ::setenv("NNC_CACHE_DIR", saved.c_str(), 1);
  EXPECT_NE(nvrtcVersionString(), "unknown");
}

}  // namespace
}  // namespace nnc::codegen::cuda
