// Helpers shared by the op definitions: broadcasting, axis checks, same-type checks.
#include "ir/ops/common.h"

namespace nnc::ops {

std::vector<kir::ExprId> broadcastIndex(kir::KernelBuilder& kb, const std::vector<kir::ExprId>& outIndex,
                                        const Shape& in) {
  int outRank = static_cast<int>(outIndex.size());
  NNC_CHECK(in.rank() <= outRank, "broadcastIndex: input rank " + std::to_string(in.rank()) + " exceeds output rank " +
                                      std::to_string(outRank));
  std::vector<kir::ExprId> idx(in.rank());
  int offset = outRank - in.rank();
  for (int i = 0; i < in.rank(); ++i) idx[i] = in[i] == 1 ? kb.i64(0) : outIndex[offset + i];
  return idx;
}

Status inferBroadcast(InferContext& ctx, Shape* out) {
  std::optional<Shape> acc;
  for (int i = 0; i < ctx.numInputs(); ++i) {
    if (!ctx.hasInput(i)) continue;
    if (!acc) {
      acc = ctx.inShape(i);
      continue;
    }
    std::optional<Shape> next = broadcastShapes(*acc, ctx.inShape(i));
    if (!next) return ctx.error("cannot broadcast shapes " + acc->str() + " and " + ctx.inShape(i).str());
    acc = std::move(next);
  }
  *out = acc ? *acc : Shape{};
  return Status::ok();
}

Expected<int> checkAxis(const InferContext& ctx, int64_t axis, int rank) {
  std::optional<int> a = normalizeAxis(axis, rank);
  if (!a) return ctx.error("axis " + std::to_string(axis) + " is out of range for rank " + std::to_string(rank));
  return *a;
}

Status requireSameType(InferContext& ctx) {
  int first = -1;
  for (int i = 0; i < ctx.numInputs(); ++i) {
    if (!ctx.hasInput(i)) continue;
    if (first < 0) {
      first = i;
      continue;
    }
    if (ctx.inType(i) != ctx.inType(first))
      return ctx.error("input " + std::to_string(i) + " has type " + std::string(dtypeName(ctx.inType(i))) +
                       ", expected " + std::string(dtypeName(ctx.inType(first))) + " like input " +
                       std::to_string(first));
  }
  return Status::ok();
}

kir::ExprId loadBroadcast(LowerContext& ctx, int input, const std::vector<kir::ExprId>& outIndex) {
  NNC_CHECK(ctx.hasInput(input), ctx.node.diagPrefix() + "loadBroadcast of a missing input");
  return ctx.inputs[input](broadcastIndex(ctx.kb, outIndex, ctx.inShape(input)));
}

namespace {

kir::ExprId outsideSymmetricRange(kir::KernelBuilder& kb, kir::ExprId value, kir::ExprId extent) {
  return kb.binary(kir::ExprOp::Or, kb.lt(value, kb.unary(kir::ExprOp::Neg, extent)),
                   kb.binary(kir::ExprOp::Ge, value, extent));
}

}  // namespace

IndexCheck axisIndexCheck(int input, int64_t extent) {
  return {input, "must be in [" + std::to_string(-extent) + ", " + std::to_string(extent - 1) + "]",
          [extent](kir::KernelBuilder& kb, kir::ExprId value, const std::vector<kir::ExprId>&) {
            return outsideSymmetricRange(kb, value, kb.i64(extent));
          }};
}

IndexCheck tupleIndexCheck(int input, std::vector<int64_t> extents) {
  std::string dims;
  for (int64_t e : extents) dims += (dims.empty() ? "" : ", ") + std::to_string(e);
  return {input, "must address dims of extents (" + dims + ") (component c in [-extent_c, extent_c - 1])",
          [extents](kir::KernelBuilder& kb, kir::ExprId value, const std::vector<kir::ExprId>& index) {
            // The extent of the dim addressed by this component: a select chain over the tuple
            // position (tuples are at most the data's rank long).
            kir::ExprId component = index.back();
            kir::ExprId extent = kb.i64(extents.back());
            for (size_t c = extents.size() - 1; c-- > 0;)
              extent = kb.select(kb.eq(component, kb.i64(static_cast<int64_t>(c))), kb.i64(extents[c]), extent);
            return outsideSymmetricRange(kb, value, extent);
          }};
}

}  // namespace nnc::ops
