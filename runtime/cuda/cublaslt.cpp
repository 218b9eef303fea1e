// cuBLASLt through dlopen/dlsym, and GEMM steps prepared on it (see cublaslt.h).
#include "runtime/cuda/cublaslt.h"

#include <dlfcn.h>

#include <cstdlib>
#include <utility>

#include "runtime/cuda/dynamic_library.h"
#include "runtime/cuda/emulator.h"

namespace nnc::rt::cuda {
namespace {

constexpr const char* kLibraryNames[] = {"libcublasLt.so.13", "libcublasLt.so.12", "libcublasLt.so.11"};
constexpr const char* kToolkitLibDir = "/usr/local/cuda/lib64/";

// cublasStatus_t names for libraries without cublasLtGetStatusName.
const char* fallbackStatusName(CublasStatus status) {
  static constexpr std::pair<CublasStatus, const char*> kNames[] = {
      {0, "CUBLAS_STATUS_SUCCESS"},           {1, "CUBLAS_STATUS_NOT_INITIALIZED"}, {3, "CUBLAS_STATUS_ALLOC_FAILED"},
      {7, "CUBLAS_STATUS_INVALID_VALUE"},     {8, "CUBLAS_STATUS_ARCH_MISMATCH"},   {11, "CUBLAS_STATUS_MAPPING_ERROR"},
      {13, "CUBLAS_STATUS_EXECUTION_FAILED"}, {14, "CUBLAS_STATUS_INTERNAL_ERROR"}, {15, "CUBLAS_STATUS_NOT_SUPPORTED"},
      {16, "CUBLAS_STATUS_LICENSE_ERROR"},
  };
  for (const auto& [value, name] : kNames)
    if (value == status) return name;
  return nullptr;
}

bool resolveRequired(void* lib, CublasLtApi* a, std::string* missing) {
  bool ok = resolveSymbol(lib, "cublasLtCreate", &a->cublasLtCreate, missing);
  ok &= resolveSymbol(lib, "cublasLtDestroy", &a->cublasLtDestroy, missing);
  ok &= resolveSymbol(lib, "cublasLtMatmulDescCreate", &a->cublasLtMatmulDescCreate, missing);
  ok &= resolveSymbol(lib, "cublasLtMatmulDescDestroy", &a->cublasLtMatmulDescDestroy, missing);
  ok &= resolveSymbol(lib, "cublasLtMatmulDescSetAttribute", &a->cublasLtMatmulDescSetAttribute, missing);
  ok &= resolveSymbol(lib, "cublasLtMatrixLayoutCreate", &a->cublasLtMatrixLayoutCreate, missing);
  ok &= resolveSymbol(lib, "cublasLtMatrixLayoutDestroy", &a->cublasLtMatrixLayoutDestroy, missing);
  ok &= resolveSymbol(lib, "cublasLtMatrixLayoutSetAttribute", &a->cublasLtMatrixLayoutSetAttribute, missing);
  ok &= resolveSymbol(lib, "cublasLtMatmulPreferenceCreate", &a->cublasLtMatmulPreferenceCreate, missing);
  ok &= resolveSymbol(lib, "cublasLtMatmulPreferenceDestroy", &a->cublasLtMatmulPreferenceDestroy, missing);
  ok &= resolveSymbol(lib, "cublasLtMatmulPreferenceSetAttribute", &a->cublasLtMatmulPreferenceSetAttribute, missing);
  ok &= resolveSymbol(lib, "cublasLtMatmulAlgoGetHeuristic", &a->cublasLtMatmulAlgoGetHeuristic, missing);
  ok &= resolveSymbol(lib, "cublasLtMatmul", &a->cublasLtMatmul, missing);
  return ok;
}

OpenedLibrary<CublasLtApi> openOnce() {
  OpenedLibrary<CublasLtApi> o;
  const char* overridePath = std::getenv("NNC_CUBLASLT_LIBRARY");
  o.ok = loadCublasLt(cublasLtCandidates(overridePath), &o.api, &o.why);
  if (!o.ok && overridePath && *overridePath)
    o.why = std::string("NNC_CUBLASLT_LIBRARY=") + overridePath + ": " + o.why;
  return o;
}

bool fail(std::string* error, const std::string& message) {
  if (error) *error = message;
  return false;
}

void* toPointer(unsigned long long devicePtr) { return reinterpret_cast<void*>(static_cast<uintptr_t>(devicePtr)); }

// The alignment (a power of two up to 256 bytes, cuBLASLt's default assumption) of every matrix an
// operand's batches start at: cuBLASLt must not pick an algorithm needing more.
uint32_t operandAlignment(unsigned long long ptr, int64_t batchStride, int32_t batch, uint64_t elementBytes) {
  uint64_t bits = ptr;
  if (batch > 1) bits |= static_cast<uint64_t>(batchStride) * elementBytes;
  uint32_t alignment = 256;
  while (alignment > 1 && bits % alignment != 0) alignment /= 2;
  return alignment;
}

// Destroys a cuBLASLt preference when leaving scope (only needed while choosing the algorithm).
class PreferenceGuard {
 public:
  explicit PreferenceGuard(const CublasLtApi& api) : api_(api) {}
  ~PreferenceGuard() {
    if (pref_) api_.cublasLtMatmulPreferenceDestroy(pref_);
  }
  PreferenceGuard(const PreferenceGuard&) = delete;
  PreferenceGuard& operator=(const PreferenceGuard&) = delete;
  void adopt(void* pref) { pref_ = pref; }

