// The op registry: one OpDef per op, holding everything the compiler knows about it — arity,
// attribute schema with defaults, inputs that must be compile-time constants, type/shape inference,
// and how it lowers to kernel IR (an element generator for elementwise/injective ops, a loop
// structure for reduction anchors, or a host kernel for opaque ops).
//
// Definitions live in ir/ops/*.cpp, each file exporting one defineXxxOps(OpRegistry&) function.
// Adding an op: an entry in ir/ops.def, its definition, a test. Nothing else names the op.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "ir/attributes.h"
#include "ir/graph.h"
#include "ir/op_kind.h"
#include "kir/kernel_ir.h"
#include "nnc/status.h"

namespace nnc {

struct OutputType {
  DType dtype;
  Shape shape;
};

// What shape inference sees. Input types are final; constant inputs expose their data (ops may use
// it to refine, e.g. a bound checked at compile time).
class InferContext {
 public:
  InferContext(const Node& node, std::vector<OutputType>& outputs) : node_(node), outputs_(outputs) {}
  const Node& node() const { return node_; }
  const Attributes& attrs() const { return node_.attrs(); }
  int numInputs() const { return node_.numInputs(); }
  bool hasInput(int i) const { return node_.input(i) != nullptr; }
  const Shape& inShape(int i) const { return node_.input(i)->shape(); }
  DType inType(int i) const { return node_.input(i)->dtype(); }
  int inRank(int i) const { return node_.input(i)->shape().rank(); }
  int numOutputs() const { return node_.numOutputs(); }
  void setOutput(int i, DType dtype, Shape shape) { outputs_[i] = {dtype, std::move(shape)}; }
  // An error naming the node: "node 'x' (Conv): <message>".
  Status error(const std::string& message) const { return Status::error(node_.diagPrefix() + message); }

 private:
  const Node& node_;
  std::vector<OutputType>& outputs_;
};

// What lowering sees: the kernel under construction, the node, and a generator per input
// (an empty function for an omitted optional input).
struct LowerContext {
  kir::KernelBuilder& kb;
  const Node& node;
  std::vector<kir::ElementGen> inputs;

