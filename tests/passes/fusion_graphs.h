// Small graphs that exercise each fusion rule, shared by the partition tests (tests/passes) and
// the JIT-vs-reference numerics tests (tests/driver).
#pragma once

namespace nnc::testing {

// Add -> Exp -> Neg -> Sigmoid: one pointwise kernel.
inline constexpr const char* kPointwiseChain =
    "graph(%x: f32[4x8], %b: f32[8]) -> (%y: f32[4x8]) {\n"
    "  %a = Add(%x, %b) : f32[4x8]\n"
    "  %e = Exp(%a) : f32[4x8]\n"
    "  %n = Neg(%e) : f32[4x8]\n"
    "  %y = Sigmoid(%n) : f32[4x8]\n"
    "}\n";

// MatMul with a bias and Relu epilogue: one kernel.
inline constexpr const char* kMatMulBiasRelu =
    "graph(%x: f32[4x16], %w: f32[16x8]) -> (%y: f32[4x8]) {\n"
    "  %bias = Constant() {value=[1, 2, 3, 4, 5, 6, 7, 8]} : f32[8]\n"
    "  %m = MatMul(%x, %w) : f32[4x8]\n"
    "  %a = Add(%m, %bias) : f32[4x8]\n"
    "  %y = Relu(%a) : f32[4x8]\n"
    "}\n";

// Exp used twice (by Relu and Add): materialised; Relu inlines into Add.
inline constexpr const char* kSharedProducer =
    "graph(%x: f32[4x8]) -> (%y: f32[4x8]) {\n"
    "  %e = Exp(%x) : f32[4x8]\n"
    "  %r = Relu(%e) : f32[4x8]\n"
    "  %y = Add(%r, %e) : f32[4x8]\n"
    "}\n";

// Exp feeding a Conv: not inlined (the Conv rereads each input element).
inline constexpr const char* kExpIntoConv =
    "graph(%x: f32[1x2x6x6], %w: f32[3x2x3x3]) -> (%y: f32[1x3x4x4]) {\n"
    "  %e = Exp(%x) : f32[1x2x6x6]\n"
    "  %y = Conv(%e, %w) : f32[1x3x4x4]\n"
    "}\n";

// Transpose feeding a MatMul: inlined (pure index arithmetic).
inline constexpr const char* kTransposeIntoMatMul =
    "graph(%x: f32[16x4], %w: f32[16x8]) -> (%y: f32[4x8]) {\n"
    "  %t = Transpose(%x) : f32[4x16]\n"
    "  %y = MatMul(%t, %w) : f32[4x8]\n"
    "}\n";

// Mul -> Tanh -> Softmax: the pointwise prologue joins the Softmax.
inline constexpr const char* kSoftmaxPrologue =
    "graph(%x: f32[4x10], %s: f32[10]) -> (%y: f32[4x10]) {\n"
    "  %m = Mul(%x, %s) : f32[4x10]\n"
    "  %t = Tanh(%m) : f32[4x10]\n"
    "  %y = Softmax(%t) : f32[4x10]\n"
    "}\n";

// TopK (opaque) runs alone after its Exp producer.
inline constexpr const char* kTopK =
    "graph(%x: f32[3x10]) -> (%v: f32[3x4], %i: i64[3x4]) {\n"
    "  %e = Exp(%x) : f32[3x10]\n"
    "  %v, %i = TopK(%e) {k=4} : f32[3x4], i64[3x4] @topk\n"
    "}\n";

// m is both a graph output and Relu's input: no epilogue, two kernels.
inline constexpr const char* kMatMulTwoResults =
    "graph(%x: f32[4x16], %w: f32[16x8]) -> (%m: f32[4x8], %y: f32[4x8]) {\n"
    "  %m = MatMul(%x, %w) : f32[4x8]\n"
    "  %y = Relu(%m) : f32[4x8]\n"
    "}\n";

// x -> a -> (b, c) -> d: a is materialised, b and c inline into d.
inline constexpr const char* kDiamond =
    "graph(%x: f32[8]) -> (%d: f32[8]) {\n"
    "  %a = Exp(%x) : f32[8]\n"
    "  %b = Neg(%a) : f32[8]\n"
    "  %c = Sqrt(%a) : f32[8]\n"
    "  %d = Mul(%b, %c) : f32[8]\n"
    "}\n";

// An Add that broadcasts the MatMul's result is not an epilogue.
inline constexpr const char* kBroadcastAfterMatMul =
    "graph(%x: f32[4x16], %w: f32[16x8], %z: f32[2x4x8]) -> (%y: f32[2x4x8]) {\n"
    "  %m = MatMul(%x, %w) : f32[4x8]\n"
    "  %y = Add(%m, %z) : f32[2x4x8]\n"
    "}\n";

// A Split with outputs of two shapes: one group, two kernels; the branches join in a Concat.
inline constexpr const char* kSplitTwoShapes =
    "graph(%x: f32[4x10]) -> (%y: f32[4x10]) {\n"
    "  %e = Exp(%x) : f32[4x10]\n"
    "  %p, %q = Split(%e) {axis=1, split=[3, 7]} : f32[4x3], f32[4x7] @sp\n"
    "  %a = Neg(%p) : f32[4x3]\n"
    "  %b = Sqrt(%q) : f32[4x7]\n"
    "  %y = Concat(%a, %b) {axis=1} : f32[4x10]\n"
    "}\n";

// An epilogue whose other operand is computed by data movement (inlined into the MatMul's group).
inline constexpr const char* kEpilogueWithTransposedOperand =
    "graph(%x: f32[4x16], %w: f32[16x8], %z: f32[8x4]) -> (%y: f32[4x8]) {\n"
    "  %m = MatMul(%x, %w) : f32[4x8]\n"
    "  %t = Transpose(%z) : f32[4x8]\n"
    "  %y = Add(%m, %t) : f32[4x8]\n"
    "}\n";

// LayerNormalization with a Relu epilogue.
inline constexpr const char* kLayerNormRelu =
    "graph(%x: f32[4x8], %g: f32[8], %b: f32[8]) -> (%y: f32[4x8]) {\n"
    "  %n = LayerNormalization(%x, %g, %b) : f32[4x8]\n"
    "  %y = Relu(%n) : f32[4x8]\n"
    "}\n";

// A broadcasting prologue and an epilogue around a ReduceSum over the middle axis.
inline constexpr const char* kReduceSandwich =
    "graph(%x: f32[2x3x4], %s: f32[4]) -> (%y: f32[2x1x4]) {\n"
    "  %m = Mul(%x, %s) : f32[2x3x4]\n"
    "  %r = ReduceSum(%m) {axes=[1]} : f32[2x1x4]\n"
    "  %y = Abs(%r) : f32[2x1x4]\n"
    "}\n";

// A Slice feeding a MatMul: inlined.
inline constexpr const char* kSliceIntoMatMul =
    "graph(%x: f32[4x20], %w: f32[16x8]) -> (%y: f32[4x8]) {\n"
    "  %s = Slice(%x) {axes=[1], ends=[18], starts=[2]} : f32[4x16]\n"
    "  %y = MatMul(%s, %w) : f32[4x8]\n"
    "}\n";

// Conv + bias + Relu epilogue; the MaxPool (a second anchor) is its own kernel.
inline constexpr const char* kConvReluPool =
    "graph(%x: f32[1x2x6x6], %w: f32[3x2x3x3], %b: f32[3]) -> (%y: f32[1x3x2x2]) {\n"
    "  %c = Conv(%x, %w, %b) : f32[1x3x4x4]\n"
    "  %r = Relu(%c) : f32[1x3x4x4]\n"
    "  %y = MaxPool(%r) {kernel_shape=[2, 2], strides=[2, 2]} : f32[1x3x2x2]\n"
    "}\n";

// Gather of an Exp (injective consumers take arithmetic), reduced by ReduceMax (which takes both).
inline constexpr const char* kGatherReduce =
    "graph(%x: f32[5x6]) -> (%y: f32[3x1]) {\n"
    "  %i = Constant() {value=[4, 0, 4]} : i64[3]\n"
    "  %e = Exp(%x) : f32[5x6]\n"
    "  %g = Gather(%e, %i) {axis=0} : f32[3x6]\n"
    "  %y = ReduceMax(%g) {axes=[1]} : f32[3x1]\n"
    "}\n";

// A Softmax epilogue that reads another input at the anchor's (per-inner) index.
inline constexpr const char* kSoftmaxEpilogue =
    "graph(%x: f32[3x7], %z: f32[3x7]) -> (%y: f32[3x7]) {\n"
    "  %s = Softmax(%x) : f32[3x7]\n"
    "  %y = Mul(%s, %z) : f32[3x7]\n"
    "}\n";

// ArgMax with a Cast epilogue (integer anchor result).
inline constexpr const char* kArgMaxCast =
    "graph(%x: f32[4x9]) -> (%y: f32[4x1]) {\n"
    "  %a = ArgMax(%x) {axis=1} : i64[4x1]\n"
    "  %y = Cast(%a) {to=1} : f32[4x1]\n"
    "}\n";

// LayerNormalization with its Mean output used too: two results, so Relu is not an epilogue.
inline constexpr const char* kLayerNormTwoResults =
    "graph(%x: f32[4x8], %g: f32[8]) -> (%y: f32[4x8], %m: f32[4x1]) {\n"
    "  %n, %m = LayerNormalization(%x, %g) : f32[4x8], f32[4x1] @ln\n"
    "  %y = Relu(%n) : f32[4x8]\n"
    "}\n";

// Concat of two computed values along an axis with only 1s before it: in place (no kernel), each
// producer writing its slice; `a` is read again after the concatenation, from inside it.
inline constexpr const char* kConcatInPlace =
    "graph(%x: f32[1x16x4]) -> (%y: f32[1x32x4], %z: f32[1x16x4]) {\n"
    "  %a = Relu(%x) : f32[1x16x4]\n"
    "  %b = Exp(%x) : f32[1x16x4]\n"
    "  %c = Concat(%a, %b) {axis=1} : f32[1x32x4]\n"
    "  %y = Neg(%c) : f32[1x32x4]\n"
    "  %z = Sigmoid(%a) : f32[1x16x4]\n"
    "}\n";

// MatMul + bias + GELU in the tanh form GPT-2's export writes (0.5 x (1 + tanh(sqrt(2 / pi) (x +
// 0.044715 x^3)))): the bias sum has four users, all in one elementwise region ending in y, so the
// whole region is the GEMM's epilogue. 30 x 64 has whole register tiles and partial ones.
inline constexpr const char* kMatMulGelu =
    "graph(%x: f32[30x16], %w: f32[16x64], %bias: f32[64]) -> (%y: f32[30x64]) {\n"
    "  %three = Constant() {value=[3]} : f32[]\n"
    "  %k = Constant() {value=[0.044715]} : f32[]\n"
    "  %s = Constant() {value=[0.7978846]} : f32[]\n"
    "  %one = Constant() {value=[1]} : f32[]\n"
    "  %half = Constant() {value=[0.5]} : f32[]\n"
    "  %m = MatMul(%x, %w) : f32[30x64]\n"
    "  %a = Add(%m, %bias) : f32[30x64]\n"
    "  %c = Pow(%a, %three) : f32[30x64]\n"
    "  %ck = Mul(%c, %k) : f32[30x64]\n"
    "  %i = Add(%a, %ck) : f32[30x64]\n"
    "  %is = Mul(%i, %s) : f32[30x64]\n"
    "  %t = Tanh(%is) : f32[30x64]\n"
    "  %p = Add(%t, %one) : f32[30x64]\n"
    "  %q = Mul(%a, %p) : f32[30x64]\n"
    "  %y = Mul(%q, %half) : f32[30x64]\n"
    "}\n";

// SiLU on a MatMul's result (m * sigmoid(m)): m's two users are one region, the epilogue.
inline constexpr const char* kMatMulSilu =
    "graph(%x: f32[30x16], %w: f32[16x64]) -> (%y: f32[30x64]) {\n"
    "  %m = MatMul(%x, %w) : f32[30x64]\n"
    "  %s = Sigmoid(%m) : f32[30x64]\n"
    "  %y = Mul(%m, %s) : f32[30x64]\n"
    "}\n";

// As kMatMulSilu, but the sigmoid is a graph output too: the region never closes on one value, so
// m is materialised, and s (two users) too.
inline constexpr const char* kMatMulSiluTwoResults =
    "graph(%x: f32[30x16], %w: f32[16x64]) -> (%y: f32[30x64], %s: f32[30x64]) {\n"
    "  %m = MatMul(%x, %w) : f32[30x64]\n"
    "  %s = Sigmoid(%m) : f32[30x64]\n"
    "  %y = Mul(%m, %s) : f32[30x64]\n"
    "}\n";

struct FusionCase {
  const char* name;
  const char* text;
  int groupsFused;   // kernel groups with fusion on (-O1 and up)
  int kernelsFused;  // kernels + builtins those groups lower to
  // Through the cpu driver, where conv-to-gemm first turns a Conv into Im2Col + MatMul + Reshape
  // (+ bias Add) and the MatMul is a packed contraction, when that differs: groups at -O2 (= kernels).
  int cpuKernelsFused = -1;
};

inline constexpr FusionCase kFusionCases[] = {
    {"PointwiseChain", kPointwiseChain, 1, 1},
    {"MatMulBiasRelu", kMatMulBiasRelu, 1, 1},
    {"SharedProducer", kSharedProducer, 2, 2},
    {"ExpIntoConv", kExpIntoConv, 2, 2},
    {"TransposeIntoMatMul", kTransposeIntoMatMul, 1, 1},
    {"SoftmaxPrologue", kSoftmaxPrologue, 1, 1},
    {"TopK", kTopK, 2, 2},
    {"MatMulTwoResults", kMatMulTwoResults, 2, 2},
    {"Diamond", kDiamond, 2, 2},
    {"BroadcastAfterMatMul", kBroadcastAfterMatMul, 2, 2},
    {"SplitTwoShapes", kSplitTwoShapes, 2, 3},
    {"EpilogueWithTransposedOperand", kEpilogueWithTransposedOperand, 1, 1},
    {"LayerNormRelu", kLayerNormRelu, 1, 1},
    {"ReduceSandwich", kReduceSandwich, 1, 1},
    {"SliceIntoMatMul", kSliceIntoMatMul, 1, 1},
    {"ConvReluPool", kConvReluPool, 2, 2, 2},  // cpu: gemm reading the Im2Col in place + bias + Relu | MaxPool
    {"GatherReduce", kGatherReduce, 1, 1},
    {"SoftmaxEpilogue", kSoftmaxEpilogue, 1, 1},
    {"ArgMaxCast", kArgMaxCast, 1, 1},
    {"LayerNormTwoResults", kLayerNormTwoResults, 2, 2},
    {"ConcatInPlace", kConcatInPlace, 5, 4, 4},
    {"MatMulGelu", kMatMulGelu, 1, 1},
    {"MatMulSilu", kMatMulSilu, 1, 1},
    {"MatMulSiluTwoResults", kMatMulSiluTwoResults, 3, 3},
};

}  // namespace nnc::testing
