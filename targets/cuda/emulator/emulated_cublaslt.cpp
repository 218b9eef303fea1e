// The emulated cuBLASLt (emulator.h): cuBLASLt's C ABI as plain functions that check every object,
// attribute, pointer, alignment and workspace they are given and compute the GEMM with a float64
// reference loop on the emulated stream.
//
// Stricter than cuBLASLt on purpose, so that a GemmRunner bug fails CI instead of corrupting memory
// on a GPU: only the attributes and values of cublaslt.h's `lt` namespace are accepted (a new one
// must be emulated before the runner uses it), and D may not overlap A, B, the bias, or C (unless C
// is D). Every refusal is CUBLAS_STATUS_INVALID_VALUE (an invalid handle: NOT_INITIALIZED), also for
// values real cuBLASLt supports but the emulator does not (its NOT_SUPPORTED would hide which
// argument was wrong); the reason is kept per thread and GetStatusString returns it with the status.
#include <algorithm>
#include <bit>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <limits>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <variant>
#include <vector>

#include "runtime/cuda/emulator.h"

namespace nnc::rt::cuda::emu {
namespace {

constexpr CublasStatus kNotInitialized = 1;  // CUBLAS_STATUS_NOT_INITIALIZED
constexpr CublasStatus kInvalidValue = 7;    // CUBLAS_STATUS_INVALID_VALUE
constexpr CublasStatus kExecutionFailed = 13;
constexpr size_t kVersion = 130000;  // 13.0.0, as CUBLAS_VERSION spells it

// ---- Why the calling thread's last call failed (cleared by every successful call).

thread_local CublasStatus tLastStatus = lt::kStatusSuccess;
thread_local std::string tLastReason;

CublasStatus succeed() {
  tLastStatus = lt::kStatusSuccess;
  tLastReason.clear();
  return lt::kStatusSuccess;
}

CublasStatus refuse(CublasStatus status, std::string reason) {
  tLastStatus = status;
  tLastReason = std::move(reason);
  return status;
}

std::string hex(uint64_t value) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "0x%" PRIx64, value);
  return buf;
}
std::string hex(const void* ptr) { return hex(static_cast<uint64_t>(reinterpret_cast<uintptr_t>(ptr))); }

// ---- Objects. Each is a token, never dereferenced: a non-canonical address (no real or device
// pointer can equal one) carrying a serial that is never reused, so a destroyed object stays
// recognisable as destroyed and a stray pointer is never taken for an object.

enum class Kind : uint64_t { Handle = 1, Desc = 2, Layout = 3, Pref = 4 };

const char* kindName(Kind kind) {
  switch (kind) {
    case Kind::Handle: return "cuBLASLt handle";
    case Kind::Desc: return "matmul descriptor";
    case Kind::Layout: return "matrix layout";
    case Kind::Pref: return "matmul preference";
  }
  return "object";
}

struct HandleState {};
struct DescState {
  int32_t computeType = 0, scaleType = 0;
  int32_t transA = lt::kOpN, transB = lt::kOpN;
  uint32_t epilogue = lt::kEpilogueDefault;
  const void* bias = nullptr;
};
struct LayoutState {
  int32_t type = 0;
  uint64_t rows = 0, cols = 0;
  int64_t ld = 0;
  int32_t batch = 1;
  int64_t batchStride = 0;  // elements
  bool operator==(const LayoutState&) const = default;
};
struct PrefState {
  uint64_t maxWorkspaceBytes = 0;                   // cuBLASLt's defaults
  uint32_t minAlignment[4] = {256, 256, 256, 256};  // A, B, C, D
};
using State = std::variant<HandleState, DescState, LayoutState, PrefState>;  // in Kind's order

constexpr uint64_t kTokenTag = 0x4c54000000000000;  // "LT": bits 48-63 not a sign extension of bit 47
constexpr uint64_t kTokenTagMask = 0xffff000000000000;

Kind kindOf(const State& s) { return static_cast<Kind>(s.index() + 1); }

class Registry {
 public:
  void* create(State state) {
    std::lock_guard<std::mutex> lock(mu_);
    const uint64_t token = kTokenTag | (nextSerial_++ << 4) | static_cast<uint64_t>(kindOf(state));
    live_.emplace(token, std::move(state));
    return reinterpret_cast<void*>(static_cast<uintptr_t>(token));
  }

  // Runs fn(T&) on the live object `obj` of type T under the lock; false with *why otherwise.
  template <class T, class F>
  bool with(const void* obj, const char* role, std::string* why, F&& fn) {
    std::lock_guard<std::mutex> lock(mu_);
    T* v = findLocked<T>(obj, role, why);
    if (v) fn(*v);
    return v != nullptr;
  }

  template <class T>
  bool get(const void* obj, const char* role, std::string* why, T* out) {
    return with<T>(obj, role, why, [out](const T& v) { *out = v; });
  }

  template <class T>
  bool destroy(void* obj, const char* role, std::string* why) {
    std::lock_guard<std::mutex> lock(mu_);
    if (!findLocked<T>(obj, role, why)) return false;
    live_.erase(reinterpret_cast<uintptr_t>(obj));
    return true;
  }