  const Attributes& attrs() const { return node.attrs(); }
  bool hasInput(int i) const { return i < static_cast<int>(inputs.size()) && inputs[i] != nullptr; }
  const Shape& inShape(int i) const { return node.input(i)->shape(); }
  DType inType(int i) const { return node.input(i)->dtype(); }
  const Shape& outShape(int i) const { return node.output(i)->shape(); }
  DType outType(int i) const { return node.output(i)->dtype(); }
};

// An anchor's output: the kernel computes `value` at multi-index `index` (in kernel vars), in the
// per-outer-point part (perInner == false) or the inner loop (perInner == true).
struct AnchorOutput {
  std::vector<kir::ExprId> index;
  kir::ExprId value;
  bool perInner;
};

// An input that ONNX passes as a tensor but nnc needs at compile time (Reshape's shape, Slice's
// starts, ...). The importer turns a constant input into the named attribute; a non-constant one is a
// diagnostic telling the user to bind it (--bind NAME=FILE.pb).
struct StaticInput {
  int index;
  std::string attrName;
  AttrKind kind;  // Ints, Floats, Int, Float or Tensor
};

// Opaque ops run a host kernel (builtins/builtins.h), by symbol name. `encode` flattens shapes and
// attributes into the i64 parameter block the builtin reads.
struct OpaqueKernel {
  std::string symbol;
  std::function<std::vector<int64_t>(const Node&)> encode;
};

// A run-time contract on the data of an input (Gather's indices must lie in the gathered axis, ...).
// `violates` maps one element of input `input` — its value as i64 and its multi-index in that input
// — to a bool that is true when the element breaks the contract. Lowering builds one check kernel
// per IndexCheck (ir/lower.h) and the runtime fails the run with a message naming the node: an
// out-of-range index is an error, never a silently clamped read (the kernels clamp as well, so
// memory stays in bounds even before the check has run).
struct IndexCheck {
  int input;
  std::string expectation;  // "must be in [-5, 4]": completes "indices '<name>' ..."
  std::function<kir::ExprId(kir::KernelBuilder&, kir::ExprId value, const std::vector<kir::ExprId>& index)> violates;
};

// A node as one batched row-major GEMM of its input 0 (A) and input 1 (B) into its output 0 (C),
// without epilogue:
//   for b in [0, batch):  C_b[m x n] = A_b[m x k] * B_b[k x n]
// A_b starts strideA elements after A_{b-1} (0: every batch reads the same matrix), likewise B_b and
// C_b (strideC is never 0). A target turns it into its own GEMM: a packed contraction (cpu) or a
// library call (cuda: runtime/gemm.h's GemmParams).
struct GemmShape {
  DType dtype = DType::F32;         // of C (and of A and B unless operandDtype differs)
  DType operandDtype = DType::F32;  // of A and B: dtype, or F16/BF16 with an F32 dtype (MixedMatMul)
  int64_t batch = 1, m = 1, n = 1, k = 1;
  int64_t strideA = 0, strideB = 0, strideC = 0;  // elements
};

// Classes of dtypes an op accepts for an input. The values are bit sets (FloatOrSigned is Float and
// Signed); half-like types are floats, and bool is in no class but Bool.
enum class TypeSet : unsigned {
  Float = 1,
  Signed = 2,
  Unsigned = 4,
  Bool = 8,
  Int = Signed | Unsigned,
  FloatOrSigned = Float | Signed,
  Numeric = Float | Int,
  Any = Numeric | Bool,
};
bool inTypeSet(DType t, TypeSet set);
// "a float type", "a numeric type or bool", ...: completes "expected ...".
const char* typeSetName(TypeSet set);

// A rule on the dtypes of a node's inputs that an op declares (OpDef::typeRules), checked in the order
// declared before the op's infer function (checkDeclaredInputs):
//   TypeRule::in(i, set): input i (when present) has a dtype of `set`, else
//     "input 1 has type i32, expected a float type" (`expected` replaces typeSetName(set));
//   TypeRule::allSame(): every present input has the first present input's dtype, and
//   TypeRule::sameAs(i, ref): input i (when present) has input ref's dtype, else
//     "input 2 has type i64, expected f32 like input 0".
struct TypeRule {
  enum class Kind { In, AllSame, SameAs };
  Kind kind = Kind::AllSame;
  int input = 0, reference = 0;
  TypeSet set = TypeSet::Any;
  const char* expected = nullptr;

  static TypeRule in(int input, TypeSet set, const char* expected = nullptr) {
    return {Kind::In, input, 0, set, expected};
  }
  static TypeRule allSame() { return {Kind::AllSame, 0, 0, TypeSet::Any, nullptr}; }
  static TypeRule sameAs(int input, int reference) { return {Kind::SameAs, input, reference, TypeSet::Any, nullptr}; }
};

struct OpDef {
  OpKind kind;
  int minInputs = 1, maxInputs = 1;
  int minOutputs = 1, maxOutputs = 1;
  std::vector<AttrSpec> attrs;
  std::vector<StaticInput> staticInputs;
  // checkDeclaredInputs refuses a static input that is present but neither a constant nor turned into
  // its attribute: "input 1 ('shape') must be a compile-time constant". Ops that word this error
  // themselves, after their type checks, turn it off (Reduce*'s axes, CumSum's axis, TopK's K).
  bool checkStaticInputs = true;
  // Dtype rules on the inputs, checked by checkDeclaredInputs after the static inputs.
  std::vector<TypeRule> typeRules;
  std::function<Status(InferContext&)> infer;
  // Elementwise / Injective: one generator per output.
  std::function<std::vector<kir::ElementGen>(LowerContext&)> lowerElement;
  // Reduction: sets up the kernel's loops and returns one AnchorOutput per output.
  std::function<std::vector<AnchorOutput>(LowerContext&)> lowerAnchor;
  // Opaque
  OpaqueKernel opaque;
  // The outputs depend only on input shapes/dtypes, never on input data (Shape, Size, EyeLike):
  // the builder folds such nodes even when their inputs are not constants.
  bool dependsOnlyOnShapes = false;
  // Contracts on input data checked at run time (see IndexCheck); empty for most ops.
  std::function<std::vector<IndexCheck>(const Node&)> indexChecks;
  // An nnc-internal op (Im2Col, made by passes): no ONNX op of that name is imported as it.
  bool internal = false;
  // The node as one GEMM (GemmShape) when its shapes and dtype allow one: such a node may anchor a
  // target's contraction group (cpu: a packed GEMM; cuda: a cuBLASLt call); nullopt otherwise, and
  // the node is lowered to a loop kernel like any anchor. Absent for ops that are never a GEMM.
  std::function<std::optional<GemmShape>(const Node&)> asGemm;
  // For an Injective op whose output is better walked in another shape of the same elements (flat
  // positions unchanged): the loop domain of a kernel whose one output this op computes. Im2Col's
  // [N, C*K, P] is walked as [N, C*K, out...], so its innermost loop runs along an output row and its
  // index arithmetic simplifies to affine (no div/mod per element).
  std::function<Shape(const Node&)> iterationShape;
  // Elementwise ops whose output at index i reads input k only at i (same shape, no broadcast)
  // are fusable as an epilogue; injective ops never are. Computed from shapes by fusion.

