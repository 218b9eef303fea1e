// Helpers shared by the op definitions (see common.h).
#include "ir/ops/common.h"

#include <cmath>
#include <utility>

namespace nnc::ops {

OpDef anchorDef(OpKind kind, int minInputs, int maxInputs, std::vector<AttrSpec> attrs,
                std::function<Status(InferContext&)> infer,
                std::function<std::vector<AnchorOutput>(LowerContext&)> lower) {
  OpDef d = newDef(kind);
  d.minInputs = minInputs;
  d.maxInputs = maxInputs;
  d.attrs = std::move(attrs);
  d.infer = std::move(infer);
  d.lowerAnchor = std::move(lower);
  return d;
}

OpDef rereading(OpDef d) {
  d.rereadsInputs = true;
  return d;
}

std::vector<AnchorOutput> singleOutput(const std::vector<kir::ExprId>& index, kir::ExprId value) {
  return {AnchorOutput{index, value, /*perInner=*/false}};
}

std::string listStr(const std::vector<int64_t>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s + "]";
}

std::string countMessage(const std::string& what, size_t got, size_t expected) {
  return what + " has " + std::to_string(got) + " values, expected " + std::to_string(expected);
}

std::optional<std::vector<int64_t>> staticInts(const Node& n, const std::string& name, int input) {
  if (const AttrValue* v = n.attrs().find(name)) return std::get<std::vector<int64_t>>(*v);
  const Value* in = n.input(input);
  if (in && in->isConstant()) return in->constant().toInt64s();
  return std::nullopt;
}

std::optional<int64_t> staticInt(const Node& n, const std::string& name, int input) {
  if (const AttrValue* v = n.attrs().find(name)) return std::get<int64_t>(*v);
  const Value* in = n.input(input);
  if (in && in->isConstant() && in->constant().numel() == 1) return in->constant().getInt(0);
  return std::nullopt;
}

std::optional<Tensor> staticTensor(const Node& n, const std::string& name, int input) {
  if (const AttrValue* v = n.attrs().find(name)) return std::get<Tensor>(*v);
  const Value* in = n.input(input);
  if (in && in->isConstant()) return in->constant();
  return std::nullopt;
}

Status requireInput(InferContext& ctx, int i, const char* what) {
  if (ctx.hasInput(i)) return Status::ok();
  return ctx.error(std::string("missing input ") + std::to_string(i) + " (" + what + ")");
}

DType exprType(DType storage) { return isHalfLike(storage) ? DType::F32 : storage; }

kir::ExprId tensorElement(kir::KernelBuilder& kb, const Tensor& t, int64_t i, DType storage) {
  DType et = exprType(storage);
  if (isFloat(et)) return kb.constant(et, t.getDouble(i));
  if (isFloat(t.dtype())) return kb.constant(et, std::trunc(t.getDouble(i)));
  return kb.constantInt(et, t.getInt(i));
}

kir::ExprId toI64(kir::KernelBuilder& kb, kir::ExprId e) {
  return kb.dtypeOf(e) == DType::I64 ? e : kb.cast(DType::I64, e);
}

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

Expected<int> resolveAxis(int64_t axis, int rank) {
  std::optional<int> a = normalizeAxis(axis, rank);
  if (!a) return Status::error("axis " + std::to_string(axis) + " is out of range for rank " + std::to_string(rank));
  return *a;
}

Expected<int> checkAxis(const InferContext& ctx, int64_t axis, int rank) {
  Expected<int> a = resolveAxis(axis, rank);
  if (!a) return ctx.error(a.status().message());
  return a;
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