 private:
  template <class T>
  T* findLocked(const void* obj, const char* role, std::string* why) {
    const uint64_t token = reinterpret_cast<uintptr_t>(obj);
    const Kind want = kindOf(State(T{}));
    auto it = live_.find(token);
    if (it != live_.end() && kindOf(it->second) == want) return &std::get<T>(it->second);
    *why = std::string(role) + " " + hex(obj);
    if (!obj)
      *why = std::string(role) + " is null";
    else if (it != live_.end())
      *why += " is a " + std::string(kindName(kindOf(it->second))) + ", not a " + kindName(want);
    else if ((token & kTokenTagMask) == kTokenTag && (token & ~kTokenTagMask) >> 4 < nextSerial_)
      *why += " is a destroyed " + std::string(kindName(static_cast<Kind>(token & 15)));
    else
      *why += " is not a " + std::string(kindName(want));
    return nullptr;
  }

  std::mutex mu_;
  std::unordered_map<uint64_t, State> live_;
  uint64_t nextSerial_ = 1;
};

Registry& registry() {
  static Registry* r = new Registry();  // never destroyed: runners may be torn down at exit
  return *r;
}

// Looks `obj` up as a T for `call`; a failure's status (INVALID_VALUE, NOT_INITIALIZED for a
// handle) and reason are recorded.
template <class T>
CublasStatus lookup(const char* call, const void* obj, const char* role, T* out) {
  std::string why;
  if (registry().get<T>(obj, role, &why, out)) return lt::kStatusSuccess;
  return refuse(std::is_same_v<T, HandleState> ? kNotInitialized : kInvalidValue, std::string(call) + ": " + why);
}

template <class T>
CublasStatus destroyObject(const char* call, void* obj, const char* role) {
  std::string why;
  if (!registry().destroy<T>(obj, role, &why))
    return refuse(std::is_same_v<T, HandleState> ? kNotInitialized : kInvalidValue, std::string(call) + ": " + why);
  return succeed();
}

// Reads an attribute value of exactly T's size.
template <class T>
bool readAttribute(const void* buf, size_t bytes, T* value) {
  if (!buf || bytes != sizeof(T)) return false;
  std::memcpy(value, buf, sizeof(T));
  return true;
}

bool isPowerOfTwo(uint64_t v) { return v && !(v & (v - 1)); }

// ---- Handle

CublasStatus ltCreate(void** handle) {
  if (!handle) return refuse(kInvalidValue, "cublasLtCreate: handle is null");
  *handle = registry().create(HandleState{});
  return succeed();
}

CublasStatus ltDestroy(void* handle) { return destroyObject<HandleState>("cublasLtDestroy", handle, "handle"); }

// ---- Matmul descriptor

int32_t dataTypeOfScale(int32_t computeType) { return computeType == lt::kCompute64F ? lt::kDataR64F : lt::kDataR32F; }

CublasStatus descCreate(void** desc, int32_t computeType, int32_t scaleType) {
  constexpr const char* kCall = "cublasLtMatmulDescCreate";
  if (!desc) return refuse(kInvalidValue, std::string(kCall) + ": matmulDesc is null");
  if (computeType != lt::kCompute32F && computeType != lt::kCompute32FFastTf32 && computeType != lt::kCompute64F)
    return refuse(kInvalidValue, std::string(kCall) + ": computeType " + std::to_string(computeType) +
                                     " is not emulated (32F, 32F_FAST_TF32 and 64F are)");
  if (scaleType != dataTypeOfScale(computeType))
    return refuse(kInvalidValue, std::string(kCall) + ": scaleType " + std::to_string(scaleType) +
                                     " does not go with computeType " + std::to_string(computeType));
  DescState s;
  s.computeType = computeType;
  s.scaleType = scaleType;
  *desc = registry().create(s);
  return succeed();
}

CublasStatus descDestroy(void* desc) {
  return destroyObject<DescState>("cublasLtMatmulDescDestroy", desc, "matmulDesc");
}

CublasStatus descSetAttribute(void* desc, int32_t attr, const void* buf, size_t bytes) {
  constexpr const char* kCall = "cublasLtMatmulDescSetAttribute";
  DescState probe;
  if (CublasStatus s = lookup(kCall, desc, "matmulDesc", &probe); s != lt::kStatusSuccess) return s;
  const std::string prefix = std::string(kCall) + ": attribute " + std::to_string(attr) + ": ";
  // Parse and check the value first; the descriptor changes only when it is valid.
  std::function<void(DescState&)> apply;
  switch (attr) {
    case lt::kDescTransA:
    case lt::kDescTransB: {
      int32_t op = 0;
      if (!readAttribute(buf, bytes, &op))
        return refuse(kInvalidValue,
                      prefix + "TRANSA/TRANSB takes an int32_t, got " + std::to_string(bytes) + " bytes");
      if (op != lt::kOpN && op != lt::kOpT)
        return refuse(kInvalidValue, prefix + "operation " + std::to_string(op) + " is not N or T");
      apply = [attr, op](DescState& d) { (attr == lt::kDescTransA ? d.transA : d.transB) = op; };
      break;
    }
    case lt::kDescEpilogue: {
      uint32_t e = 0;
      if (!readAttribute(buf, bytes, &e))
        return refuse(kInvalidValue, prefix + "EPILOGUE takes a uint32_t, got " + std::to_string(bytes) + " bytes");
      if (e != lt::kEpilogueDefault && e != lt::kEpilogueRelu && e != lt::kEpilogueBias && e != lt::kEpilogueReluBias)
        return refuse(kInvalidValue, prefix + "epilogue " + std::to_string(e) + " is not emulated");
      apply = [e](DescState& d) { d.epilogue = e; };
      break;
    }
    case lt::kDescBiasPointer: {
      const void* bias = nullptr;
      if (!readAttribute(buf, bytes, &bias))
        return refuse(kInvalidValue, prefix + "BIAS_POINTER takes a pointer, got " + std::to_string(bytes) + " bytes");
      apply = [bias](DescState& d) { d.bias = bias; };
      break;
    }
    default: return refuse(kInvalidValue, prefix + "not emulated");
  }
  std::string why;
  if (!registry().with<DescState>(desc, "matmulDesc", &why, apply))  // destroyed meanwhile
    return refuse(kInvalidValue, std::string(kCall) + ": " + why);
  return succeed();
}