  // Properties the fusion policy asks (passes/fusion.cpp) instead of naming ops:
  // An anchor that reads each input element many times (a contraction, a sliding window, a scan):
  // only pure data movement is inlined into it, never arithmetic (recomputed per reuse).
  bool rereadsInputs = false;
  // Data movement that reads its input at an affine index, a stride and an offset per dim (Reshape,
  // Transpose, Slice): a packed contraction folds it into how it reads its operand.
  bool stridedView = false;
  // The output holds the input's elements in the same row-major order, only the shape differs
  // (Reshape): after a contraction it is part of the epilogue, which stores by flat position.
  bool keepsElementOrder = false;
  // A window that reads a Pad of its input in place at affine indices (Conv, Im2Col: the Pads the
  // explicit-padding pass makes): such a Pad stays materialised instead of being inlined.
  bool keepsPadInput = false;
  // About how many vector instructions one output element of an elementwise op costs (a
  // transcendental ~20, a division or square root ~4, other arithmetic 1): the fusion policy's
  // estimate of the work an inlined producer repeats when its result is broadcast.
  int elementCost = 1;
};

class OpRegistry {
 public:
  static const OpRegistry& instance();
  const OpDef& get(OpKind kind) const { return defs_[static_cast<int>(kind)]; }
  bool isDefined(OpKind kind) const;
  // Used by the defineXxxOps functions.
  void define(OpDef def);

 private:
  OpRegistry();
  std::vector<OpDef> defs_;
  std::vector<bool> defined_;
};

inline const OpDef& opDef(OpKind kind) { return OpRegistry::instance().get(kind); }

// What every op may declare about its inputs, checked once for all ops before `def.infer` (by
// inferNode and the verifier): static inputs that must be constants (OpDef::checkStaticInputs),
// then the type rules.
Status checkDeclaredInputs(const OpDef& def, const InferContext& ctx);
// One type rule, as checkDeclaredInputs checks it.
Status checkTypeRule(const TypeRule& rule, const InferContext& ctx);

// The definition files (ir/ops/*.cpp).
void defineElementwiseOps(OpRegistry& r);  // elementwise.cpp
void defineLayoutOps(OpRegistry& r);       // layout.cpp
void defineGatherOps(OpRegistry& r);       // gather.cpp
void defineGeneratorOps(OpRegistry& r);    // generators.cpp
void defineResizeOps(OpRegistry& r);       // resize.cpp
void defineReductionOps(OpRegistry& r);    // reduction.cpp
void defineContractionOps(OpRegistry& r);  // contraction.cpp
void defineConvOps(OpRegistry& r);         // conv.cpp
void defineNhwcOps(OpRegistry& r);         // nhwc.cpp
void definePoolOps(OpRegistry& r);         // pool.cpp
void defineTopKOps(OpRegistry& r);         // topk.cpp

}  // namespace nnc
