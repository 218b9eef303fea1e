// Helpers shared by the op definitions in ir/ops/*.cpp: attribute-spec shorthands, definition
// shorthands, static inputs, broadcasting in inference and lowering, and axis handling.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "ir/op_registry.h"

namespace nnc::ops {

// "Variadic": the most inputs (Sum, Concat) or outputs (Split) an op may have.
inline constexpr int kManyInputs = 1 << 20;

// Attribute spec shorthands: optionalAttr has no default (absent unless given).
inline AttrSpec attrInt(std::string n, int64_t d) { return {std::move(n), AttrKind::Int, AttrValue(d), false}; }
inline AttrSpec attrFloat(std::string n, double d) { return {std::move(n), AttrKind::Float, AttrValue(d), false}; }
inline AttrSpec attrString(std::string n, std::string d) {
  return {std::move(n), AttrKind::String, AttrValue(std::move(d)), false};
}
inline AttrSpec attrInts(std::string n, std::vector<int64_t> d) {
  return {std::move(n), AttrKind::Ints, AttrValue(std::move(d)), false};
}
inline AttrSpec attrFloats(std::string n, std::vector<double> d) {
  return {std::move(n), AttrKind::Floats, AttrValue(std::move(d)), false};
}
inline AttrSpec optionalAttr(std::string n, AttrKind k) { return {std::move(n), k, std::nullopt, false}; }
inline AttrSpec requiredAttr(std::string n, AttrKind k) { return {std::move(n), k, std::nullopt, true}; }

// An OpDef of `kind` with the defaults (one input, one output).
inline OpDef newDef(OpKind kind) {
  OpDef d;
  d.kind = kind;
  return d;
}
// A Reduction-class op (an anchor) lowered by `lower`.
OpDef anchorDef(OpKind kind, int minInputs, int maxInputs, std::vector<AttrSpec> attrs,
                std::function<Status(InferContext&)> infer,
                std::function<std::vector<AnchorOutput>(LowerContext&)> lower);
// `d` marked OpDef::rereadsInputs (contractions, windows).
OpDef rereading(OpDef d);
// An anchor's one output: `value` at `index` (the outer vars), in the per-outer-point part.
std::vector<AnchorOutput> singleOutput(const std::vector<kir::ExprId>& index, kir::ExprId value);

// "[1, 2, 3]".
std::string listStr(const std::vector<int64_t>& v);
// "<what> has 3 values, expected 4".
std::string countMessage(const std::string& what, size_t got, size_t expected);
// Transpose's perm: the attribute, or the dims reversed when it is absent; an error for a malformed one.
Expected<std::vector<int64_t>> transposePerm(const Node& n, int rank);

// Compile-time values of a static input (StaticInput): the attribute the importer made, else the data
// of a constant input `input`, else nullopt. staticInt wants a one-element constant.
std::optional<std::vector<int64_t>> staticInts(const Node& n, const std::string& name, int input);
std::optional<int64_t> staticInt(const Node& n, const std::string& name, int input);
std::optional<Tensor> staticTensor(const Node& n, const std::string& name, int input);

// Input `i` is present, or "missing input 2 (values)".
Status requireInput(InferContext& ctx, int i, const char* what);

// The expression dtype of values stored as `storage`: half-like types compute in f32.
DType exprType(DType storage);
// A constant expression for element `i` of `t`, typed for a value of storage type `storage` (a float
// tensor's value truncated for an integer one).
kir::ExprId tensorElement(kir::KernelBuilder& kb, const Tensor& t, int64_t i, DType storage);
// `e` as an i64 expression (a cast unless it is one).
kir::ExprId toI64(kir::KernelBuilder& kb, kir::ExprId e);

// The multi-index into an input of shape `in` that feeds output index `outIndex` under numpy
// broadcasting (leading dims dropped, size-1 dims pinned to 0).
std::vector<kir::ExprId> broadcastIndex(kir::KernelBuilder& kb, const std::vector<kir::ExprId>& outIndex,
                                        const Shape& in);
// Broadcast shape of all present inputs, or an error naming the node and both shapes.
Status inferBroadcast(InferContext& ctx, Shape* out);
// Normalises `axis` for `rank`, or an error "axis 5 is out of range for rank 4" (resolveAxis: without
// the node prefix, for helpers whose messages the caller completes).
Expected<int> checkAxis(const InferContext& ctx, int64_t axis, int rank);
Expected<int> resolveAxis(int64_t axis, int rank);
// A generator that loads input value k of a group through ctx.inputs[k] at a broadcast index.
kir::ExprId loadBroadcast(LowerContext& ctx, int input, const std::vector<kir::ExprId>& outIndex);

// Run-time contracts (IndexCheck) for data-dependent indices. axisIndexCheck: every element of
// `input` addresses an axis of `extent` elements, negative values counting from the end, so it must
// lie in [-extent, extent-1]. tupleIndexCheck: the last dim of `input` holds index tuples whose
// component c addresses a dim of extents[c] (GatherND, ScatterND).
IndexCheck axisIndexCheck(int input, int64_t extent);
IndexCheck tupleIndexCheck(int input, std::vector<int64_t> extents);

}  // namespace nnc::ops