// ---- Matrix layout

size_t elementBytes(int32_t type) {
  return type == lt::kDataR64F ? 8 : type == lt::kDataR16F || type == lt::kDataR16BF ? 2 : 4;
}

bool isHalfType(int32_t type) { return type == lt::kDataR16F || type == lt::kDataR16BF; }

CublasStatus layoutCreate(void** layout, int32_t type, uint64_t rows, uint64_t cols, int64_t ld) {
  const std::string prefix = "cublasLtMatrixLayoutCreate: ";
  if (!layout) return refuse(kInvalidValue, prefix + "matLayout is null");
  if (type != lt::kDataR32F && type != lt::kDataR64F && !isHalfType(type))
    return refuse(kInvalidValue,
                  prefix + "type " + std::to_string(type) + " is not emulated (R_32F, R_64F, R_16F and R_16BF are)");
  // Bounded so that every extent computed from a layout fits 64 bits.
  constexpr uint64_t kMaxDim = INT32_MAX;
  if (rows < 1 || cols < 1 || rows > kMaxDim || cols > kMaxDim)
    return refuse(kInvalidValue, prefix + std::to_string(rows) + " x " + std::to_string(cols) +
                                     ": rows and cols must be in [1, 2^31 - 1]");
  if (ld < static_cast<int64_t>(rows))  // column-major: the columns would overlap
    return refuse(kInvalidValue, prefix + "ld " + std::to_string(ld) + " is below rows " + std::to_string(rows));
  if (ld > static_cast<int64_t>(kMaxDim))
    return refuse(kInvalidValue, prefix + "ld " + std::to_string(ld) + " is beyond 2^31 - 1");
  LayoutState s;
  s.type = type;
  s.rows = rows;
  s.cols = cols;
  s.ld = ld;
  *layout = registry().create(s);
  return succeed();
}

CublasStatus layoutDestroy(void* layout) {
  return destroyObject<LayoutState>("cublasLtMatrixLayoutDestroy", layout, "matLayout");
}

CublasStatus layoutSetAttribute(void* layout, int32_t attr, const void* buf, size_t bytes) {
  constexpr const char* kCall = "cublasLtMatrixLayoutSetAttribute";
  LayoutState probe;
  if (CublasStatus s = lookup(kCall, layout, "matLayout", &probe); s != lt::kStatusSuccess) return s;
  const std::string prefix = std::string(kCall) + ": attribute " + std::to_string(attr) + ": ";
  std::function<void(LayoutState&)> apply;
  if (attr == lt::kLayoutBatchCount) {
    int32_t count = 0;
    if (!readAttribute(buf, bytes, &count))
      return refuse(kInvalidValue, prefix + "BATCH_COUNT takes an int32_t, got " + std::to_string(bytes) + " bytes");
    if (count < 1) return refuse(kInvalidValue, prefix + "batch count " + std::to_string(count) + " is below 1");
    apply = [count](LayoutState& l) { l.batch = count; };
  } else if (attr == lt::kLayoutStridedBatchOffset) {
    int64_t stride = 0;
    if (!readAttribute(buf, bytes, &stride))
      return refuse(kInvalidValue,
                    prefix + "STRIDED_BATCH_OFFSET takes an int64_t, got " + std::to_string(bytes) + " bytes");
    // cuBLASLt takes negative strides; the runner never makes one, and extents assume none.
    if (stride < 0)
      return refuse(kInvalidValue, prefix + "batch stride " + std::to_string(stride) + " is not emulated");
    apply = [stride](LayoutState& l) { l.batchStride = stride; };
  } else {
    return refuse(kInvalidValue, prefix + "not emulated");
  }
  std::string why;
  if (!registry().with<LayoutState>(layout, "matLayout", &why, apply))
    return refuse(kInvalidValue, std::string(kCall) + ": " + why);
  return succeed();
}

// ---- Matmul preference

CublasStatus prefCreate(void** pref) {
  if (!pref) return refuse(kInvalidValue, "cublasLtMatmulPreferenceCreate: pref is null");
  *pref = registry().create(PrefState{});
  return succeed();
}

CublasStatus prefDestroy(void* pref) {
  return destroyObject<PrefState>("cublasLtMatmulPreferenceDestroy", pref, "pref");
}

