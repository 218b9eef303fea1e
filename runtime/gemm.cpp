// GEMM step parameters: encoding, validation against buffer sizes, and a readable description.
#include "runtime/gemm.h"

#include <cstdint>

#include "runtime/plan.h"

namespace nnc::rt {

namespace {

// Params layout (Step::params) of the GEMM encoding:
//   [0] encoding version   [1] dtype   [2] batch  [3] m  [4] n  [5] k
//   [6] transA  [7] transB  [8] strideA  [9] strideB  [10] strideC  [11] epilogue  [12] allowTf32
//   [13] operandDtype (encoding 2; encoding 1 has 13 params and A and B of dtype)
constexpr int64_t kGemmEncoding = 2;
constexpr size_t kGemmParamCount = 14;
constexpr size_t kGemmParamCountV1 = 13;

constexpr int32_t kF32 = 1, kF16 = 10, kF64 = 11, kBF16 = 16;  // nnc_dtype (ONNX numbering)

// cuBLASLt's dims are 32-bit; products of three of them never overflow int64.
constexpr int64_t kMaxGemmDim = INT32_MAX;

bool fail(std::string* error, const std::string& message) {
  if (error) *error = message;
  return false;
}

bool isBool(int64_t v) { return v == 0 || v == 1; }

// Elements the operand spans: `batch` matrices of `rows * cols`, `stride` apart (0: one matrix).
// Checked by the caller for overflow through kMaxGemmDim.
unsigned __int128 spanElements(int64_t batch, int64_t stride, int64_t rows, int64_t cols) {
  const unsigned __int128 matrix = static_cast<unsigned __int128>(rows) * static_cast<unsigned __int128>(cols);
  return static_cast<unsigned __int128>(batch - 1) * static_cast<unsigned __int128>(stride) + matrix;
}

}  // namespace

std::vector<int64_t> encodeGemm(const GemmParams& p) {
  return {kGemmEncoding,       p.dtype,          p.batch,   p.m,       p.n,       p.k,
          p.transA ? 1 : 0,    p.transB ? 1 : 0, p.strideA, p.strideB, p.strideC, static_cast<int64_t>(p.epilogue),
          p.allowTf32 ? 1 : 0, p.operandType()};
}

bool decodeGemm(const std::vector<int64_t>& v, GemmParams* p, std::string* error) {
  if (v.empty() || (v[0] != 1 && v[0] != kGemmEncoding))
    return fail(error,
                "gemm: unknown parameter encoding " + (v.empty() ? std::string("(none)") : std::to_string(v[0])));
  const size_t expected = v[0] == 1 ? kGemmParamCountV1 : kGemmParamCount;
  if (v.size() != expected)
    return fail(error, "gemm: " + std::to_string(v.size()) + " params, expected " + std::to_string(expected));
  if (v[1] != kF32 && v[1] != kF64) return fail(error, "gemm: dtype " + std::to_string(v[1]) + " is not f32 or f64");
  const int64_t operand = v[0] == 1 ? v[1] : v[13];
  if (operand != v[1] && !(v[1] == kF32 && (operand == kBF16 || operand == kF16)))
    return fail(error, "gemm: operands of dtype " + std::to_string(operand) + " with a result of dtype " +
                           std::to_string(v[1]) + " (mixed precision is bf16 or f16 operands, f32 result)");
  if (!isBool(v[6]) || !isBool(v[7]) || !isBool(v[12])) return fail(error, "gemm: a flag is not 0 or 1");
  if (v[11] < 0 || v[11] > static_cast<int64_t>(GemmEpilogue::BiasRelu))
    return fail(error, "gemm: unknown epilogue " + std::to_string(v[11]));
  p->dtype = static_cast<int32_t>(v[1]);
  p->batch = v[2];
  p->m = v[3];
  p->n = v[4];
  p->k = v[5];
  p->transA = v[6] != 0;
  p->transB = v[7] != 0;
  p->strideA = v[8];
  p->strideB = v[9];
  p->strideC = v[10];
  p->epilogue = static_cast<GemmEpilogue>(v[11]);
  p->allowTf32 = v[12] != 0;
  p->operandDtype = operand == v[1] ? 0 : static_cast<int32_t>(operand);
  return true;
}

bool validateGemm(const GemmParams& p, const std::vector<uint64_t>& argBytes, std::string* error) {
  for (int64_t d : {p.batch, p.m, p.n, p.k})
    if (d < 1 || d > kMaxGemmDim) return fail(error, "gemm: a dimension is outside [1, 2^31 - 1]: " + describeGemm(p));
  for (int64_t s : {p.strideA, p.strideB, p.strideC})
    if (s < 0 || s > kMaxGemmDim * kMaxGemmDim / 2)
      return fail(error, "gemm: invalid batch stride: " + describeGemm(p));
  if (p.batch > 1 && p.strideC < p.m * p.n)
    return fail(error, "gemm: batches of C overlap (stride " + std::to_string(p.strideC) + " < m*n)");
  if (p.allowTf32 && (p.dtype != kF32 || p.mixed())) return fail(error, "gemm: TF32 applies to f32 operands only");
  if (p.mixed() && !(p.dtype == kF32 && (p.operandType() == kBF16 || p.operandType() == kF16)))
    return fail(error, "gemm: mixed precision is bf16 or f16 operands with an f32 result: " + describeGemm(p));
  if (argBytes.size() != static_cast<size_t>(p.numArgs()))
    return fail(error,
                "gemm: " + std::to_string(argBytes.size()) + " arguments, expected " + std::to_string(p.numArgs()));
  const uint64_t elem = elementSize(p.dtype), operandElem = elementSize(p.operandType());
  struct Operand {
    const char* name;
    unsigned __int128 elements;
    uint64_t elementBytes;
  };
  const Operand operands[] = {
      {"A", spanElements(p.batch, p.strideA, p.m, p.k), operandElem},
      {"B", spanElements(p.batch, p.strideB, p.k, p.n), operandElem},
      {"C", spanElements(p.batch, p.strideC, p.m, p.n), elem},
      {"bias", static_cast<unsigned __int128>(p.n), elem},
  };
  for (int i = 0; i < p.numArgs(); ++i)
    if (operands[i].elements * operands[i].elementBytes > argBytes[static_cast<size_t>(i)])
      return fail(error, std::string("gemm: operand ") + operands[i].name + " does not fit its " +
                             std::to_string(argBytes[static_cast<size_t>(i)]) + "-byte buffer: " + describeGemm(p));
  return true;
}

std::string describeGemm(const GemmParams& p) {
  static const char* const kEpilogues[] = {"", " relu", " bias", " bias+relu"};
  const auto e = static_cast<size_t>(p.epilogue);
  std::string s = "gemm " + (p.mixed() ? elementTypeName(p.operandType()) + "->" : std::string()) +
                  elementTypeName(p.dtype) + " batch=" + std::to_string(p.batch) + " m=" + std::to_string(p.m) +
                  " n=" + std::to_string(p.n) + " k=" + std::to_string(p.k);
  if (p.transA) s += " transA";
  if (p.transB) s += " transB";
  if (p.batch > 1)
    s += " stride=(" + std::to_string(p.strideA) + ", " + std::to_string(p.strideB) + ", " + std::to_string(p.strideC) +
         ")";
  s += e < 4 ? kEpilogues[e] : " ?";
  if (p.allowTf32) s += " tf32";
  return s;
}

}  // namespace nnc::rt
