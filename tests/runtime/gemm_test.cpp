// GEMM library steps in a plan (runtime/gemm.h): the parameter encoding, the checks that keep a
// hostile plan from making cuBLASLt read or write outside its buffers, and plan-level validation.
#include "runtime/gemm.h"

#include <gtest/gtest.h>

#include "runtime/plan.h"

namespace nnc::rt {
namespace {

GemmParams batchedGemm() {
  GemmParams p;
  p.dtype = 1;
  p.batch = 3;
  p.m = 4;
  p.n = 5;
  p.k = 6;
  p.strideA = 0;      // shared A
  p.strideB = 6 * 5;  // contiguous B
  p.strideC = 4 * 5;  // contiguous C
  p.epilogue = GemmEpilogue::Bias;
  return p;
}

// Byte sizes that exactly fit batchedGemm(): A 4x6, B 3 x 6x5, C 3 x 4x5, bias 5 (f32).
std::vector<uint64_t> exactBytes() { return {4 * 6 * 4, 3 * 30 * 4, 3 * 20 * 4, 5 * 4}; }

std::string validateError(const GemmParams& p, const std::vector<uint64_t>& bytes) {
  std::string error;
  EXPECT_FALSE(validateGemm(p, bytes, &error));
  return error;
}

TEST(Gemm, EncodingRoundTrips) {
  GemmParams p = batchedGemm();
  p.transA = true;
  p.allowTf32 = true;
  GemmParams back;
  std::string error;
  ASSERT_TRUE(decodeGemm(encodeGemm(p), &back, &error)) << error;
  EXPECT_EQ(encodeGemm(back), encodeGemm(p));
  EXPECT_EQ(describeGemm(back), "gemm f32 batch=3 m=4 n=5 k=6 transA stride=(0, 30, 20) bias tf32");
  EXPECT_DOUBLE_EQ(back.flops(), 2.0 * 3 * 4 * 5 * 6);
}

TEST(Gemm, DecodeRejectsMalformedParams) {
  std::vector<int64_t> v = encodeGemm(batchedGemm());
  GemmParams p;
  std::string error;
  std::vector<int64_t> bad = v;
  bad.pop_back();
  EXPECT_FALSE(decodeGemm(bad, &p, &error));
  EXPECT_EQ(error, "gemm: 13 params, expected 14");
  bad = v;
  bad[0] = 3;
  EXPECT_FALSE(decodeGemm(bad, &p, &error));
  EXPECT_EQ(error, "gemm: unknown parameter encoding 3");
  EXPECT_FALSE(decodeGemm({}, &p, &error));
  EXPECT_EQ(error, "gemm: unknown parameter encoding (none)");
  bad = v;
  bad[1] = 10;  // f16
  EXPECT_FALSE(decodeGemm(bad, &p, &error));
  EXPECT_EQ(error, "gemm: dtype 10 is not f32 or f64");
  bad = v;
  bad[6] = 2;
  EXPECT_FALSE(decodeGemm(bad, &p, &error));
  EXPECT_EQ(error, "gemm: a flag is not 0 or 1");
  bad = v;
  bad[11] = 4;
  EXPECT_FALSE(decodeGemm(bad, &p, &error));
  EXPECT_EQ(error, "gemm: unknown epilogue 4");
}

// Encoding 1 (plans written before mixed precision): 13 params, A and B of the result's dtype.
TEST(Gemm, EncodingOneStillDecodes) {
  std::vector<int64_t> v = encodeGemm(batchedGemm());
  v.pop_back();
  v[0] = 1;
  GemmParams p;
  std::string error;
  ASSERT_TRUE(decodeGemm(v, &p, &error)) << error;
  EXPECT_FALSE(p.mixed());
  EXPECT_EQ(p.operandType(), 1);
  v.push_back(16);
  EXPECT_FALSE(decodeGemm(v, &p, &error));
  EXPECT_EQ(error, "gemm: 14 params, expected 13");
}

// bf16 or f16 operands with an f32 result; A and B take 2 bytes an element, C and the bias 4.
TEST(Gemm, MixedPrecisionOperands) {
  GemmParams p = batchedGemm();
  p.operandDtype = 16;
  GemmParams back;
  std::string error;
  ASSERT_TRUE(decodeGemm(encodeGemm(p), &back, &error)) << error;
  EXPECT_TRUE(back.mixed());
  EXPECT_EQ(back.operandType(), 16);
  EXPECT_EQ(describeGemm(back), "gemm bf16->f32 batch=3 m=4 n=5 k=6 stride=(0, 30, 20) bias");
  const std::vector<uint64_t> halfBytes = {4 * 6 * 2, 3 * 30 * 2, 3 * 20 * 4, 5 * 4};
  EXPECT_TRUE(validateGemm(p, halfBytes, &error)) << error;
  std::vector<uint64_t> short_ = halfBytes;
  short_[1] -= 2;
  EXPECT_NE(validateError(p, short_).find("operand B does not fit its 178-byte buffer"), std::string::npos);
  short_ = halfBytes;
  short_[2] -= 2;  // C stays f32
  EXPECT_NE(validateError(p, short_).find("operand C does not fit"), std::string::npos);
  p.operandDtype = 10;
  ASSERT_TRUE(decodeGemm(encodeGemm(p), &back, &error)) << error;
  EXPECT_EQ(describeGemm(back).substr(0, 13), "gemm f16->f32");

  // Only half operands with an f32 result, and no TF32 with them.
  std::vector<int64_t> v = encodeGemm(p);
  v[13] = 11;  // f64 operands, f32 result
  EXPECT_FALSE(decodeGemm(v, &back, &error));
  EXPECT_EQ(error,
            "gemm: operands of dtype 11 with a result of dtype 1 (mixed precision is bf16 or f16 operands, "
            "f32 result)");
  v = encodeGemm(p);
  v[1] = 11;  // f16 operands, f64 result
  EXPECT_FALSE(decodeGemm(v, &back, &error));
  p.allowTf32 = true;
  EXPECT_EQ(validateError(p, halfBytes), "gemm: TF32 applies to f32 operands only");
  p.allowTf32 = false;
  p.operandDtype = 7;  // i64
  EXPECT_NE(validateError(p, halfBytes).find("mixed precision is bf16 or f16 operands"), std::string::npos);
}

TEST(Gemm, OperandsMustFitTheirBuffers) {
  const GemmParams p = batchedGemm();
  std::string error;
  EXPECT_TRUE(validateGemm(p, exactBytes(), &error)) << error;
  for (size_t i = 0; i < 4; ++i) {
    std::vector<uint64_t> bytes = exactBytes();
    bytes[i] -= 1;
    static const char* const kNames[] = {"A", "B", "C", "bias"};
    EXPECT_EQ(validateError(p, bytes).rfind(std::string("gemm: operand ") + kNames[i] + " does not fit its ", 0), 0u)
        << i;
  }
  // A stride that walks past the end, and batches of C that overlap.
  GemmParams far = p;
  far.strideB = 31;
  EXPECT_NE(validateError(far, exactBytes()).find("operand B does not fit"), std::string::npos);
  GemmParams overlap = p;
  overlap.strideC = 19;
  EXPECT_EQ(validateError(overlap, exactBytes()), "gemm: batches of C overlap (stride 19 < m*n)");
  // Without a bias there are three arguments.
  GemmParams plain = p;
  plain.epilogue = GemmEpilogue::None;
  EXPECT_EQ(validateError(plain, exactBytes()), "gemm: 4 arguments, expected 3");
}

TEST(Gemm, DimensionsAndStridesAreBounded) {
  const std::vector<uint64_t> huge(4, ~uint64_t(0));
  for (int64_t bad : {int64_t(0), int64_t(-1), int64_t(INT32_MAX) + 1}) {
    GemmParams p = batchedGemm();
    p.k = bad;
    EXPECT_EQ(validateError(p, huge).rfind("gemm: a dimension is outside [1, 2^31 - 1]", 0), 0u) << bad;
  }
  GemmParams p = batchedGemm();
  p.strideB = -1;
  EXPECT_EQ(validateError(p, huge).rfind("gemm: invalid batch stride", 0), 0u);
  // Products of the largest dims do not overflow: the size check still refuses them.
  GemmParams big = batchedGemm();
  big.batch = 1;
  big.m = big.n = big.k = INT32_MAX;
  EXPECT_NE(validateError(big, exactBytes()).find("operand A does not fit"), std::string::npos);
  big.batch = INT32_MAX;
  big.strideC = int64_t(INT32_MAX) * INT32_MAX;  // m*n, beyond any stride a buffer could hold
  EXPECT_EQ(validateError(big, exactBytes()).rfind("gemm: invalid batch stride", 0), 0u);
  GemmParams tf32 = batchedGemm();
  tf32.dtype = 11;
  tf32.allowTf32 = true;
  EXPECT_EQ(validateError(tf32, huge), "gemm: TF32 applies to f32 operands only");
}

// A cuda plan with one GEMM step: A (input), B (weight), C (output), bias (weight).
Plan gemmPlan() {
  Plan plan;
  plan.target = Target::Cuda;
  plan.inputs.push_back({"a", 1, {4, 6}, 96});
  plan.outputs.push_back({"c", 1, {3, 4, 5}, 240});
  plan.weightsSize = 448;
  plan.buffers = {{BufferKind::Input, 0, 96},
                  {BufferKind::Weight, 0, 360},
                  {BufferKind::Output, 0, 240},
                  {BufferKind::Weight, 384, 20}};
  Step s;
  s.kind = StepKind::Library;
  s.name = kGemmStepName;
  s.args = {0, 1, 2, 3};
  s.params = encodeGemm(batchedGemm());
  s.outerSize = 0;
  s.origin = "mm";
  plan.steps.push_back(s);
  return plan;
}

TEST(Gemm, PlansValidateLibrarySteps) {
  std::string error;
  Plan plan = gemmPlan();
  ASSERT_TRUE(validatePlan(plan, &error)) << error;
  std::vector<uint8_t> bytes = serializePlan(plan);
  Plan back;
  ASSERT_TRUE(deserializePlan(bytes.data(), bytes.size(), &back, &error)) << error;
  EXPECT_EQ(back.steps[0].kind, StepKind::Library);
  EXPECT_EQ(back.steps[0].params, plan.steps[0].params);
  EXPECT_NE(printPlan(back, "cuda")
                .find("step 0: library gemm(0, 1, 2, 3) gemm f32 batch=3 m=4 n=5 k=6 stride=(0, 30, 20) "
                      "bias  ; mm"),
            std::string::npos)
      << printPlan(back, "cuda");

  Plan cpu = gemmPlan();
  cpu.target = Target::Cpu;
  EXPECT_FALSE(validatePlan(cpu, &error));
  EXPECT_EQ(error, "step 0 (mm): library calls exist for the cuda target only");
  Plan unknown = gemmPlan();
  unknown.steps[0].name = "conv";
  EXPECT_FALSE(validatePlan(unknown, &error));
  EXPECT_EQ(error, "step 0 (mm): unknown library routine 'conv'");
  Plan small = gemmPlan();
  small.buffers[1].size = 100;
  EXPECT_FALSE(validatePlan(small, &error));
  EXPECT_NE(error.find("step 0 (mm): gemm: operand B does not fit its 100-byte buffer"), std::string::npos) << error;
  Plan writesWeights = gemmPlan();
  writesWeights.buffers[2] = {BufferKind::Weight, 0, 360};
  writesWeights.steps[0].args = {0, 3, 1, 3};
  writesWeights.buffers[3] = {BufferKind::Weight, 0, 360};
  EXPECT_FALSE(validatePlan(writesWeights, &error));
  EXPECT_EQ(error, "step 0 (mm): gemm writes a model input or the weights");
}

}  // namespace
}  // namespace nnc::rt