CublasStatus prefSetAttribute(void* pref, int32_t attr, const void* buf, size_t bytes) {
  constexpr const char* kCall = "cublasLtMatmulPreferenceSetAttribute";
  PrefState probe;
  if (CublasStatus s = lookup(kCall, pref, "pref", &probe); s != lt::kStatusSuccess) return s;
  const std::string prefix = std::string(kCall) + ": attribute " + std::to_string(attr) + ": ";
  std::function<void(PrefState&)> apply;
  if (attr == lt::kPrefMaxWorkspaceBytes) {
    uint64_t max = 0;
    if (!readAttribute(buf, bytes, &max))
      return refuse(kInvalidValue,
                    prefix + "MAX_WORKSPACE_BYTES takes a uint64_t, got " + std::to_string(bytes) + " bytes");
    apply = [max](PrefState& p) { p.maxWorkspaceBytes = max; };
  } else if (attr >= lt::kPrefMinAlignmentABytes && attr <= lt::kPrefMinAlignmentDBytes) {
    uint32_t alignment = 0;
    if (!readAttribute(buf, bytes, &alignment))
      return refuse(kInvalidValue,
                    prefix + "MIN_ALIGNMENT_*_BYTES takes a uint32_t, got " + std::to_string(bytes) + " bytes");
    if (!isPowerOfTwo(alignment))
      return refuse(kInvalidValue, prefix + "alignment " + std::to_string(alignment) + " is not a power of two");
    const int index = attr - lt::kPrefMinAlignmentABytes;
    apply = [index, alignment](PrefState& p) { p.minAlignment[index] = alignment; };
  } else {
    return refuse(kInvalidValue, prefix + "not emulated");
  }
  std::string why;
  if (!registry().with<PrefState>(pref, "pref", &why, apply))
    return refuse(kInvalidValue, std::string(kCall) + ": " + why);
  return succeed();
}

// ---- The problem a descriptor and four layouts describe

struct Problem {
  uint64_t m = 0, n = 0, k = 0;
  int32_t batch = 1;
  bool transA = false, transB = false;
  int32_t computeType = 0;
  uint32_t epilogue = 0;
  DescState desc;
  LayoutState a, b, c, d;
};

bool hasBias(uint32_t epilogue) { return epilogue == lt::kEpilogueBias || epilogue == lt::kEpilogueReluBias; }
bool hasRelu(uint32_t epilogue) { return epilogue == lt::kEpilogueRelu || epilogue == lt::kEpilogueReluBias; }

std::string describe(const LayoutState& l) {
  return std::to_string(l.rows) + "x" + std::to_string(l.cols) + " ld " + std::to_string(l.ld) + " type " +
         std::to_string(l.type) + " batch " + std::to_string(l.batch) + " stride " + std::to_string(l.batchStride);
}

// Elements from a matrix's first element to one past its last (layoutCreate's bounds keep this
// within 63 bits).
uint64_t matrixElements(const LayoutState& l) { return (l.cols - 1) * static_cast<uint64_t>(l.ld) + l.rows; }

// Bytes from an operand's first element to one past its last, over all batches; false when that
// does not fit 64 bits.
bool extentBytes(const LayoutState& l, uint64_t* bytes) {
  uint64_t batches = 0, elements = 0;
  return !__builtin_mul_overflow(static_cast<uint64_t>(l.batch - 1), static_cast<uint64_t>(l.batchStride), &batches) &&
         !__builtin_add_overflow(batches, matrixElements(l), &elements) &&
         !__builtin_mul_overflow(elements, elementBytes(l.type), bytes);
}

