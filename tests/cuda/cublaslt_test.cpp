// The cuBLASLt wrapper (runtime/cuda/cublaslt.h) without a GPU: its ABI declarations against the
// official header, library loading and its errors, the row-major -> column-major mapping (replayed on
// the CPU with cuBLASLt's documented semantics), descriptor setup up to the heuristic with the real
// library, and every call GemmRunner makes, recorded by a stand-in cuBLASLt. GPU runs:
// cublaslt_gpu_test.cpp.
#include <gtest/gtest.h>

// The toolkit's header, for the ABI checks only (a toolkit with NVRTC but without cuBLAS skips them).
#if __has_include(<cublasLt.h>)
#include <cublasLt.h>
#define NNC_HAVE_CUBLASLT_H 1
#endif

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include "runtime/cuda/cublaslt.h"
#include "tests/cuda/cublaslt_test_util.h"

namespace nnc::rt::cuda {
namespace {

using namespace testing;  // NOLINT: the shared GEMM cases

// ---- ABI: every declaration equals cublasLt.h's (where the toolkit's headers are installed) ----

#ifdef NNC_HAVE_CUBLASLT_H

static_assert(lt::kStatusSuccess == CUBLAS_STATUS_SUCCESS);
static_assert(lt::kOpN == CUBLAS_OP_N && lt::kOpT == CUBLAS_OP_T);
static_assert(lt::kCompute32F == CUBLAS_COMPUTE_32F && lt::kCompute32FFastTf32 == CUBLAS_COMPUTE_32F_FAST_TF32 &&
              lt::kCompute64F == CUBLAS_COMPUTE_64F);
static_assert(lt::kDataR32F == CUDA_R_32F && lt::kDataR64F == CUDA_R_64F);
static_assert(lt::kDescTransA == CUBLASLT_MATMUL_DESC_TRANSA && lt::kDescTransB == CUBLASLT_MATMUL_DESC_TRANSB &&
              lt::kDescEpilogue == CUBLASLT_MATMUL_DESC_EPILOGUE &&
              lt::kDescBiasPointer == CUBLASLT_MATMUL_DESC_BIAS_POINTER);
static_assert(lt::kEpilogueDefault == static_cast<uint32_t>(CUBLASLT_EPILOGUE_DEFAULT) &&
              lt::kEpilogueRelu == static_cast<uint32_t>(CUBLASLT_EPILOGUE_RELU) &&
              lt::kEpilogueBias == static_cast<uint32_t>(CUBLASLT_EPILOGUE_BIAS) &&
              lt::kEpilogueReluBias == static_cast<uint32_t>(CUBLASLT_EPILOGUE_RELU_BIAS));
static_assert(lt::kLayoutBatchCount == CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT &&
              lt::kLayoutStridedBatchOffset == CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET);
static_assert(lt::kPrefMaxWorkspaceBytes == CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES &&
              lt::kPrefMinAlignmentABytes == CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES &&
              lt::kPrefMinAlignmentBBytes == CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES &&
              lt::kPrefMinAlignmentCBytes == CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES &&
              lt::kPrefMinAlignmentDBytes == CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES);
static_assert(sizeof(CublasStatus) == sizeof(cublasStatus_t));

static_assert(sizeof(CublasLtMatmulAlgo) == sizeof(cublasLtMatmulAlgo_t));
static_assert(alignof(CublasLtMatmulAlgo) == alignof(cublasLtMatmulAlgo_t));
static_assert(sizeof(CublasLtHeuristicResult) == sizeof(cublasLtMatmulHeuristicResult_t));
static_assert(offsetof(CublasLtHeuristicResult, workspaceSize) ==
              offsetof(cublasLtMatmulHeuristicResult_t, workspaceSize));
static_assert(offsetof(CublasLtHeuristicResult, state) == offsetof(cublasLtMatmulHeuristicResult_t, state));
static_assert(offsetof(CublasLtHeuristicResult, wavesCount) == offsetof(cublasLtMatmulHeuristicResult_t, wavesCount));

// Whether our parameter type passes like the header's: the same type, an int of an enum's size, or
// pointers whose targets are compatible (void and structs stand for opaque handles and the structs
// whose layout is checked above).
template <class Ours, class Theirs>
constexpr bool abiCompatible();

template <class Ours, class Theirs>
constexpr bool pointeeCompatible() {
  using O = std::remove_cv_t<Ours>;
  using T = std::remove_cv_t<Theirs>;
  if constexpr (std::is_void_v<O> || std::is_class_v<O>)
    return std::is_void_v<T> || std::is_class_v<T>;
  else
    return abiCompatible<O, T>();
}

template <class Ours, class Theirs>
constexpr bool abiCompatible() {
  using O = std::remove_cv_t<Ours>;
  using T = std::remove_cv_t<Theirs>;
  if constexpr (std::is_same_v<O, T>)
    return true;
  else if constexpr (std::is_pointer_v<O> && std::is_pointer_v<T>)
    return pointeeCompatible<std::remove_pointer_t<O>, std::remove_pointer_t<T>>();
  else if constexpr (std::is_enum_v<T>)
    return std::is_integral_v<O> && sizeof(O) == sizeof(T);
  else
    return false;
}

template <class Ours, class Theirs>
struct SameSignature : std::false_type {};
template <class R1, class... A1, class R2, class... A2>
struct SameSignature<R1 (*)(A1...), R2 (*)(A2...)> {
  static constexpr bool check() {
    if constexpr (sizeof...(A1) != sizeof...(A2))
      return false;
    else
      return abiCompatible<R1, R2>() && (abiCompatible<A1, A2>() && ...);
  }
  static constexpr bool value = check();
};

#define NNC_EXPECT_SAME_SIGNATURE(fn) \
  static_assert(SameSignature<decltype(CublasLtApi::fn), decltype(&::fn)>::value, #fn " differs from cublasLt.h")
NNC_EXPECT_SAME_SIGNATURE(cublasLtCreate);
NNC_EXPECT_SAME_SIGNATURE(cublasLtDestroy);
NNC_EXPECT_SAME_SIGNATURE(cublasLtMatmulDescCreate);
NNC_EXPECT_SAME_SIGNATURE(cublasLtMatmulDescDestroy);
NNC_EXPECT_SAME_SIGNATURE(cublasLtMatmulDescSetAttribute);
NNC_EXPECT_SAME_SIGNATURE(cublasLtMatrixLayoutCreate);
NNC_EXPECT_SAME_SIGNATURE(cublasLtMatrixLayoutDestroy);
NNC_EXPECT_SAME_SIGNATURE(cublasLtMatrixLayoutSetAttribute);
NNC_EXPECT_SAME_SIGNATURE(cublasLtMatmulPreferenceCreate);
NNC_EXPECT_SAME_SIGNATURE(cublasLtMatmulPreferenceDestroy);
NNC_EXPECT_SAME_SIGNATURE(cublasLtMatmulPreferenceSetAttribute);
NNC_EXPECT_SAME_SIGNATURE(cublasLtMatmulAlgoGetHeuristic);
NNC_EXPECT_SAME_SIGNATURE(cublasLtMatmul);
NNC_EXPECT_SAME_SIGNATURE(cublasLtGetStatusName);
NNC_EXPECT_SAME_SIGNATURE(cublasLtGetStatusString);
NNC_EXPECT_SAME_SIGNATURE(cublasLtGetVersion);
#undef NNC_EXPECT_SAME_SIGNATURE
// The check itself rejects what it should.
static_assert(!SameSignature<int (*)(void*), cublasStatus_t (*)(void*, int)>::value);
static_assert(!SameSignature<int (*)(int64_t), cublasStatus_t (*)(uint64_t)>::value);
static_assert(!SameSignature<int (*)(int*), cublasStatus_t (*)(void**)>::value);

TEST(CublasLtAbi, FallbackStatusNamesMatchTheHeader) {
  const CublasLtApi noNames{};  // as a library without cublasLtGetStatusName
  const std::pair<cublasStatus_t, const char*> statuses[] = {
      {CUBLAS_STATUS_SUCCESS, "CUBLAS_STATUS_SUCCESS"},
      {CUBLAS_STATUS_NOT_INITIALIZED, "CUBLAS_STATUS_NOT_INITIALIZED"},
      {CUBLAS_STATUS_ALLOC_FAILED, "CUBLAS_STATUS_ALLOC_FAILED"},
      {CUBLAS_STATUS_INVALID_VALUE, "CUBLAS_STATUS_INVALID_VALUE"},
      {CUBLAS_STATUS_ARCH_MISMATCH, "CUBLAS_STATUS_ARCH_MISMATCH"},
      {CUBLAS_STATUS_MAPPING_ERROR, "CUBLAS_STATUS_MAPPING_ERROR"},
      {CUBLAS_STATUS_EXECUTION_FAILED, "CUBLAS_STATUS_EXECUTION_FAILED"},
      {CUBLAS_STATUS_INTERNAL_ERROR, "CUBLAS_STATUS_INTERNAL_ERROR"},
      {CUBLAS_STATUS_NOT_SUPPORTED, "CUBLAS_STATUS_NOT_SUPPORTED"},
      {CUBLAS_STATUS_LICENSE_ERROR, "CUBLAS_STATUS_LICENSE_ERROR"},
  };
  for (const auto& [status, name] : statuses)
    EXPECT_EQ(describeCublasStatus(noNames, status, "call"), std::string("call: ") + name);
  EXPECT_EQ(describeCublasStatus(noNames, 12345, "call"), "call: cuBLAS status 12345");
}
#else
TEST(CublasLtAbi, FallbackStatusNamesMatchTheHeader) { GTEST_SKIP() << "cublasLt.h is not installed"; }
#endif

// ---- Loading ----

// cuBLASLt for the tests that need the library but no GPU; skips where it is not installed.
#define NNC_REQUIRE_CUBLASLT(api)                        \
  std::string whyNoCublasLt;                             \
  const CublasLtApi* api = openCublasLt(&whyNoCublasLt); \
  if (!api) GTEST_SKIP() << "cuBLASLt is not available: " << whyNoCublasLt

TEST(CublasLtLoad, OpensAndResolvesEverySymbol) {
  NNC_REQUIRE_CUBLASLT(api);
  EXPECT_FALSE(api->library.empty());
  // loadCublasLt succeeds only with every required symbol (see MissingLibraryOrSymbolIsAClearError).
  EXPECT_NE(api->cublasLtMatmul, nullptr);
  // Every supported cuBLASLt (11+) has these; the header this test builds with does.
  ASSERT_NE(api->cublasLtGetStatusName, nullptr);
  ASSERT_NE(api->cublasLtGetStatusString, nullptr);
  ASSERT_NE(api->cublasLtGetVersion, nullptr);
  EXPECT_GE(api->cublasLtGetVersion(), size_t{110000}) << api->library;
  EXPECT_EQ(openCublasLt(nullptr), api) << "opened once per process";
  const std::string invalid = describeCublasStatus(*api, 7, "cublasLtMatmul");  // CUBLAS_STATUS_INVALID_VALUE
  EXPECT_EQ(invalid.rfind("cublasLtMatmul: CUBLAS_STATUS_INVALID_VALUE (", 0), 0u) << invalid;
}

TEST(CublasLtLoad, Candidates) {
  const std::vector<std::string> defaults = {"libcublasLt.so.13",
                                             "libcublasLt.so.12",
                                             "libcublasLt.so.11",
                                             "/usr/local/cuda/lib64/libcublasLt.so.13",
                                             "/usr/local/cuda/lib64/libcublasLt.so.12",
                                             "/usr/local/cuda/lib64/libcublasLt.so.11"};
  EXPECT_EQ(cublasLtCandidates(nullptr), defaults);
  EXPECT_EQ(cublasLtCandidates(""), defaults);
  EXPECT_EQ(cublasLtCandidates("/opt/x/libcublasLt.so"), std::vector<std::string>{"/opt/x/libcublasLt.so"});
}

TEST(CublasLtLoad, MissingLibraryOrSymbolIsAClearError) {
  CublasLtApi api{};
  std::string why;
  EXPECT_FALSE(loadCublasLt({"/nonexistent/libcublasLt.so.13"}, &api, &why));
  EXPECT_NE(why.find("cuBLASLt could not be opened: /nonexistent/libcublasLt.so.13: cannot open shared object"),
            std::string::npos)
      << why;
  EXPECT_EQ(api.cublasLtMatmul, nullptr);
  // A library that loads but is not cuBLASLt.
  EXPECT_FALSE(loadCublasLt({"libc.so.6"}, &api, &why));
  EXPECT_NE(why.find("libc.so.6 lacks cublasLtCreate (cuBLASLt too old?)"), std::string::npos) << why;
  EXPECT_FALSE(loadCublasLt({}, &api, &why));
  EXPECT_NE(why.find("no candidates"), std::string::npos) << why;

  // The first candidate that works is taken; the failures before it do not matter.
  NNC_REQUIRE_CUBLASLT(real);
  ASSERT_TRUE(loadCublasLt({"/nonexistent/libcublasLt.so.13", "libc.so.6", real->library}, &api, &why)) << why;
  EXPECT_EQ(api.library, real->library);
  EXPECT_EQ(api.cublasLtMatmul, real->cublasLtMatmul);
}

TEST(CublasLtLoad, EnvironmentOverrideIsUsedAloneAndReported) {
  // openCublasLt caches per process: run it in a freshly started child ("threadsafe" re-executes
  // the test binary instead of forking this process, whose cache may already be filled).
  const std::string savedStyle = GTEST_FLAG_GET(death_test_style);
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        setenv("NNC_CUBLASLT_LIBRARY", "/nonexistent/libcublasLt.so", 1);
        std::string why;
        const bool opened = openCublasLt(&why) != nullptr;
        std::fprintf(stderr, "why: %s\n", why.c_str());
        std::exit(opened ? 1 : 0);
      },
      ::testing::ExitedWithCode(0),
      "why: NNC_CUBLASLT_LIBRARY=/nonexistent/libcublasLt.so: cuBLASLt could not be opened: "
      "/nonexistent/libcublasLt.so: cannot open shared object file");
  GTEST_FLAG_SET(death_test_style, savedStyle);
}

// ---- The row-major -> column-major mapping, on the CPU ----

// cuBLASLt's documented semantics, column-major: D_b = epilogue(op(A_b) op(B_b)), the bias indexed by
// the row of D. `a` and `b` are cuBLASLt's operands (our B and A).
void emulateCublasLt(const LtGemmShape& s, GemmEpilogue epilogue, const std::vector<double>& a,
                     const std::vector<double>& b, const std::vector<double>& bias, std::vector<double>* d) {
  const int64_t rows = static_cast<int64_t>(s.c.rows), cols = static_cast<int64_t>(s.c.cols);
  const int64_t opARows = static_cast<int64_t>(s.transA ? s.a.cols : s.a.rows);
  const int64_t k = static_cast<int64_t>(s.transA ? s.a.rows : s.a.cols);
  const int64_t opBRows = static_cast<int64_t>(s.transB ? s.b.cols : s.b.rows);
  const int64_t opBCols = static_cast<int64_t>(s.transB ? s.b.rows : s.b.cols);
  ASSERT_EQ(opARows, rows);
  ASSERT_EQ(opBRows, k);
  ASSERT_EQ(opBCols, cols);
  for (const LtMatrixLayout* l : {&s.a, &s.b, &s.c}) ASSERT_GE(l->ld, static_cast<int64_t>(l->rows));
  const bool addBias = epilogue == GemmEpilogue::Bias || epilogue == GemmEpilogue::BiasRelu;
  const bool relu = epilogue == GemmEpilogue::Relu || epilogue == GemmEpilogue::BiasRelu;
  for (int64_t bt = 0; bt < s.batch; ++bt)
    for (int64_t j = 0; j < cols; ++j)
      for (int64_t i = 0; i < rows; ++i) {
        double sum = 0;
        for (int64_t q = 0; q < k; ++q) {
          const double x = a[bt * s.a.batchStride + (s.transA ? q + i * s.a.ld : i + q * s.a.ld)];
          const double y = b[bt * s.b.batchStride + (s.transB ? j + q * s.b.ld : q + j * s.b.ld)];
          sum += x * y;
        }
        if (addBias) sum += bias[i];
        if (relu) sum = std::max(sum, 0.0);
        (*d)[bt * s.c.batchStride + i + j * s.c.ld] = sum;
      }
}

TEST(CublasLtShape, MappingReproducesRowMajorSemantics) {
  std::mt19937 rng(7);
  std::vector<GemmParams> cases;
  for (int64_t m : {1, 7, 33})
    for (int64_t n : {1, 7, 33})
      for (int64_t k : {1, 7})
        for (int t = 0; t < 4; ++t)
          for (GemmEpilogue e : kEpilogues) {
            cases.push_back(gemm(1, 1, m, n, k, t & 1, t & 2, 0, 0, 0, e));
            for (const GemmParams& p : batchedCases(1, m, n, k, t & 1, t & 2, e)) cases.push_back(p);
          }
  int folded = 0;
  for (const GemmParams& p : cases) {
    SCOPED_TRACE(describeGemm(p));
    LtGemmShape s;
    std::string error;
    ASSERT_TRUE(ltGemmShape(p, &s, &error)) << error;
    const std::vector<double> a = randomValues(spanA(p), rng), b = randomValues(spanB(p), rng);
    const std::vector<double> bias = randomValues(static_cast<size_t>(p.n), rng);
    std::vector<double> want, scale;
    referenceGemm(p, a, b, bias, &want, &scale);
    std::vector<double> got(spanC(p), std::numeric_limits<double>::quiet_NaN());
    emulateCublasLt(s, p.epilogue, b, a, bias, &got);
    ASSERT_FALSE(HasFatalFailure());
    for (size_t i = 0; i < want.size(); ++i)
      ASSERT_TRUE(std::isnan(want[i]) ? std::isnan(got[i]) : std::fabs(got[i] - want[i]) <= 1e-12 * (1 + scale[i]))
          << "element " << i << ": " << got[i] << " vs " << want[i];
    folded += s.folded;
  }
  EXPECT_GT(folded, 0);
}

TEST(CublasLtShape, FoldsOnlyContiguousRowsAgainstOneB) {
  LtGemmShape s;
  std::string error;
  // [3 x 7 x 5] row-major activations times one [5 x 4] weight: one GEMM with 21 rows.
  ASSERT_TRUE(ltGemmShape(gemm(1, 3, 7, 4, 5, false, false, 35, 0, 28, GemmEpilogue::Bias), &s, &error)) << error;
  EXPECT_TRUE(s.folded);
  EXPECT_EQ(s.batch, 1);
  EXPECT_EQ(s.c.rows, 4u);
  EXPECT_EQ(s.c.cols, 21u);
  EXPECT_EQ(s.b.cols, 21u);
  EXPECT_EQ(s.c.batchStride, 0);
  // Not with transA (each batch's rows are columns of its own matrix).
  ASSERT_TRUE(ltGemmShape(gemm(1, 3, 7, 4, 5, true, false, 35, 0, 28, GemmEpilogue::None), &s, &error)) << error;
  EXPECT_FALSE(s.folded);
  EXPECT_EQ(s.batch, 3);
}

TEST(CublasLtShape, RejectsWhatCublasLtCannotExpress) {
  LtGemmShape s;
  std::string error;
  const int64_t big = int64_t(1) << 31;
  EXPECT_FALSE(ltGemmShape(gemm(1, 1, big, 1, 1, false, false, 0, 0, 0, GemmEpilogue::None), &s, &error));
  EXPECT_NE(error.find("outside [1, 2^31 - 1]"), std::string::npos) << error;
  EXPECT_FALSE(ltGemmShape(gemm(1, 1, 0, 1, 1, false, false, 0, 0, 0, GemmEpilogue::None), &s, &error));
  EXPECT_FALSE(ltGemmShape(gemm(1, 2, 1, 1, 1, false, false, -1, 0, 1, GemmEpilogue::None), &s, &error));
  EXPECT_NE(error.find("negative batch stride"), std::string::npos) << error;
  EXPECT_FALSE(ltGemmShape(gemm(1, 2, 2, 2, 1, false, false, 0, 0, 3, GemmEpilogue::None), &s, &error));
  EXPECT_NE(error.find("batches of C overlap"), std::string::npos) << error;
  EXPECT_FALSE(ltGemmShape(gemm(11, 1, 2, 2, 2, false, false, 0, 0, 0, GemmEpilogue::None, true), &s, &error));
  EXPECT_NE(error.find("TF32 applies to f32 operands only"), std::string::npos) << error;
  GemmParams f16 = gemm(1, 1, 2, 2, 2, false, false, 0, 0, 0, GemmEpilogue::None);
  f16.dtype = 10;
  EXPECT_FALSE(ltGemmShape(f16, &s, &error));
  GemmParams badEpilogue = gemm(1, 1, 2, 2, 2, false, false, 0, 0, 0, GemmEpilogue::None);
  badEpilogue.epilogue = static_cast<GemmEpilogue>(4);
  EXPECT_FALSE(ltGemmShape(badEpilogue, &s, &error));
  EXPECT_NE(error.find("unknown epilogue"), std::string::npos) << error;
  // Half operands go with f32 results only, and never with TF32.
  GemmParams mixed = gemm(11, 1, 2, 2, 2, false, false, 0, 0, 0, GemmEpilogue::None);
  mixed.operandDtype = 16;
  EXPECT_FALSE(ltGemmShape(mixed, &s, &error));
  EXPECT_NE(error.find("mixed precision is bf16 or f16 operands with f32 results"), std::string::npos) << error;
  mixed = gemm(1, 1, 2, 2, 2, false, false, 0, 0, 0, GemmEpilogue::None, true);
  mixed.operandDtype = 10;
  EXPECT_FALSE(ltGemmShape(mixed, &s, &error));
  EXPECT_NE(error.find("TF32 applies to f32 operands only"), std::string::npos) << error;
  // Folding would exceed 32-bit rows: stays batched.
  ASSERT_TRUE(ltGemmShape(gemm(1, 4, big / 2, 1, 1, false, false, big / 2, 0, big / 2, GemmEpilogue::None), &s, &error))
      << error;
  EXPECT_FALSE(s.folded);
}

// ---- GemmRunner without a GPU: argument checks, and every descriptor set up up to the heuristic ----

TEST(CublasLtRunner, RejectsBadArgumentsBeforeCallingCublasLt) {
  const CublasLtApi none{};  // any call into it would crash
  std::string error;
  GemmBuffers buffers{0x1000, 0x2000, 0x3000, 0, 0, 0};
  EXPECT_EQ(GemmRunner::create(none, nullptr, gemm(1, 1, 0, 4, 4, false, false, 0, 0, 0, GemmEpilogue::None), buffers,
                               &error),
            nullptr);
  EXPECT_NE(error.find("outside [1, 2^31 - 1]"), std::string::npos) << error;
  const GemmParams withBias = gemm(1, 1, 4, 4, 4, false, false, 0, 0, 0, GemmEpilogue::Bias);
  EXPECT_EQ(GemmRunner::create(none, nullptr, withBias, buffers, &error), nullptr);
  EXPECT_EQ(error, "cuBLASLt: a null device pointer for " + describeGemm(withBias));
  buffers.bias = 0x4000;
  buffers.workspaceBytes = 1024;
  EXPECT_EQ(GemmRunner::create(none, nullptr, withBias, buffers, &error), nullptr);
  EXPECT_EQ(error, "cuBLASLt: a null device pointer for " + describeGemm(withBias));
}

// Without a handle the heuristic must fail; reaching it means every descriptor, layout and
// preference attribute (their sizes included) was accepted. Runs without a GPU.
TEST(CublasLtRunner, EveryDescriptorIsAcceptedUpToTheHeuristic) {
  NNC_REQUIRE_CUBLASLT(api);
  std::vector<GemmParams> cases;
  for (int32_t dtype : {1, 11})
    for (GemmEpilogue e : kEpilogues)
      for (int t = 0; t < 4; ++t) {
        cases.push_back(gemm(dtype, 1, 7, 33, 129, t & 1, t & 2, 0, 0, 0, e));
        for (const GemmParams& p : batchedCases(dtype, 7, 33, 5, t & 1, t & 2, e)) cases.push_back(p);
      }
  cases.push_back(gemm(1, 2, 8, 8, 8, false, true, 64, 64, 64, GemmEpilogue::BiasRelu, true));
  // Odd addresses: alignments down to one element reach the preference.
  const GemmBuffers buffers{0x10004, 0x20008, 0x3000c, 0x40010, 0x100000, kGemmWorkspaceBytes};
  for (const GemmParams& p : cases) {
    std::string error;
    EXPECT_EQ(GemmRunner::create(*api, nullptr, p, buffers, &error), nullptr) << describeGemm(p);
    EXPECT_EQ(error.rfind("cuBLASLt has no algorithm for " + describeGemm(p) +
                              " (cublasLtMatmulAlgoGetHeuristic: CUBLAS_STATUS_NOT_INITIALIZED",
                          0),
              0u)
        << error;
  }
}

// A stand-in cuBLASLt recording what GemmRunner asks of it, to check the calls without a GPU.
struct FakeObject {
  bool destroyed = false;
  int32_t type = 0, compute = 0;
  uint64_t rows = 0, cols = 0;
  int64_t ld = 0;
  std::map<int32_t, std::vector<unsigned char>> attrs;
  template <class T>
  T attr(int32_t key) const {
    T v{};
    auto it = attrs.find(key);
    if (it != attrs.end() && it->second.size() == sizeof(T)) std::memcpy(&v, it->second.data(), sizeof(T));
    return v;
  }
};
struct Fake {
  std::vector<std::unique_ptr<FakeObject>> objects;  // kept after destruction, for inspection
  int live = 0;                                      // created and not destroyed
  int doubleDestroys = 0;
  FakeObject *desc = nullptr, *pref = nullptr;
  std::vector<FakeObject*> layouts;
  std::vector<void*> heuristicArgs;  // desc, A, B, C, D layouts, preference, requested count
  int returned = 1;                  // what the heuristic finds
  int32_t failingAttr = -1;          // an attribute whose setting fails
  CublasStatus matmulStatus = lt::kStatusSuccess;
  const void *alpha = nullptr, *beta = nullptr;
  std::vector<const void*> matmulArgs;  // A, B, C, D, workspace, stream, then the 4 layouts
  CublasLtMatmulAlgo algo{};
  size_t workspaceBytes = 0;
};
Fake& fake() {
  static Fake f;
  return f;
}

FakeObject* newFakeObject(void** out) {
  ++fake().live;
  fake().objects.push_back(std::make_unique<FakeObject>());
  *out = fake().objects.back().get();
  return fake().objects.back().get();
}
CublasStatus destroyFakeObject(void* object) {
  auto* o = static_cast<FakeObject*>(object);
  if (o->destroyed) ++fake().doubleDestroys;
  fake().live -= o->destroyed ? 0 : 1;
  o->destroyed = true;
  return lt::kStatusSuccess;
}
CublasStatus setFakeAttribute(void* o, int32_t attr, const void* buf, size_t bytes) {
  if (attr == fake().failingAttr) return CublasStatus{7};  // CUBLAS_STATUS_INVALID_VALUE
  const auto* p = static_cast<const unsigned char*>(buf);
  static_cast<FakeObject*>(o)->attrs[attr].assign(p, p + bytes);
  return lt::kStatusSuccess;
}

CublasLtApi fakeApi() {
  CublasLtApi api{};
  api.cublasLtMatmulDescCreate = [](void** d, int32_t compute, int32_t scale) -> CublasStatus {
    fake().desc = newFakeObject(d);
    fake().desc->compute = compute;
    fake().desc->type = scale;
    return lt::kStatusSuccess;
  };
  api.cublasLtMatrixLayoutCreate = [](void** l, int32_t type, uint64_t rows, uint64_t cols,
                                      int64_t ld) -> CublasStatus {
    FakeObject* o = newFakeObject(l);
    o->type = type;
    o->rows = rows;
    o->cols = cols;
    o->ld = ld;
    fake().layouts.push_back(o);
    return lt::kStatusSuccess;
  };
  api.cublasLtMatmulPreferenceCreate = [](void** p) -> CublasStatus {
    fake().pref = newFakeObject(p);
    return lt::kStatusSuccess;
  };
  api.cublasLtMatmulDescDestroy = api.cublasLtMatrixLayoutDestroy = api.cublasLtMatmulPreferenceDestroy =
      destroyFakeObject;
  api.cublasLtMatmulDescSetAttribute = api.cublasLtMatrixLayoutSetAttribute = api.cublasLtMatmulPreferenceSetAttribute =
      setFakeAttribute;
  api.cublasLtMatmulAlgoGetHeuristic = [](void*, void* desc, void* a, void* b, void* c, void* d, void* pref,
                                          int requested, CublasLtHeuristicResult* results, int* returned) {
    fake().heuristicArgs = {desc, a, b, c, d, pref, reinterpret_cast<void*>(static_cast<intptr_t>(requested))};
    *returned = fake().returned;
    if (*returned > 0) results[0] = CublasLtHeuristicResult{{{42, 43}}, 1024, lt::kStatusSuccess, 1.0f, {}};
    return lt::kStatusSuccess;
  };
  api.cublasLtMatmul = [](void*, void*, const void* alpha, const void* a, void* aLayout, const void* b, void* bLayout,
                          const void* beta, const void* c, void* cLayout, void* d, void* dLayout,
                          const CublasLtMatmulAlgo* algo, void* workspace, size_t workspaceBytes, void* stream) {
    fake().alpha = alpha;
    fake().beta = beta;
    fake().matmulArgs = {a, b, c, d, workspace, stream, aLayout, bLayout, cLayout, dLayout};
    fake().algo = *algo;
    fake().workspaceBytes = workspaceBytes;
    return fake().matmulStatus;
  };
  return api;
}

const void* address(unsigned long long p) { return reinterpret_cast<const void*>(static_cast<uintptr_t>(p)); }

TEST(CublasLtRunner, CallsCublasLtAsSpecified) {
  fake() = Fake{};
  const CublasLtApi api = fakeApi();
  // Batched (transA cannot fold), B broadcast, C padded; pointers aligned to 16, 8, 256 and 4 bytes.
  const GemmParams p = gemm(1, 3, 5, 6, 7, true, true, 35, 0, 32, GemmEpilogue::BiasRelu);
  const GemmBuffers buffers{0x10010, 0x20008, 0x30100, 0x40004, 0x50000, 4096};
  std::string error;
  auto runner = GemmRunner::create(api, reinterpret_cast<void*>(0x99), p, buffers, &error);
  ASSERT_NE(runner, nullptr) << error;
  const Fake& f = fake();
  EXPECT_EQ(f.desc->compute, lt::kCompute32F);
  EXPECT_EQ(f.desc->type, lt::kDataR32F);
  EXPECT_EQ(f.desc->attr<int32_t>(lt::kDescTransA), lt::kOpT);  // cuBLASLt's A is our B, transposed
  EXPECT_EQ(f.desc->attr<int32_t>(lt::kDescTransB), lt::kOpT);
  EXPECT_EQ(f.desc->attr<uint32_t>(lt::kDescEpilogue), lt::kEpilogueReluBias);
  EXPECT_EQ(f.desc->attr<const void*>(lt::kDescBiasPointer), address(buffers.bias));
  const LtGemmShape& s = runner->shape();
  const LtMatrixLayout* want[] = {&s.a, &s.b, &s.c};
  const int64_t strides[] = {0, 35, 32};  // our B, A, C
  ASSERT_EQ(f.layouts.size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(f.layouts[i]->type, lt::kDataR32F);
    EXPECT_EQ(f.layouts[i]->rows, want[i]->rows);
    EXPECT_EQ(f.layouts[i]->cols, want[i]->cols);
    EXPECT_EQ(f.layouts[i]->ld, want[i]->ld);
    EXPECT_EQ(f.layouts[i]->attr<int32_t>(lt::kLayoutBatchCount), 3);
    EXPECT_EQ(f.layouts[i]->attr<int64_t>(lt::kLayoutStridedBatchOffset), strides[i]);
  }
  EXPECT_EQ(f.pref->attr<uint64_t>(lt::kPrefMaxWorkspaceBytes), 4096u);
  EXPECT_EQ(f.pref->attr<uint32_t>(lt::kPrefMinAlignmentABytes), 8u);    // our B
  EXPECT_EQ(f.pref->attr<uint32_t>(lt::kPrefMinAlignmentBBytes), 4u);    // our A: 0x10010 + 35 floats per batch
  EXPECT_EQ(f.pref->attr<uint32_t>(lt::kPrefMinAlignmentCBytes), 128u);  // 0x30100 + 32 floats per batch
  EXPECT_EQ(f.pref->attr<uint32_t>(lt::kPrefMinAlignmentDBytes), 128u);
  const std::vector<void*> heuristicArgs = {
      f.desc, f.layouts[0], f.layouts[1], f.layouts[2], f.layouts[2], f.pref, reinterpret_cast<void*>(1)};
  EXPECT_EQ(f.heuristicArgs, heuristicArgs);
  EXPECT_EQ(runner->algorithmWorkspaceBytes(), 1024u);
  EXPECT_TRUE(f.pref->destroyed);
  EXPECT_EQ(f.live, 4) << "the runner keeps its descriptor and three layouts";

  ASSERT_TRUE(runner->run(reinterpret_cast<void*>(0x77), &error)) << error;
  EXPECT_EQ(*static_cast<const float*>(f.alpha), 1.0f);
  EXPECT_EQ(*static_cast<const float*>(f.beta), 0.0f);
  const std::vector<const void*> operands = {
      address(buffers.b), address(buffers.a), address(buffers.c), address(buffers.c), address(buffers.workspace),
      address(0x77),      f.layouts[0],       f.layouts[1],       f.layouts[2],       f.layouts[2]};
  EXPECT_EQ(f.matmulArgs, operands);
  EXPECT_EQ(f.algo.data[0], 42u);
  EXPECT_EQ(f.algo.data[1], 43u);
  EXPECT_EQ(f.workspaceBytes, 4096u);
  runner.reset();
  EXPECT_EQ(f.live, 0) << "descriptors leaked";
  EXPECT_EQ(f.doubleDestroys, 0);
}

TEST(CublasLtRunner, TypesAndFailuresWithTheFake) {
  const CublasLtApi api = fakeApi();
  const GemmBuffers buffers{0x10000, 0x20000, 0x30000, 0x40000, 0x50000, 4096};
  const GemmParams f64 = gemm(11, 1, 4, 4, 4, false, false, 0, 0, 0, GemmEpilogue::None);
  std::string error;
  fake() = Fake{};
  auto runner = GemmRunner::create(api, nullptr, f64, buffers, &error);
  ASSERT_NE(runner, nullptr) << error;
  EXPECT_EQ(fake().desc->compute, lt::kCompute64F);
  EXPECT_EQ(fake().desc->type, lt::kDataR64F);
  EXPECT_EQ(fake().desc->attr<uint32_t>(lt::kDescEpilogue), lt::kEpilogueDefault);
  EXPECT_EQ(fake().desc->attrs.count(lt::kDescBiasPointer), 0u);
  EXPECT_EQ(fake().layouts[0]->attrs.count(lt::kLayoutBatchCount), 0u);
  ASSERT_TRUE(runner->run(nullptr, &error)) << error;
  EXPECT_EQ(*static_cast<const double*>(fake().alpha), 1.0);
  EXPECT_EQ(*static_cast<const double*>(fake().beta), 0.0);
  fake().matmulStatus = 13;  // CUBLAS_STATUS_EXECUTION_FAILED
  EXPECT_FALSE(runner->run(nullptr, &error));
  EXPECT_EQ(error, "cublasLtMatmul: CUBLAS_STATUS_EXECUTION_FAILED: " + describeGemm(f64));
  runner.reset();
  EXPECT_EQ(fake().live, 0);

  fake() = Fake{};
  const GemmParams tf32 = gemm(1, 2, 4, 4, 4, false, false, 0, 16, 16, GemmEpilogue::Relu, true);
  ASSERT_NE(GemmRunner::create(api, nullptr, tf32, buffers, &error), nullptr) << error;
  EXPECT_EQ(fake().desc->compute, lt::kCompute32FFastTf32);
  EXPECT_EQ(fake().desc->attr<uint32_t>(lt::kDescEpilogue), lt::kEpilogueRelu);
  EXPECT_EQ(fake().live, 0);

  fake() = Fake{};
  fake().failingAttr = lt::kLayoutStridedBatchOffset;
  EXPECT_EQ(GemmRunner::create(api, nullptr, tf32, buffers, &error), nullptr);
  EXPECT_EQ(error,
            "cuBLASLt: " + describeGemm(tf32) + ": cublasLtMatrixLayoutSetAttribute: CUBLAS_STATUS_INVALID_VALUE");
  EXPECT_EQ(fake().live, 0);

  fake() = Fake{};
  fake().returned = 0;
  EXPECT_EQ(GemmRunner::create(api, nullptr, tf32, buffers, &error), nullptr);
  EXPECT_EQ(error, "cuBLASLt has no algorithm for " + describeGemm(tf32) +
                       " (cublasLtMatmulAlgoGetHeuristic returned no algorithm within a 4096-byte workspace)");
  EXPECT_EQ(fake().live, 0);
}

}  // namespace
}  // namespace nnc::rt::cuda