 private:
  const CublasLtApi& api_;
  void* pref_ = nullptr;
};

// cudaDataType of an nnc_dtype GemmParams allows.
int32_t ltDataType(int32_t dtype) {
  return dtype == 11 ? lt::kDataR64F : dtype == 16 ? lt::kDataR16BF : dtype == 10 ? lt::kDataR16F : lt::kDataR32F;
}

uint64_t gemmElementBytes(int32_t dtype) { return dtype == 11 ? 8 : dtype == 10 || dtype == 16 ? 2 : 4; }

}  // namespace

std::vector<std::string> cublasLtCandidates(const char* overridePath) {
  if (overridePath && *overridePath) return {overridePath};
  std::vector<std::string> names;
  for (const char* name : kLibraryNames) names.emplace_back(name);
  for (const char* name : kLibraryNames) names.push_back(std::string(kToolkitLibDir) + name);
  return names;
}

bool loadCublasLt(const std::vector<std::string>& candidates, CublasLtApi* api, std::string* why) {
  std::string reasons;
  for (const std::string& candidate : candidates) {
    if (!reasons.empty()) reasons += "; ";
    dlerror();
    // Never closed, even when a symbol is missing: unloading a library that may have started
    // threads or registered handlers is not safe, and keeping it costs nothing.
    void* lib = dlopen(candidate.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
      const char* err = dlerror();
      reasons += err ? std::string(err) : candidate + ": cannot be opened";
      continue;
    }
    CublasLtApi a{};
    std::string missing;
    if (!resolveRequired(lib, &a, &missing)) {
      reasons += candidate + " lacks " + missing + " (cuBLASLt too old?)";
      continue;
    }
    std::string missingOptional;
    resolveSymbol(lib, "cublasLtGetStatusName", &a.cublasLtGetStatusName, &missingOptional);
    resolveSymbol(lib, "cublasLtGetStatusString", &a.cublasLtGetStatusString, &missingOptional);
    resolveSymbol(lib, "cublasLtGetVersion", &a.cublasLtGetVersion, &missingOptional);
    a.library = candidate;
    *api = std::move(a);
    return true;
  }
  return fail(why, "cuBLASLt could not be opened: " + (candidates.empty() ? std::string("no candidates") : reasons));
}

const CublasLtApi* openCublasLt(std::string* why) {
  if (emu::emulationRequested()) return emu::openEmulatedCublasLt(why);
  return openOncePerProcess(openOnce, why);
}

std::string describeCublasStatus(const CublasLtApi& api, CublasStatus status, const std::string& what) {
  const char* name = api.cublasLtGetStatusName ? api.cublasLtGetStatusName(status) : fallbackStatusName(status);
  const char* text = api.cublasLtGetStatusString ? api.cublasLtGetStatusString(status) : nullptr;
  std::string s = what + ": " + (name ? std::string(name) : "cuBLAS status " + std::to_string(status));
  if (text && *text) s += std::string(" (") + text + ")";
  return s;
}

bool createLtHandle(const CublasLtApi& api, void** handle, std::string* error) {
  *handle = nullptr;
  if (CublasStatus s = api.cublasLtCreate(handle); s != lt::kStatusSuccess) {
    *handle = nullptr;
    return fail(error, describeCublasStatus(api, s, "cublasLtCreate"));
  }
  return true;
}

void destroyLtHandle(const CublasLtApi& api, void* handle) {
  if (handle) api.cublasLtDestroy(handle);
}

bool ltGemmShape(const GemmParams& p, LtGemmShape* shape, std::string* error) {
  if (p.dtype != 1 && p.dtype != 11) return fail(error, "cuBLASLt: dtype is not f32 or f64: " + describeGemm(p));
  if (p.mixed() && !(p.dtype == 1 && (p.operandType() == 10 || p.operandType() == 16)))
    return fail(error, "cuBLASLt: mixed precision is bf16 or f16 operands with f32 results: " + describeGemm(p));
  if (p.allowTf32 && (p.dtype != 1 || p.mixed()))
    return fail(error, "cuBLASLt: TF32 applies to f32 operands only: " + describeGemm(p));
  if (p.epilogue < GemmEpilogue::None || p.epilogue > GemmEpilogue::BiasRelu)
    return fail(error, "cuBLASLt: unknown epilogue: " + describeGemm(p));
  for (int64_t d : {p.batch, p.m, p.n, p.k})
    if (d < 1 || d > INT32_MAX)
      return fail(error, "cuBLASLt: a dimension is outside [1, 2^31 - 1]: " + describeGemm(p));
  if (p.strideA < 0 || p.strideB < 0 || p.strideC < 0)
    return fail(error, "cuBLASLt: negative batch stride: " + describeGemm(p));
  if (p.batch > 1 && p.strideC < p.m * p.n) return fail(error, "cuBLASLt: batches of C overlap: " + describeGemm(p));

  // Consecutive row-major A matrices against one B are a single GEMM with batch * m rows.
  const bool fold = p.batch > 1 && !p.transA && p.strideA == p.m * p.k && p.strideB == 0 && p.strideC == p.m * p.n &&
                    p.batch * p.m <= INT32_MAX;
  const int64_t rows = fold ? p.batch * p.m : p.m;
  const bool batched = p.batch > 1 && !fold;
  LtGemmShape s;
  s.folded = fold;
  s.batch = batched ? static_cast<int32_t>(p.batch) : 1;
  const auto u = [](int64_t v) { return static_cast<uint64_t>(v); };
  // cuBLASLt's A is our B: stored [k x n] row-major is column-major [n x k] (ld n); transB's [n x k]
  // is column-major [k x n] (ld k), transposed by op.
  s.transA = p.transB;
  s.a = p.transB ? LtMatrixLayout{u(p.k), u(p.n), p.k, 0} : LtMatrixLayout{u(p.n), u(p.k), p.n, 0};
  // cuBLASLt's B is our A: [rows x k] row-major is column-major [k x rows] (ld k); transA's [k x m] is
  // column-major [m x k] (ld m).
  s.transB = p.transA;
  s.b = p.transA ? LtMatrixLayout{u(rows), u(p.k), rows, 0} : LtMatrixLayout{u(p.k), u(rows), p.k, 0};
  // C: [rows x n] row-major is column-major [n x rows]; the bias (length n) runs down its rows.
  s.c = LtMatrixLayout{u(p.n), u(rows), p.n, 0};
  if (batched) {
    s.a.batchStride = p.strideB;
    s.b.batchStride = p.strideA;
    s.c.batchStride = p.strideC;
  }
  *shape = s;
  return true;
}

GemmRunner::~GemmRunner() {
  for (void* layout : layouts_)
    if (layout) api_->cublasLtMatrixLayoutDestroy(layout);
  if (desc_) api_->cublasLtMatmulDescDestroy(desc_);
}

bool GemmRunner::check(CublasStatus status, const char* call, std::string* error) const {
  if (status == lt::kStatusSuccess) return true;
  return fail(error, "cuBLASLt: " + describeGemm(params_) + ": " + describeCublasStatus(*api_, status, call));
}

std::unique_ptr<GemmRunner> GemmRunner::create(const CublasLtApi& api, void* ltHandle, const GemmParams& p,
                                               const GemmBuffers& buffers, std::string* error) {
  LtGemmShape shape;
  if (!ltGemmShape(p, &shape, error)) return nullptr;
  if (!buffers.a || !buffers.b || !buffers.c || (p.hasBias() && !buffers.bias) ||
      (buffers.workspaceBytes && !buffers.workspace)) {
    fail(error, "cuBLASLt: a null device pointer for " + describeGemm(p));
    return nullptr;
  }
  std::unique_ptr<GemmRunner> r(new GemmRunner());
  r->api_ = &api;
  r->handle_ = ltHandle;
  r->params_ = p;
  r->shape_ = shape;
  r->buffers_ = buffers;
  if (!p.hasBias()) r->buffers_.bias = 0;
  if (!r->createDescriptor(error) || !r->createLayouts(error) || !r->chooseAlgorithm(error)) return nullptr;
  return r;
}

// Created objects are adopted only on success below: a failed create leaves its output unspecified.

bool GemmRunner::createDescriptor(std::string* error) {
  const bool f64 = params_.dtype == 11;
  const int32_t computeType = f64 ? lt::kCompute64F : params_.allowTf32 ? lt::kCompute32FFastTf32 : lt::kCompute32F;
  void* created = nullptr;
  if (!check(api_->cublasLtMatmulDescCreate(&created, computeType, f64 ? lt::kDataR64F : lt::kDataR32F),
             "cublasLtMatmulDescCreate", error))
    return false;
  desc_ = created;
  const auto set = [&](int32_t attr, const void* value, size_t bytes) {
    return check(api_->cublasLtMatmulDescSetAttribute(desc_, attr, value, bytes), "cublasLtMatmulDescSetAttribute",
                 error);
  };
  const int32_t opA = shape_.transA ? lt::kOpT : lt::kOpN, opB = shape_.transB ? lt::kOpT : lt::kOpN;
  static constexpr uint32_t kEpilogues[] = {lt::kEpilogueDefault, lt::kEpilogueRelu, lt::kEpilogueBias,
                                            lt::kEpilogueReluBias};
  const uint32_t epilogue = kEpilogues[static_cast<size_t>(params_.epilogue)];
  // The attribute takes the address of a pointer variable; the heuristic reads its alignment too.
  const void* biasPointer = toPointer(buffers_.bias);
  return set(lt::kDescTransA, &opA, sizeof(opA)) && set(lt::kDescTransB, &opB, sizeof(opB)) &&
         set(lt::kDescEpilogue, &epilogue, sizeof(epilogue)) &&
         (!params_.hasBias() || set(lt::kDescBiasPointer, &biasPointer, sizeof(biasPointer)));
}

bool GemmRunner::createLayouts(std::string* error) {
  // cuBLASLt's A and B are our B and A: the operands' type; C (= D) the result's.
  const LtMatrixLayout* layouts[3] = {&shape_.a, &shape_.b, &shape_.c};
  const int32_t dataTypes[3] = {ltDataType(params_.operandType()), ltDataType(params_.operandType()),
                                ltDataType(params_.dtype)};
  for (int i = 0; i < 3; ++i) {
    const LtMatrixLayout& l = *layouts[i];
    void* created = nullptr;
    if (!check(api_->cublasLtMatrixLayoutCreate(&created, dataTypes[i], l.rows, l.cols, l.ld),
               "cublasLtMatrixLayoutCreate", error))
      return false;
    layouts_[i] = created;
    if (shape_.batch == 1) continue;
    const int32_t count = shape_.batch;
    const int64_t stride = l.batchStride;
    if (!check(api_->cublasLtMatrixLayoutSetAttribute(created, lt::kLayoutBatchCount, &count, sizeof(count)),
               "cublasLtMatrixLayoutSetAttribute", error) ||
        !check(api_->cublasLtMatrixLayoutSetAttribute(created, lt::kLayoutStridedBatchOffset, &stride, sizeof(stride)),
               "cublasLtMatrixLayoutSetAttribute", error))
      return false;
  }
  return true;
}

bool GemmRunner::chooseAlgorithm(std::string* error) {
  PreferenceGuard pref(*api_);
  void* created = nullptr;
  if (!check(api_->cublasLtMatmulPreferenceCreate(&created), "cublasLtMatmulPreferenceCreate", error)) return false;
  pref.adopt(created);
  const auto set = [&](int32_t attr, const void* value, size_t bytes) {
    return check(api_->cublasLtMatmulPreferenceSetAttribute(created, attr, value, bytes),
                 "cublasLtMatmulPreferenceSetAttribute", error);
  };
  const uint64_t operandBytes = gemmElementBytes(params_.operandType()), resultBytes = gemmElementBytes(params_.dtype);
  const uint64_t maxWorkspace = buffers_.workspaceBytes;
  const uint32_t alignA = operandAlignment(buffers_.b, shape_.a.batchStride, shape_.batch, operandBytes);
  const uint32_t alignB = operandAlignment(buffers_.a, shape_.b.batchStride, shape_.batch, operandBytes);
  const uint32_t alignC = operandAlignment(buffers_.c, shape_.c.batchStride, shape_.batch, resultBytes);
  if (!set(lt::kPrefMaxWorkspaceBytes, &maxWorkspace, sizeof(maxWorkspace)) ||
      !set(lt::kPrefMinAlignmentABytes, &alignA, sizeof(alignA)) ||
      !set(lt::kPrefMinAlignmentBBytes, &alignB, sizeof(alignB)) ||
      !set(lt::kPrefMinAlignmentCBytes, &alignC, sizeof(alignC)) ||
      !set(lt::kPrefMinAlignmentDBytes, &alignC, sizeof(alignC)))
    return false;

  CublasLtHeuristicResult result{};
  int returned = 0;
  const CublasStatus status = api_->cublasLtMatmulAlgoGetHeuristic(
      handle_, desc_, layouts_[0], layouts_[1], layouts_[2], layouts_[2], created, 1, &result, &returned);
  std::string reason;
  if (status != lt::kStatusSuccess)
    reason = describeCublasStatus(*api_, status, "cublasLtMatmulAlgoGetHeuristic");
  else if (returned < 1)
    reason = "cublasLtMatmulAlgoGetHeuristic returned no algorithm within a " + std::to_string(maxWorkspace) +
             "-byte workspace";
  else if (result.state != lt::kStatusSuccess)
    reason = describeCublasStatus(*api_, result.state, "cublasLtMatmulAlgoGetHeuristic result");
  if (!reason.empty())
    return fail(error, "cuBLASLt has no algorithm for " + describeGemm(params_) + " (" + reason + ")");
  algo_ = result.algo;
  algoWorkspaceBytes_ = result.workspaceSize;
  return true;
}

bool GemmRunner::run(void* stream, std::string* error) const {
  const bool f64 = params_.dtype == 11;
  const void* alpha = f64 ? static_cast<const void*>(&alphaF64_) : static_cast<const void*>(&alphaF32_);
  const void* beta = f64 ? static_cast<const void*>(&betaF64_) : static_cast<const void*>(&betaF32_);
  void* c = toPointer(buffers_.c);
  // beta = 0: C is not read, so passing D's buffer and layout as C costs nothing.
  const CublasStatus status = api_->cublasLtMatmul(
      handle_, desc_, alpha, toPointer(buffers_.b), layouts_[0], toPointer(buffers_.a), layouts_[1], beta, c,
      layouts_[2], c, layouts_[2], &algo_, toPointer(buffers_.workspace), buffers_.workspaceBytes, stream);
  if (status != lt::kStatusSuccess)
    return fail(error, describeCublasStatus(*api_, status, "cublasLtMatmul") + ": " + describeGemm(params_));
  return true;
}

}  // namespace nnc::rt::cuda