// Looks up the descriptor and the four layouts and checks they describe one GEMM.
CublasStatus problemOf(const char* call, void* descObj, void* aObj, void* bObj, void* cObj, void* dObj, Problem* p) {
  if (CublasStatus s = lookup(call, descObj, "computeDesc", &p->desc); s != lt::kStatusSuccess) return s;
  if (CublasStatus s = lookup(call, aObj, "Adesc", &p->a); s != lt::kStatusSuccess) return s;
  if (CublasStatus s = lookup(call, bObj, "Bdesc", &p->b); s != lt::kStatusSuccess) return s;
  if (CublasStatus s = lookup(call, cObj, "Cdesc", &p->c); s != lt::kStatusSuccess) return s;
  if (CublasStatus s = lookup(call, dObj, "Ddesc", &p->d); s != lt::kStatusSuccess) return s;
  const std::string prefix = std::string(call) + ": ";
  const DescState& desc = p->desc;
  const LayoutState* layouts[] = {&p->a, &p->b, &p->c, &p->d};
  const char* names = "ABCD";
  // A and B may be half types (one of them for both) under CUBLAS_COMPUTE_32F with f32 C and D, one of
  // the mixed-precision combinations cuBLASLt lists; otherwise every type is the scale type.
  const bool mixed = isHalfType(p->a.type) || isHalfType(p->b.type);
  if (mixed && (p->a.type != p->b.type || desc.computeType != lt::kCompute32F))
    return refuse(kInvalidValue, prefix + "A's type " + std::to_string(p->a.type) + " and B's type " +
                                     std::to_string(p->b.type) + " under computeType " +
                                     std::to_string(desc.computeType) +
                                     " are not an emulated combination (both R_16F or both R_16BF, COMPUTE_32F)");
  for (int i = 0; i < 4; ++i) {
    if (layouts[i]->type != desc.scaleType && !(i < 2 && mixed))
      return refuse(kInvalidValue, prefix + names[i] + "'s type " + std::to_string(layouts[i]->type) +
                                       " is not the scale type " + std::to_string(desc.scaleType));
    uint64_t bytes = 0;
    if (!extentBytes(*layouts[i], &bytes))
      return refuse(kInvalidValue, prefix + names[i] + " (" + describe(*layouts[i]) + ") spans more than 2^64 bytes");
  }
  if (!(p->c == p->d))
    return refuse(kInvalidValue, prefix + "C (" + describe(p->c) + ") and D (" + describe(p->d) + ") differ");
  p->transA = desc.transA == lt::kOpT;
  p->transB = desc.transB == lt::kOpT;
  p->m = p->d.rows;
  p->n = p->d.cols;
  p->k = p->transA ? p->a.rows : p->a.cols;
  const uint64_t am = p->transA ? p->a.cols : p->a.rows;
  const uint64_t bk = p->transB ? p->b.cols : p->b.rows, bn = p->transB ? p->b.rows : p->b.cols;
  if (am != p->m || bk != p->k || bn != p->n)
    return refuse(kInvalidValue, prefix + "op(A) is " + std::to_string(am) + "x" + std::to_string(p->k) + ", op(B) " +
                                     std::to_string(bk) + "x" + std::to_string(bn) + ", D " + std::to_string(p->m) +
                                     "x" + std::to_string(p->n) + ": not one GEMM");
  p->batch = p->d.batch;
  if (p->a.batch != p->batch || p->b.batch != p->batch)
    return refuse(kInvalidValue, prefix + "batch counts differ: A " + std::to_string(p->a.batch) + ", B " +
                                     std::to_string(p->b.batch) + ", D " + std::to_string(p->batch));
  // Overlapping batches of D would race on a GPU.
  if (p->batch > 1 && static_cast<uint64_t>(p->d.batchStride) < matrixElements(p->d))
    return refuse(kInvalidValue, prefix + "D's batches overlap (" + describe(p->d) + ")");
  p->computeType = desc.computeType;
  p->epilogue = desc.epilogue;
  if (hasBias(p->epilogue) && !desc.bias)
    return refuse(kInvalidValue, prefix + "the epilogue adds a bias but BIAS_POINTER is null");
  return lt::kStatusSuccess;
}

// ---- The algorithm: a fingerprint of the problem it was chosen for, with a checksum word.

constexpr uint64_t kAlgoMagic = 0x6e6e63456d754c74;  // "nncEmuLt"

uint64_t mix(uint64_t h, uint64_t v) {
  h ^= v + 0x9e3779b97f4a7c15 + (h << 6) + (h >> 2);
  return h * 0xff51afd7ed558ccd;
}

uint64_t checksum(const CublasLtMatmulAlgo& algo) {
  uint64_t h = kAlgoMagic;
  for (int i = 1; i < 8; ++i) h = mix(h, algo.data[i]);
  return h;
}

// data[1..4]: m, n, k, batch; data[5]: transposes, compute type, epilogue; data[6], data[7]: the
// minimum alignments of A, B and C, D the preference promised.
CublasLtMatmulAlgo fingerprint(const Problem& p, const uint32_t alignment[4]) {
  CublasLtMatmulAlgo algo{};
  algo.data[1] = p.m;
  algo.data[2] = p.n;
  algo.data[3] = p.k;
  algo.data[4] = static_cast<uint64_t>(p.batch);
  algo.data[5] = uint64_t{p.transA} | uint64_t{p.transB} << 1 | uint64_t{static_cast<uint16_t>(p.computeType)} << 8 |
                 uint64_t{p.epilogue} << 32;
  algo.data[6] = alignment[0] | uint64_t{alignment[1]} << 32;
  algo.data[7] = alignment[2] | uint64_t{alignment[3]} << 32;
  algo.data[0] = checksum(algo);
  return algo;
}

CublasStatus algoGetHeuristic(void* handle, void* desc, void* aLayout, void* bLayout, void* cLayout, void* dLayout,
                              void* pref, int requestedCount, CublasLtHeuristicResult* results, int* returnedCount) {
  constexpr const char* kCall = "cublasLtMatmulAlgoGetHeuristic";
  if (returnedCount) *returnedCount = 0;
  HandleState h;
  if (CublasStatus s = lookup(kCall, handle, "lightHandle", &h); s != lt::kStatusSuccess) return s;
  if (!returnedCount || !results)
    return refuse(kInvalidValue, std::string(kCall) + ": heuristicResultsArray or returnAlgoCount is null");
  if (requestedCount < 1)
    return refuse(kInvalidValue, std::string(kCall) + ": requestedAlgoCount " + std::to_string(requestedCount));
  Problem p;
  if (CublasStatus s = problemOf(kCall, desc, aLayout, bLayout, cLayout, dLayout, &p); s != lt::kStatusSuccess)
    return s;
  PrefState prefState;
  if (CublasStatus s = lookup(kCall, pref, "preference", &prefState); s != lt::kStatusSuccess) return s;
  // The reference loop needs no workspace: 0 fits every MAX_WORKSPACE_BYTES.
  CublasLtHeuristicResult r{};
  r.algo = fingerprint(p, prefState.minAlignment);
  r.workspaceSize = 0;
  r.state = lt::kStatusSuccess;
  r.wavesCount = 1.0f;
  results[0] = r;
  *returnedCount = 1;
  return succeed();
}

