// The graph passes only the cuda target runs (Target::passes(), before the shared table of
// passes/pipeline.cpp), each in its own file beside this one.
#pragma once

#include "passes/pipeline.h"

namespace nnc::passes {

// --precision=bf16|fp16: every f32 GEMM against constant weights as a MixedMatMul of half operands
// (half_gemm_operands.cpp). One entry point per precision (a TargetPass is a plain function); the f32
// one changes nothing, so that the pass is listed, and may be disabled, whatever the precision.
Expected<bool> halfGemmOperandsF32(Graph& graph);
Expected<bool> halfGemmOperandsBf16(Graph& graph);
Expected<bool> halfGemmOperandsF16(Graph& graph);

inline constexpr const char* kHalfGemmOperandsName = "half-gemm-operands";
inline constexpr const char* kHalfGemmOperandsDescription =
    "--precision=bf16|fp16: GEMMs against constant weights read bf16/f16 operands, accumulate in f32";
inline constexpr TargetPass kHalfGemmOperandsF32 = {kHalfGemmOperandsName, halfGemmOperandsF32, 0,
                                                    kHalfGemmOperandsDescription};
inline constexpr TargetPass kHalfGemmOperandsBf16 = {kHalfGemmOperandsName, halfGemmOperandsBf16, 0,
                                                     kHalfGemmOperandsDescription};
inline constexpr TargetPass kHalfGemmOperandsF16 = {kHalfGemmOperandsName, halfGemmOperandsF16, 0,
                                                    kHalfGemmOperandsDescription};

}  // namespace nnc::passes
