// Helpers shared by the op definitions in ir/ops/*.cpp: attribute-spec shorthands, broadcasting
// in inference and lowering, and axis handling.
#pragma once

#include <string>
#include <vector>

#include "ir/op_registry.h"

namespace nnc::ops {

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

// The multi-index into an input of shape `in` that feeds output index `outIndex` under numpy
// broadcasting (leading dims dropped, size-1 dims pinned to 0).
std::vector<kir::ExprId> broadcastIndex(kir::KernelBuilder& kb, const std::vector<kir::ExprId>& outIndex,
                                        const Shape& in);
// Broadcast shape of all present inputs, or an error naming the node and both shapes.
Status inferBroadcast(InferContext& ctx, Shape* out);
// Normalises `axis` for `rank`, or an error "axis 5 is out of range for rank 4".
Expected<int> checkAxis(const InferContext& ctx, int64_t axis, int rank);
// Every input of `ctx` (that is present) has dtype `t`, or an error naming the input.
Status requireSameType(InferContext& ctx);
// A generator that loads input value k of a group through ctx.inputs[k] at a broadcast index.
kir::ExprId loadBroadcast(LowerContext& ctx, int input, const std::vector<kir::ExprId>& outIndex);

// Run-time contracts (IndexCheck) for data-dependent indices. axisIndexCheck: every element of
// `input` addresses an axis of `extent` elements, negative values counting from the end, so it must
// lie in [-extent, extent-1]. tupleIndexCheck: the last dim of `input` holds index tuples whose
// component c addresses a dim of extents[c] (GatherND, ScatterND).
IndexCheck axisIndexCheck(int input, int64_t extent);
IndexCheck tupleIndexCheck(int input, std::vector<int64_t> extents);

}  // namespace nnc::ops
