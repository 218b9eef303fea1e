// A GEMM library call in a plan (StepKind::Library, name kGemmStepName): what the compiler decided and
// the CUDA executor runs through cuBLASLt. Row-major semantics, batched:
//   for b in [0, batch):  C_b[m x n] = epilogue(op(A_b)[m x k] * op(B_b)[k x n])
// A_b starts strideA elements after A_{b-1} (0: every batch reads the same matrix), likewise B_b and
// C_b (strideC is never 0). A is stored [m x k] (row-major, leading dimension k), or [k x m] when transA;
// B is stored [k x n], or [n x k] when transB; C is [m x n]. Epilogues: Bias adds a vector of n
// elements to every row (ONNX's MatMul + Add of a [n] bias), Relu clamps at 0 after it. The compiler
// emits None and Bias only: cuBLASLt's Relu turns NaN into 0, where ONNX's Relu keeps NaN.
// Step arguments: A, B, C, and with a bias epilogue the bias vector last.
// Mixed precision (--precision=bf16|fp16 on cuda): A and B may be bf16 or f16 while C and the bias
// are f32; the products accumulate in f32 (cuBLASLt's CUBLAS_COMPUTE_32F).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace nnc::rt {

inline constexpr const char* kGemmStepName = "gemm";

enum class GemmEpilogue : int64_t { None = 0, Relu = 1, Bias = 2, BiasRelu = 3 };

struct GemmParams {
  int32_t dtype = 1;  // nnc_dtype of C and the bias (and of A and B unless operandDtype says): F32 or F64
  // nnc_dtype of A and B where it differs from dtype: NNC_DTYPE_BF16 or NNC_DTYPE_F16 with an f32 dtype
  // (encoding 2; encoding-1 plans have none). 0: A and B are of dtype.
  int32_t operandDtype = 0;
  int64_t batch = 1, m = 1, n = 1, k = 1;
  bool transA = false, transB = false;
  int64_t strideA = 0, strideB = 0, strideC = 0;  // elements
  GemmEpilogue epilogue = GemmEpilogue::None;
  // f32 only: let the tensor cores round the inputs to TF32 (about 3 decimal digits less precise).
  // Off by default: fp32 is exact fp32, as ONNX specifies.
  bool allowTf32 = false;

  int32_t operandType() const { return operandDtype ? operandDtype : dtype; }
  bool mixed() const { return operandType() != dtype; }
  bool hasBias() const { return epilogue == GemmEpilogue::Bias || epilogue == GemmEpilogue::BiasRelu; }
  bool hasRelu() const { return epilogue == GemmEpilogue::Relu || epilogue == GemmEpilogue::BiasRelu; }
  int numArgs() const { return hasBias() ? 4 : 3; }
  // Floating-point operations of the whole call (2 m n k per batch).
  double flops() const { return 2.0 * static_cast<double>(batch) * m * n * k; }
};

// The step's params (Step::params) and back. decodeGemm checks the encoding (count, enum values);
// validateGemm also checks the dims and that every operand fits its buffer (argBytes: the byte size of
// each step argument's buffer), so a hostile plan cannot make the library read or write out of bounds.
std::vector<int64_t> encodeGemm(const GemmParams& p);
bool decodeGemm(const std::vector<int64_t>& params, GemmParams* p, std::string* error);
bool validateGemm(const GemmParams& p, const std::vector<uint64_t>& argBytes, std::string* error);

// "gemm f32 batch=2 m=64 n=128 k=256 transB stride=(0, 32768, 8192) bias+relu"; a mixed one reads
// "gemm bf16->f32 m=...". For printPlan.
std::string describeGemm(const GemmParams& p);

}  // namespace nnc::rt