// ---- Matmul

// TF32: 10 explicit mantissa bits, rounded to nearest even (non-finite values pass unchanged).
float roundToTf32(float x) {
  uint32_t bits = std::bit_cast<uint32_t>(x);
  if ((bits & 0x7f800000) == 0x7f800000) return x;
  bits += 0xfff + ((bits >> 13) & 1);
  return std::bit_cast<float>(bits & ~uint32_t{0x1fff});
}

// Everything the enqueued GEMM needs, by value (the caller's objects may be destroyed or changed
// before a captured graph replays it, as with cuBLASLt).
struct Job {
  Problem p;
  uint64_t a = 0, b = 0, c = 0, d = 0, bias = 0;
  double alpha = 0, beta = 0;
  bool readC = false;
  uint32_t alignment[4] = {};  // of A, B, C, D, recorded in the algo
};

// The memory an operand spans, [ptr, ptr + bytes), and the alignment its pointer needs.
struct Range {
  const char* name;
  uint64_t ptr, bytes, alignment;
};

// D first; C only when it is read (problemOf checked that the extents fit).
std::vector<Range> rangesOf(const Job& j) {
  const uint64_t e = elementBytes(j.p.d.type);
  const auto range = [&](const char* name, uint64_t ptr, const LayoutState& l, uint32_t alignment) {
    Range r{name, ptr, 0, std::max<uint64_t>(alignment, elementBytes(l.type))};
    extentBytes(l, &r.bytes);
    return r;
  };
  std::vector<Range> r = {range("D", j.d, j.p.d, j.alignment[3]), range("A", j.a, j.p.a, j.alignment[0]),
                          range("B", j.b, j.p.b, j.alignment[1])};
  if (j.readC) r.push_back(range("C", j.c, j.p.c, j.alignment[2]));
  if (hasBias(j.p.epilogue)) r.push_back({"bias", j.bias, j.p.m * e, e});
  return r;
}

// IEEE binary16 and bfloat16 bits as a double (exact), decoded here rather than with the compiler's
// conversions so that the emulator stays an independent oracle.
double halfBitsToDouble(uint16_t h) {
  const int sign = h >> 15, exponent = (h >> 10) & 0x1f, mantissa = h & 0x3ff;
  double v;
  if (exponent == 0x1f)
    v = mantissa ? std::numeric_limits<double>::quiet_NaN() : std::numeric_limits<double>::infinity();
  else if (exponent == 0)
    v = std::ldexp(static_cast<double>(mantissa), -24);  // subnormal
  else
    v = std::ldexp(static_cast<double>(mantissa | 0x400), exponent - 25);
  return sign ? -v : v;
}
double bf16BitsToDouble(uint16_t h) { return std::bit_cast<float>(static_cast<uint32_t>(h) << 16); }

// Element `index` of an operand of layout type `type` (the result type T, or a half type) at `base`.
template <class T>
double loadOperand(uint64_t base, uint64_t index, int32_t type, bool tf32) {
  if (isHalfType(type)) {
    const uint16_t bits = reinterpret_cast<const uint16_t*>(base)[index];
    return type == lt::kDataR16F ? halfBitsToDouble(bits) : bf16BitsToDouble(bits);
  }
  const T x = reinterpret_cast<const T*>(base)[index];
  if constexpr (std::is_same_v<T, float>)
    if (tf32) return roundToTf32(x);
  return x;
}

// Columns [j0, j1) of batch `bt` of D; opA: op(A) of the batch as m rows of k, in double.
template <class T>
void computeColumns(const Job& j, int32_t bt, const std::vector<double>& opA, uint64_t j0, uint64_t j1) {
  const Problem& p = j.p;
  const bool tf32 = p.computeType == lt::kCompute32FFastTf32;
  const uint64_t b = j.b, bOffset = static_cast<uint64_t>(bt) * static_cast<uint64_t>(p.b.batchStride);
  const T* c = reinterpret_cast<const T*>(j.c) + bt * p.c.batchStride;
  T* d = reinterpret_cast<T*>(j.d) + bt * p.d.batchStride;
  const T* bias = reinterpret_cast<const T*>(j.bias);
  const uint64_t m = p.m, k = p.k;
  std::vector<double> opB(k);  // column `col` of op(B): the dot products run with stride 1
  for (uint64_t col = j0; col < j1; ++col) {
    for (uint64_t q = 0; q < k; ++q)
      opB[q] = loadOperand<T>(b, bOffset + (p.transB ? col + q * p.b.ld : q + col * p.b.ld), p.b.type, tf32);
    for (uint64_t i = 0; i < m; ++i) {
      const double* row = &opA[i * k];
      double sum = 0;
      for (uint64_t q = 0; q < k; ++q) sum += row[q] * opB[q];
      double v = j.alpha * sum;
      if (j.readC) v += j.beta * static_cast<double>(c[i + col * p.c.ld]);
      if (hasBias(p.epilogue)) v += static_cast<double>(bias[i]);
      if (hasRelu(p.epilogue)) v = v > 0 ? v : 0;  // NaN -> 0, as cuBLASLt's ReLU
      d[i + col * p.d.ld] = static_cast<T>(v);
    }
  }
}

