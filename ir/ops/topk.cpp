// TopK op definition (opaque): inference, and the parameter block of its host kernel.
// The work runs in builtins/builtin_topk.cpp.
#include <optional>
#include <string>
#include <vector>

#include "ir/ops/common.h"

namespace nnc {
namespace {

Status inferTopK(InferContext& ctx) {
  if (!ctx.attrs().has("k"))
    return ctx.error("input K must be a compile-time constant (bind it with --bind NAME=FILE.pb)");
  const Shape& x = ctx.inShape(0);
  if (x.rank() == 0) return ctx.error("input X is a scalar; TopK needs rank >= 1");
  NNC_ASSIGN_OR_RETURN(int axis, ops::checkAxis(ctx, ctx.attrs().getInt("axis"), x.rank()));
  const int64_t k = ctx.attrs().getInt("k");
  if (k < 0) return ctx.error("k must be non-negative, got " + std::to_string(k));
  if (k > x[axis])
    return ctx.error("k = " + std::to_string(k) + " is larger than axis " + std::to_string(axis) + " of size " +
                     std::to_string(x[axis]));
  Shape out = x;
  out[axis] = k;
  ctx.setOutput(0, ctx.inType(0), out);
  ctx.setOutput(1, DType::I64, out);
  return Status::ok();
}

// Params: dtype (ONNX numbering), rank, dims..., axis, k, largest, sorted, number of input slots.
std::vector<int64_t> encodeTopK(const Node& node) {
  const Shape& x = node.input(0)->shape();
  std::vector<int64_t> p = {dtypeToOnnx(node.input(0)->dtype()), x.rank()};
  p.insert(p.end(), x.dims().begin(), x.dims().end());
  std::optional<int> axis = normalizeAxis(node.attrs().getInt("axis"), x.rank());
  NNC_CHECK(axis.has_value(), "TopK encoded without inference");
  p.push_back(*axis);
  p.push_back(node.attrs().getInt("k"));
  p.push_back(node.attrs().getInt("largest") != 0 ? 1 : 0);
  p.push_back(node.attrs().getInt("sorted") != 0 ? 1 : 0);
  p.push_back(node.numInputs());
  return p;
}

}  // namespace

void defineTopKOps(OpRegistry& r) {
  OpDef topk = ops::newDef(OpKind::TopK);
  topk.minInputs = 1;
  topk.maxInputs = 2;
  topk.minOutputs = topk.maxOutputs = 2;
  topk.attrs = {ops::attrInt("axis", -1), ops::attrInt("largest", 1), ops::attrInt("sorted", 1),
                ops::optionalAttr("k", AttrKind::Int)};
  topk.staticInputs = {StaticInput{1, "k", AttrKind::Int}};
  topk.checkStaticInputs = false;  // inferTopK's own message, after the type check
  topk.typeRules = {TypeRule::in(0, TypeSet::Numeric, "a float or integer type")};
  topk.infer = inferTopK;
  topk.opaque = OpaqueKernel{"nnc_builtin_topk", encodeTopK};
  r.define(topk);
}

}  // namespace nnc
