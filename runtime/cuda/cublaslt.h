// cuBLASLt for the CUDA executor's GEMM steps (runtime/gemm.h), opened at run time with dlopen like
// the driver (cuda_driver.h): neither nnc nor a model.so links it, and building needs no CUDA
// toolkit. Only the entry points and enum values used here are declared, with cuBLASLt's C ABI
// (handles and descriptors as void*, enums as their 32-bit values); tests/cuda/cublaslt_test.cpp
// checks every one against the official header.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "runtime/gemm.h"

namespace nnc::rt::cuda {

using CublasStatus = int32_t;  // cublasStatus_t

// Values of cublasStatus_t, cublasOperation_t, cublasComputeType_t, cudaDataType and cuBLASLt's
// attribute enums (cublas_api.h, library_types.h, cublasLt.h).
namespace lt {
constexpr CublasStatus kStatusSuccess = 0;
constexpr int32_t kOpN = 0;
constexpr int32_t kOpT = 1;
constexpr int32_t kCompute32F = 68;
constexpr int32_t kCompute32FFastTf32 = 77;
constexpr int32_t kCompute64F = 70;
constexpr int32_t kDataR32F = 0;
constexpr int32_t kDataR64F = 1;
constexpr int32_t kDataR16F = 2;
constexpr int32_t kDataR16BF = 14;
constexpr int32_t kDescTransA = 3;        // CUBLASLT_MATMUL_DESC_TRANSA, int32_t
constexpr int32_t kDescTransB = 4;        // int32_t
constexpr int32_t kDescEpilogue = 7;      // uint32_t
constexpr int32_t kDescBiasPointer = 8;   // const void*
constexpr uint32_t kEpilogueDefault = 1;  // CUBLASLT_EPILOGUE_DEFAULT
constexpr uint32_t kEpilogueRelu = 2;
constexpr uint32_t kEpilogueBias = 4;
constexpr uint32_t kEpilogueReluBias = 6;
constexpr int32_t kLayoutBatchCount = 5;          // CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, int32_t
constexpr int32_t kLayoutStridedBatchOffset = 6;  // int64_t, elements
constexpr int32_t kPrefMaxWorkspaceBytes = 1;     // CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, uint64_t
constexpr int32_t kPrefMinAlignmentABytes = 5;    // uint32_t; B, C, D follow as 6, 7, 8
constexpr int32_t kPrefMinAlignmentBBytes = 6;
constexpr int32_t kPrefMinAlignmentCBytes = 7;
constexpr int32_t kPrefMinAlignmentDBytes = 8;
}  // namespace lt

// cublasLtMatmulAlgo_t and cublasLtMatmulHeuristicResult_t, laid out as in cublasLt.h.
struct CublasLtMatmulAlgo {
  uint64_t data[8];
};
struct CublasLtHeuristicResult {
  CublasLtMatmulAlgo algo;
  size_t workspaceSize;
  CublasStatus state;
  float wavesCount;
  int reserved[4];
};

struct CublasLtApi {
  CublasStatus (*cublasLtCreate)(void** handle);
  CublasStatus (*cublasLtDestroy)(void* handle);
  CublasStatus (*cublasLtMatmulDescCreate)(void** desc, int32_t computeType, int32_t scaleType);
  CublasStatus (*cublasLtMatmulDescDestroy)(void* desc);
  CublasStatus (*cublasLtMatmulDescSetAttribute)(void* desc, int32_t attr, const void* buf, size_t bytes);
  CublasStatus (*cublasLtMatrixLayoutCreate)(void** layout, int32_t type, uint64_t rows, uint64_t cols, int64_t ld);
  CublasStatus (*cublasLtMatrixLayoutDestroy)(void* layout);
  CublasStatus (*cublasLtMatrixLayoutSetAttribute)(void* layout, int32_t attr, const void* buf, size_t bytes);
  CublasStatus (*cublasLtMatmulPreferenceCreate)(void** pref);
  CublasStatus (*cublasLtMatmulPreferenceDestroy)(void* pref);
  CublasStatus (*cublasLtMatmulPreferenceSetAttribute)(void* pref, int32_t attr, const void* buf, size_t bytes);
  CublasStatus (*cublasLtMatmulAlgoGetHeuristic)(void* handle, void* desc, void* aLayout, void* bLayout, void* cLayout,
                                                 void* dLayout, void* pref, int requestedCount,
                                                 CublasLtHeuristicResult* results, int* returnedCount);
  CublasStatus (*cublasLtMatmul)(void* handle, void* desc, const void* alpha, const void* a, void* aLayout,
                                 const void* b, void* bLayout, const void* beta, const void* c, void* cLayout, void* d,
                                 void* dLayout, const CublasLtMatmulAlgo* algo, void* workspace, size_t workspaceBytes,
                                 void* stream);
  // Optional (null when absent): messages fall back to nnc's own status names.
  const char* (*cublasLtGetStatusName)(CublasStatus);
  const char* (*cublasLtGetStatusString)(CublasStatus);
  size_t (*cublasLtGetVersion)();
  std::string library;  // the name or path that was opened
};

// cuBLASLt, opened once per process and never closed. Tries $NNC_CUBLASLT_LIBRARY alone when set
// (an explicit choice is not silently replaced by another library), else cublasLtCandidates(nullptr).
// Null with *why set when it cannot be opened or lacks a required symbol. With NNC_CUDA_EMULATE=1,
// the CUDA emulator's table instead (emulator.h).
const CublasLtApi* openCublasLt(std::string* why);

// The libraries openCublasLt tries, in order (exposed for tests): {overridePath} when it is non-empty,
// else libcublasLt.so.13/.12/.11 by name, then the same under /usr/local/cuda/lib64/.
std::vector<std::string> cublasLtCandidates(const char* overridePath);
// Opens the first candidate that loads and has every required symbol, without caching (tests).
// False with *why listing each candidate's failure.
bool loadCublasLt(const std::vector<std::string>& candidates, CublasLtApi* api, std::string* why);

// "what: CUBLAS_STATUS_X (description)".
std::string describeCublasStatus(const CublasLtApi& api, CublasStatus status, const std::string& what);

// A cuBLASLt handle (cublasLtCreate / cublasLtDestroy); create with the CUDA context current.
bool createLtHandle(const CublasLtApi& api, void** handle, std::string* error);
void destroyLtHandle(const CublasLtApi& api, void* handle);

// What the executor allocates once and hands every runner.
inline constexpr size_t kGemmWorkspaceBytes = 32u << 20;

// A row-major GemmParams as cuBLASLt's column-major call (exposed so tests check the mapping without a
// GPU): D^T = op(B)^T op(A)^T, so cuBLASLt's A is our B and its B is our A, and its rows are our columns.
struct LtMatrixLayout {
  uint64_t rows = 0, cols = 0;  // of the stored column-major matrix, before op
  int64_t ld = 0;
  int64_t batchStride = 0;  // elements; 0 broadcasts one matrix to every batch
};
struct LtGemmShape {
  bool transA = false, transB = false;  // cuBLASLt's op(A), op(B)
  LtMatrixLayout a, b, c;               // cuBLASLt's A (our B), B (our A), and C = D
  int32_t batch = 1;
  bool folded = false;  // batches folded into one GEMM with batch * m rows
};
// False with *error when cuBLASLt cannot express `p` (dims beyond 32 bits, negative strides, ...).
bool ltGemmShape(const GemmParams& p, LtGemmShape* shape, std::string* error);

// The device buffers of one GEMM step. The runner takes them at creation: cuBLASLt chooses its
// algorithm for the pointers' actual alignment, and the bias pointer is part of the descriptor.
struct GemmBuffers {
  unsigned long long a = 0, b = 0, c = 0;  // CUdeviceptr
  unsigned long long bias = 0;             // only with p.hasBias()
  unsigned long long workspace = 0;        // may be 0 when workspaceBytes is 0
  size_t workspaceBytes = 0;
};

// One GEMM step prepared for fixed buffers on the current device: descriptors, layouts and the
// algorithm cuBLASLt's heuristic picked within the workspace. Create with the CUDA context current.
class GemmRunner {
 public:
  ~GemmRunner();
  GemmRunner(const GemmRunner&) = delete;
  GemmRunner& operator=(const GemmRunner&) = delete;