// Each batch of D, its columns split across threads when the GEMM is large (the values do not
// depend on the split).
template <class T>
void compute(const Job& j) {
  const Problem& p = j.p;
  const bool tf32 = p.computeType == lt::kCompute32FFastTf32;
  const double work = static_cast<double>(p.m) * static_cast<double>(p.n) * static_cast<double>(p.k);
  const uint64_t threads = std::min<uint64_t>(
      {static_cast<uint64_t>(std::min(work / (1 << 20), 64.0)), std::thread::hardware_concurrency(), p.n, 16});
  std::vector<double> opA(p.m * p.k);
  for (int32_t bt = 0; bt < p.batch; ++bt) {
    const uint64_t aOffset = static_cast<uint64_t>(bt) * static_cast<uint64_t>(p.a.batchStride);
    for (uint64_t i = 0; i < p.m; ++i)
      for (uint64_t q = 0; q < p.k; ++q)
        opA[i * p.k + q] = loadOperand<T>(j.a, aOffset + (p.transA ? q + i * p.a.ld : i + q * p.a.ld), p.a.type, tf32);
    if (threads <= 1) {
      computeColumns<T>(j, bt, opA, 0, p.n);
      continue;
    }
    std::vector<std::thread> pool;
    for (uint64_t t = 0; t < threads; ++t)
      pool.emplace_back(computeColumns<T>, std::cref(j), bt, std::cref(opA), p.n * t / threads,
                        p.n * (t + 1) / threads);
    for (std::thread& th : pool) th.join();
  }
}

bool overlap(const Range& x, const Range& y) { return x.ptr < y.ptr + y.bytes && y.ptr < x.ptr + x.bytes; }

CublasStatus matmul(void* handle, void* descObj, const void* alpha, const void* a, void* aLayout, const void* b,
                    void* bLayout, const void* beta, const void* c, void* cLayout, void* d, void* dLayout,
                    const CublasLtMatmulAlgo* algo, void* workspace, size_t workspaceBytes, void* stream) {
  constexpr const char* kCall = "cublasLtMatmul";
  const std::string prefix = std::string(kCall) + ": ";
  HandleState h;
  if (CublasStatus s = lookup(kCall, handle, "lightHandle", &h); s != lt::kStatusSuccess) return s;
  Job job;
  Problem& p = job.p;
  if (CublasStatus s = problemOf(kCall, descObj, aLayout, bLayout, cLayout, dLayout, &p); s != lt::kStatusSuccess)
    return s;
  if (!algo) return refuse(kInvalidValue, prefix + "algo is null");
  if (algo->data[0] != checksum(*algo))
    return refuse(kInvalidValue, prefix + "algo is not one cublasLtMatmulAlgoGetHeuristic returned");
  uint32_t* alignment = job.alignment;
  alignment[0] = static_cast<uint32_t>(algo->data[6]);
  alignment[1] = static_cast<uint32_t>(algo->data[6] >> 32);
  alignment[2] = static_cast<uint32_t>(algo->data[7]);
  alignment[3] = static_cast<uint32_t>(algo->data[7] >> 32);
  const CublasLtMatmulAlgo expected = fingerprint(p, alignment);
  if (std::memcmp(&expected, algo, sizeof expected) != 0)
    return refuse(kInvalidValue, prefix + "algo was chosen for another problem (m n k batch " +
                                     std::to_string(algo->data[1]) + " " + std::to_string(algo->data[2]) + " " +
                                     std::to_string(algo->data[3]) + " " + std::to_string(algo->data[4]) + ", flags " +
                                     hex(algo->data[5]) + "), not for m n k batch " + std::to_string(p.m) + " " +
                                     std::to_string(p.n) + " " + std::to_string(p.k) + " " + std::to_string(p.batch) +
                                     ", flags " + hex(expected.data[5]));

  // alpha and beta: host values of the scale type (the pointer mode is host).
  const size_t e = elementBytes(p.desc.scaleType);
  std::string why;
  for (const auto& [name, ptr] : {std::pair<const char*, const void*>{"alpha", alpha}, {"beta", beta}}) {
    if (!ptr) return refuse(kInvalidValue, prefix + name + " is null");
    if (isDeviceRange(reinterpret_cast<uintptr_t>(ptr), e, &why))
      return refuse(kInvalidValue, prefix + name + " " + hex(ptr) + " is device memory, but the pointer mode is host");
  }
  const auto scalar = [&](const void* ptr) {
    if (e == 8) {
      double v;
      std::memcpy(&v, ptr, 8);
      return v;
    }
    float v;
    std::memcpy(&v, ptr, 4);
    return static_cast<double>(v);
  };
  job.alpha = scalar(alpha);
  job.beta = scalar(beta);
  job.readC = job.beta != 0;  // beta == 0: C is not read, as in cuBLAS
  job.a = reinterpret_cast<uintptr_t>(a);
  job.b = reinterpret_cast<uintptr_t>(b);
  job.c = reinterpret_cast<uintptr_t>(c);
  job.d = reinterpret_cast<uintptr_t>(d);
  job.bias = reinterpret_cast<uintptr_t>(p.desc.bias);

  // Each operand within one device allocation, aligned to its element and to what the preference
  // promised the heuristic.
  const std::vector<Range> ranges = rangesOf(job);
  const auto show = [](const Range& r) {
    return std::string(r.name) + " [" + hex(r.ptr) + ", +" + std::to_string(r.bytes) + " bytes)";
  };
  for (const Range& r : ranges) {
    if (!r.ptr) return refuse(kInvalidValue, prefix + r.name + " is null");
    if (!isDeviceRange(r.ptr, r.bytes, &why)) return refuse(kInvalidValue, prefix + show(r) + ": " + why);
    if (r.ptr % r.alignment != 0)
      return refuse(kInvalidValue, prefix + show(r) + " is not aligned to " + std::to_string(r.alignment) +
                                       " bytes (the element, or the preference's minimum alignment the algo was "
                                       "chosen for)");
  }
  // Only C may share memory with D, and only as D itself (in place).
  const Range& dRange = ranges[0];
  for (size_t i = 1; i < ranges.size(); ++i)
    if (overlap(ranges[i], dRange) && !(ranges[i].name[0] == 'C' && job.c == job.d))
      return refuse(kInvalidValue, prefix + show(dRange) + " overlaps " + show(ranges[i]));
  if (workspaceBytes > 0 && !isDeviceRange(reinterpret_cast<uintptr_t>(workspace), workspaceBytes, &why))
    return refuse(kInvalidValue,
                  prefix + "workspace [" + hex(workspace) + ", +" + std::to_string(workspaceBytes) + " bytes): " + why);

  const CUresult r = enqueue(stream, [job](std::string* error) {
    // A graph may replay this after a buffer was freed: check again rather than touch freed memory.
    std::string why;
    for (const Range& range : rangesOf(job))
      if (!isDeviceRange(range.ptr, range.bytes, &why)) {
        *error = std::string("cublasLtMatmul (enqueued): ") + range.name + " " + hex(range.ptr) + ": " + why;
        return false;
      }
    if (job.p.d.type == lt::kDataR64F)
      compute<double>(job);
    else
      compute<float>(job);
    return true;
  });
  if (r != kCudaSuccess)
    return refuse(kExecutionFailed,
                  prefix + "enqueueing on stream " + hex(stream) + " failed with CUresult " + std::to_string(r));
  return succeed();
}

