// Indexing op definitions (Injective): Gather, GatherElements, GatherND and ReverseSequence.
// Each reads at indices loaded from another input: negative values count from the end, and the index
// is clamped into range so that the load never leaves the input (the op's IndexCheck reports an
// out-of-range index at run time).
#include <algorithm>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "ir/ops/common.h"

namespace nnc {
namespace {

using kir::ElementGen;
using kir::ExprId;
using kir::ExprOp;
using kir::KernelBuilder;
using ops::requireInput;
using ops::resolveAxis;
using ops::toI64;
using Index = std::vector<ExprId>;

// A data-dependent index: negative values count from the end, then clamped into [0, dim) so that
// an out-of-range index can never become an out-of-bounds load.
ExprId normalizeIndex(KernelBuilder& kb, ExprId raw, int64_t dim) {
  ExprId i = toI64(kb, raw);
  i = kb.select(kb.lt(i, kb.i64(0)), kb.add(i, kb.i64(dim)), i);
  return kb.clamp(i, 0, dim - 1);
}

Status requireIndexType(InferContext& ctx, int i, const char* what) {
  DType t = ctx.inType(i);
  if (t == DType::I32 || t == DType::I64) return Status::ok();
  return ctx.error(std::string(what) + " must be i32 or i64, got " + std::string(dtypeName(t)));
}

void defineGather(OpRegistry& r) {
  OpDef d = ops::newDef(OpKind::Gather);
  d.minInputs = 2, d.maxInputs = 2;
  d.attrs = {ops::attrInt("axis", 0)};
  d.infer = [](InferContext& ctx) -> Status {
    NNC_RETURN_IF_ERROR(requireInput(ctx, 1, "indices"));
    NNC_RETURN_IF_ERROR(requireIndexType(ctx, 1, "indices"));
    const Shape& data = ctx.inShape(0);
    if (data.rank() == 0) return ctx.error("data must have rank >= 1");
    Expected<int> axis = resolveAxis(ctx.attrs().getInt("axis"), data.rank());
    if (!axis) return ctx.error(axis.status().message());
    if (data[*axis] == 0 && ctx.inShape(1).numel() > 0)
      return ctx.error("cannot gather from axis " + std::to_string(*axis) + " of " + data.str() + ", which is empty");
    Shape out;
    for (int i = 0; i < *axis; ++i) out.dims().push_back(data[i]);
    for (int64_t s : ctx.inShape(1).dims()) out.dims().push_back(s);
    for (int i = *axis + 1; i < data.rank(); ++i) out.dims().push_back(data[i]);
    ctx.setOutput(0, ctx.inType(0), out);
    return Status::ok();
  };
  d.lowerElement = [](LowerContext& ctx) -> std::vector<ElementGen> {
    KernelBuilder* kb = &ctx.kb;
    Shape data = ctx.inShape(0);
    int axis = *normalizeAxis(ctx.attrs().getInt("axis"), data.rank());
    int q = ctx.inShape(1).rank();
    ElementGen x = ctx.inputs[0], indices = ctx.inputs[1];
    return {[=](const Index& idx) {
      Index at(idx.begin() + axis, idx.begin() + axis + q);
      Index src(idx.begin(), idx.begin() + axis);
      src.push_back(normalizeIndex(*kb, indices(at), data[axis]));
      src.insert(src.end(), idx.begin() + axis + q, idx.end());
      return x(src);
    }};
  };
  d.indexChecks = [](const Node& n) -> std::vector<IndexCheck> {
    const Shape& data = n.input(0)->shape();
    return {ops::axisIndexCheck(1, data[*normalizeAxis(n.attrs().getInt("axis"), data.rank())])};
  };
  r.define(std::move(d));
}

void defineGatherElements(OpRegistry& r) {
  OpDef d = ops::newDef(OpKind::GatherElements);
  d.minInputs = 2, d.maxInputs = 2;
  d.attrs = {ops::attrInt("axis", 0)};
  d.infer = [](InferContext& ctx) -> Status {
    NNC_RETURN_IF_ERROR(requireInput(ctx, 1, "indices"));
    NNC_RETURN_IF_ERROR(requireIndexType(ctx, 1, "indices"));
    const Shape &data = ctx.inShape(0), &ind = ctx.inShape(1);
    if (data.rank() == 0) return ctx.error("data must have rank >= 1");
    if (ind.rank() != data.rank())
      return ctx.error("indices " + ind.str() + " must have the rank of data " + data.str());
    Expected<int> axis = resolveAxis(ctx.attrs().getInt("axis"), data.rank());
    if (!axis) return ctx.error(axis.status().message());
    for (int i = 0; i < data.rank(); ++i) {
      if (i != *axis && ind[i] > data[i])
        return ctx.error("indices " + ind.str() + " exceed data " + data.str() + " in dim " + std::to_string(i));
    }
    if (data[*axis] == 0 && ind.numel() > 0) return ctx.error("cannot gather from an empty axis");
    ctx.setOutput(0, ctx.inType(0), ind);
    return Status::ok();
  };
  d.lowerElement = [](LowerContext& ctx) -> std::vector<ElementGen> {
    KernelBuilder* kb = &ctx.kb;
    Shape data = ctx.inShape(0);
    int axis = *normalizeAxis(ctx.attrs().getInt("axis"), data.rank());
    ElementGen x = ctx.inputs[0], indices = ctx.inputs[1];
    return {[=](const Index& idx) {
      Index src(idx);
      src[axis] = normalizeIndex(*kb, indices(idx), data[axis]);
      return x(src);
    }};
  };
  d.indexChecks = [](const Node& n) -> std::vector<IndexCheck> {
    const Shape& data = n.input(0)->shape();
    return {ops::axisIndexCheck(1, data[*normalizeAxis(n.attrs().getInt("axis"), data.rank())])};
  };
  r.define(std::move(d));
}

void defineGatherND(OpRegistry& r) {
  OpDef d = ops::newDef(OpKind::GatherND);
  d.minInputs = 2, d.maxInputs = 2;
  d.attrs = {ops::attrInt("batch_dims", 0)};
  d.infer = [](InferContext& ctx) -> Status {
    NNC_RETURN_IF_ERROR(requireInput(ctx, 1, "indices"));
    NNC_RETURN_IF_ERROR(requireIndexType(ctx, 1, "indices"));
    const Shape &data = ctx.inShape(0), &ind = ctx.inShape(1);
    int64_t b = ctx.attrs().getInt("batch_dims");
    int r = data.rank(), q = ind.rank();
    if (r < 1 || q < 1) return ctx.error("data and indices must have rank >= 1");
    if (b < 0 || b >= std::min(r, q))
      return ctx.error("batch_dims " + std::to_string(b) + " must be less than the ranks of data (" +
                       std::to_string(r) + ") and indices (" + std::to_string(q) + ")");
    for (int i = 0; i < b; ++i) {
      if (data[i] != ind[i])
        return ctx.error("batch dim " + std::to_string(i) + " differs: data " + data.str() + ", indices " + ind.str());
    }
    int64_t k = ind[q - 1];
    if (k < 1 || k > r - b)
      return ctx.error("indices " + ind.str() + " index " + std::to_string(k) + " dims, expected 1.." +
                       std::to_string(r - b));
    for (int64_t j = 0; j < k; ++j) {
      if (data[static_cast<int>(b + j)] == 0 && ind.numel() > 0) return ctx.error("cannot gather from an empty dim");
    }
    Shape out;
    for (int i = 0; i < q - 1; ++i) out.dims().push_back(ind[i]);
    for (int i = static_cast<int>(b + k); i < r; ++i) out.dims().push_back(data[i]);
    ctx.setOutput(0, ctx.inType(0), out);
    return Status::ok();
  };
  d.lowerElement = [](LowerContext& ctx) -> std::vector<ElementGen> {
    KernelBuilder* kb = &ctx.kb;
    Shape data = ctx.inShape(0);
    int q = ctx.inShape(1).rank();
    int b = static_cast<int>(ctx.attrs().getInt("batch_dims"));
    int k = static_cast<int>(ctx.inShape(1)[q - 1]);
    ElementGen x = ctx.inputs[0], indices = ctx.inputs[1];
    return {[=](const Index& idx) {
      Index src(idx.begin(), idx.begin() + b);
      Index at(idx.begin(), idx.begin() + (q - 1));
      at.push_back(kir::kNoExpr);
      for (int j = 0; j < k; ++j) {
        at.back() = kb->i64(j);
        src.push_back(normalizeIndex(*kb, indices(at), data[b + j]));
      }
      src.insert(src.end(), idx.begin() + (q - 1), idx.end());
      return x(src);
    }};
  };
  d.indexChecks = [](const Node& n) -> std::vector<IndexCheck> {
    const Shape &data = n.input(0)->shape(), &ind = n.input(1)->shape();
    const int64_t b = n.attrs().getInt("batch_dims");
    std::vector<int64_t> extents(data.dims().begin() + b, data.dims().begin() + b + ind[ind.rank() - 1]);
    return {ops::tupleIndexCheck(1, std::move(extents))};
  };
  r.define(std::move(d));
}

void defineReverseSequence(OpRegistry& r) {
  OpDef d = ops::newDef(OpKind::ReverseSequence);
  d.minInputs = 2, d.maxInputs = 2;
  d.attrs = {ops::attrInt("batch_axis", 1), ops::attrInt("time_axis", 0)};
  d.infer = [](InferContext& ctx) -> Status {
    NNC_RETURN_IF_ERROR(requireInput(ctx, 1, "sequence_lens"));
    NNC_RETURN_IF_ERROR(requireIndexType(ctx, 1, "sequence_lens"));
    int64_t batch = ctx.attrs().getInt("batch_axis"), time = ctx.attrs().getInt("time_axis");
    if (ctx.inRank(0) < 2) return ctx.error("input must have rank >= 2, got " + ctx.inShape(0).str());
    if (!((batch == 0 && time == 1) || (batch == 1 && time == 0)))
      return ctx.error("batch_axis and time_axis must be 0 and 1 in some order, got " + std::to_string(batch) +
                       " and " + std::to_string(time));
    Shape lens({ctx.inShape(0)[static_cast<int>(batch)]});
    if (ctx.inShape(1) != lens)
      return ctx.error("sequence_lens has shape " + ctx.inShape(1).str() + ", expected " + lens.str());
    ctx.setOutput(0, ctx.inType(0), ctx.inShape(0));
    return Status::ok();
  };
  d.lowerElement = [](LowerContext& ctx) -> std::vector<ElementGen> {
    KernelBuilder* kb = &ctx.kb;
    int batch = static_cast<int>(ctx.attrs().getInt("batch_axis"));
    int time = static_cast<int>(ctx.attrs().getInt("time_axis"));
    int64_t steps = ctx.inShape(0)[time];
    ElementGen x = ctx.inputs[0], lens = ctx.inputs[1];
    return {[=](const Index& idx) {
      ExprId len = toI64(*kb, lens({idx[batch]}));
      ExprId t = idx[time];
      // The first len steps are reversed, the rest copied.
      ExprId reversed = kb->sub(kb->sub(len, kb->i64(1)), t);
      Index src(idx);
      src[time] = kb->clamp(kb->select(kb->lt(t, len), reversed, t), 0, steps - 1);
      return x(src);
    }};
  };
  d.indexChecks = [](const Node& n) -> std::vector<IndexCheck> {
    const int64_t steps = n.input(0)->shape()[static_cast<int>(n.attrs().getInt("time_axis"))];
    return {{1, "must be in [0, " + std::to_string(steps) + "]", [steps](KernelBuilder& kb, ExprId len, const Index&) {
               return kb.binary(ExprOp::Or, kb.lt(len, kb.i64(0)), kb.binary(ExprOp::Gt, len, kb.i64(steps)));
             }}};
  };
  r.define(std::move(d));
}

}  // namespace

void defineGatherOps(OpRegistry& r) {
  defineGather(r);
  defineGatherElements(r);
  defineGatherND(r);
  defineReverseSequence(r);
}

}  // namespace nnc