  // `ltHandle` from createLtHandle. Null with *error (naming describeGemm(p) and the failing call) when
  // ltGemmShape refuses `p`, a required pointer is null, a cuBLASLt call fails or no algorithm fits.
  // Buffer sizes are validateGemm's to check.
  static std::unique_ptr<GemmRunner> create(const CublasLtApi& api, void* ltHandle, const GemmParams& p,
                                            const GemmBuffers& buffers, std::string* error);

  // Enqueues the GEMM on `stream` (a CUstream). Capturable into a CUDA graph: no synchronisation, no
  // allocation, alpha and beta are host values held by the runner. Mutates nothing of the runner.
  bool run(void* stream, std::string* error) const;

  const GemmParams& params() const { return params_; }
  const LtGemmShape& shape() const { return shape_; }
  size_t algorithmWorkspaceBytes() const { return algoWorkspaceBytes_; }  // what the chosen algorithm uses

 private:
  GemmRunner() = default;
  // The steps of create(); false with *error naming the cuBLASLt call that failed.
  bool createDescriptor(std::string* error);
  bool createLayouts(std::string* error);
  bool chooseAlgorithm(std::string* error);
  bool check(CublasStatus status, const char* call, std::string* error) const;

  const CublasLtApi* api_ = nullptr;
  void* handle_ = nullptr;
  void* desc_ = nullptr;
  void* layouts_[3] = {nullptr, nullptr, nullptr};  // cuBLASLt's A, B, C (= D)
  CublasLtMatmulAlgo algo_{};
  size_t algoWorkspaceBytes_ = 0;
  GemmParams params_;
  LtGemmShape shape_;
  GemmBuffers buffers_;
  // alpha = 1, beta = 0 in the scale type; cuBLASLt reads them at enqueue time (host pointer mode).
  float alphaF32_ = 1.0f, betaF32_ = 0.0f;
  double alphaF64_ = 1.0, betaF64_ = 0.0;
};

}  // namespace nnc::rt::cuda