// ---- Status messages

const char* statusName(CublasStatus status) {
  switch (status) {
    case 0: return "CUBLAS_STATUS_SUCCESS";
    case 1: return "CUBLAS_STATUS_NOT_INITIALIZED";
    case 3: return "CUBLAS_STATUS_ALLOC_FAILED";
    case 7: return "CUBLAS_STATUS_INVALID_VALUE";
    case 8: return "CUBLAS_STATUS_ARCH_MISMATCH";
    case 11: return "CUBLAS_STATUS_MAPPING_ERROR";
    case 13: return "CUBLAS_STATUS_EXECUTION_FAILED";
    case 14: return "CUBLAS_STATUS_INTERNAL_ERROR";
    case 15: return "CUBLAS_STATUS_NOT_SUPPORTED";
    case 16: return "CUBLAS_STATUS_LICENSE_ERROR";
  }
  return "CUBLAS_STATUS_UNKNOWN";
}

const char* statusSentence(CublasStatus status) {
  switch (status) {
    case 0: return "the operation completed successfully";
    case 1: return "the library was not initialized";
    case 3: return "the resource allocation failed";
    case 7: return "an invalid numeric value was used as an argument";
    case 8: return "an absent device architectural feature is required";
    case 11: return "an access to GPU memory space failed";
    case 13: return "the GPU program failed to execute";
    case 14: return "an internal operation failed";
    case 15: return "the functionality requested is not supported";
    case 16: return "an error was detected when checking the current licensing";
  }
  return "unknown status";
}

// The sentence, with the reason of the calling thread's last failure when it failed with `status`
// (describeCublasStatus asks right after the failing call). Valid until the thread's next call.
const char* statusString(CublasStatus status) {
  thread_local std::string text;
  if (status == lt::kStatusSuccess || status != tLastStatus || tLastReason.empty()) return statusSentence(status);
  text = std::string(statusSentence(status)) + "; emulator: " + tLastReason;
  return text.c_str();
}

size_t version() { return kVersion; }

}  // namespace

const CublasLtApi* emulatedCublasLt() {
  static const CublasLtApi api = [] {
    CublasLtApi a{};
    a.cublasLtCreate = ltCreate;
    a.cublasLtDestroy = ltDestroy;
    a.cublasLtMatmulDescCreate = descCreate;
    a.cublasLtMatmulDescDestroy = descDestroy;
    a.cublasLtMatmulDescSetAttribute = descSetAttribute;
    a.cublasLtMatrixLayoutCreate = layoutCreate;
    a.cublasLtMatrixLayoutDestroy = layoutDestroy;
    a.cublasLtMatrixLayoutSetAttribute = layoutSetAttribute;
    a.cublasLtMatmulPreferenceCreate = prefCreate;
    a.cublasLtMatmulPreferenceDestroy = prefDestroy;
    a.cublasLtMatmulPreferenceSetAttribute = prefSetAttribute;
    a.cublasLtMatmulAlgoGetHeuristic = algoGetHeuristic;
    a.cublasLtMatmul = matmul;
    a.cublasLtGetStatusName = statusName;
    a.cublasLtGetStatusString = statusString;
    a.cublasLtGetVersion = version;
    a.library = "nnc cuBLASLt emulator";
    return a;
  }();
  return &api;
}

}  // namespace nnc::rt::cuda::emu
