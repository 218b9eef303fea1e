// Generator op definitions (Injective): OneHot, Range, ConstantOfShape, EyeLike, Shape and Size.
// Their elements come from the output index, attributes and static inputs (OneHot also reads its
// indices input).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "ir/ops/common.h"

namespace nnc {
namespace {

using kir::ElementGen;
using kir::ExprId;
using kir::KernelBuilder;
using ops::exprType;
using ops::listStr;
using ops::requireInput;
using ops::resolveAxis;
using ops::staticInts;
using ops::staticTensor;
using ops::tensorElement;
using ops::toI64;
using Index = std::vector<ExprId>;

// ONNX allows any numeric type for depth (its own tests use f32), so it is a Float attribute.
std::optional<int64_t> oneHotDepth(const Node& n) {
  // Saturating: a depth of -inf, NaN or 1e300 (fuzzer findings) is then refused as a depth, not UB.
  if (const AttrValue* v = n.attrs().find("depth")) return saturatingToInt64(std::get<double>(*v));
  const Value* in = n.input(1);
  if (in && in->isConstant() && in->constant().numel() == 1) return saturatingToInt64(in->constant().getDouble(0));
  return std::nullopt;
}

void defineOneHot(OpRegistry& r) {
  OpDef d = ops::newDef(OpKind::OneHot);
  d.minInputs = 1, d.maxInputs = 3;  // input 1 (depth) becomes an attribute
  d.attrs = {ops::attrInt("axis", -1), ops::optionalAttr("depth", AttrKind::Float)};
  d.staticInputs = {{1, "depth", AttrKind::Float}};
  d.infer = [](InferContext& ctx) -> Status {
    NNC_RETURN_IF_ERROR(requireInput(ctx, 2, "values"));
    std::optional<int64_t> depth = oneHotDepth(ctx.node());
    if (!depth) return ctx.error("'depth' is required (input 1)");
    if (*depth <= 0) return ctx.error("depth must be positive, got " + std::to_string(*depth));
    if (ctx.inShape(2) != Shape({2}))
      return ctx.error("values must have shape [2] (off, on), got " + ctx.inShape(2).str());
    if (isHalfLike(ctx.inType(0)) || ctx.inType(0) == DType::Bool)
      return ctx.error("indices of type " + std::string(dtypeName(ctx.inType(0))) + " are not supported");
    const Shape& ind = ctx.inShape(0);
    Expected<int> axis = resolveAxis(ctx.attrs().getInt("axis"), ind.rank() + 1);
    if (!axis) return ctx.error(axis.status().message());
    Shape out = ind;
    out.dims().insert(out.dims().begin() + *axis, *depth);
    if (!out.checkedNumel()) return ctx.error("output " + out.str() + " is too large");
    ctx.setOutput(0, ctx.inType(2), out);
    return Status::ok();
  };
  d.lowerElement = [](LowerContext& ctx) -> std::vector<ElementGen> {
    KernelBuilder* kb = &ctx.kb;
    int64_t depth = *oneHotDepth(ctx.node);
    int axis = *normalizeAxis(ctx.attrs().getInt("axis"), ctx.inShape(0).rank() + 1);
    ElementGen indices = ctx.inputs[0], values = ctx.inputs[2];
    return {[=](const Index& idx) {
      Index at(idx);
      at.erase(at.begin() + axis);
      ExprId i = toI64(*kb, indices(at));
      i = kb->select(kb->lt(i, kb->i64(0)), kb->add(i, kb->i64(depth)), i);
      return kb->select(kb->eq(i, idx[axis]), values({kb->i64(1)}), values({kb->i64(0)}));
    }};
  };
  r.define(std::move(d));
}

// Range's element count: ceil((limit - start) / delta) computed in the tensors' own type.
Expected<int64_t> rangeCount(const Tensor& start, const Tensor& limit, const Tensor& delta) {
  DType t = start.dtype();
  double count;
  if (isFloat(t)) {
    double s = start.getDouble(0), l = limit.getDouble(0), d = delta.getDouble(0);
    if (d == 0) return Status::error("delta must not be zero");
    if (t == DType::F64)
      count = std::ceil((l - s) / d);
    else
      count = std::ceil(static_cast<float>(static_cast<float>(l) - static_cast<float>(s)) / static_cast<float>(d));
    if (std::isnan(count)) return Status::error("start, limit and delta must be finite");
  } else {
    // In 128 bits: limit - start overflows int64 for far-apart ends.
    const __int128 s = start.getInt(0), l = limit.getInt(0), d = delta.getInt(0);
    if (d == 0) return Status::error("delta must not be zero");
    __int128 diff = l - s, q = diff / d;
    if (diff % d != 0 && ((diff < 0) == (d < 0))) ++q;
    count = static_cast<double>(q);
  }
  // A count of -inf (a limit of -inf) is an empty range; converting it to an integer would be UB.
  if (count <= 0) return 0;
  if (count > static_cast<double>(kMaxElements)) return Status::error("range has too many elements");
  return static_cast<int64_t>(count);
}

void defineRange(OpRegistry& r) {
  OpDef d = ops::newDef(OpKind::Range);
  d.minInputs = 0, d.maxInputs = 3;
  d.attrs = {ops::optionalAttr("start", AttrKind::Tensor), ops::optionalAttr("limit", AttrKind::Tensor),
             ops::optionalAttr("delta", AttrKind::Tensor)};
  d.staticInputs = {{0, "start", AttrKind::Tensor}, {1, "limit", AttrKind::Tensor}, {2, "delta", AttrKind::Tensor}};
  d.infer = [](InferContext& ctx) -> Status {
    const char* names[] = {"start", "limit", "delta"};
    std::vector<Tensor> t;
    for (int i = 0; i < 3; ++i) {
      std::optional<Tensor> v = staticTensor(ctx.node(), names[i], i);
      if (!v) return ctx.error(std::string("'") + names[i] + "' is required (input " + std::to_string(i) + ")");
      if (v->numel() != 1) return ctx.error(std::string(names[i]) + " must be a scalar, got " + v->shape().str());
      if (v->dtype() != (t.empty() ? v->dtype() : t[0].dtype()))
        return ctx.error(std::string(names[i]) + " has type " + std::string(dtypeName(v->dtype())) + ", expected " +
                         std::string(dtypeName(t[0].dtype())));
      t.push_back(*v);
    }
    if (t[0].dtype() == DType::Bool) return ctx.error("range of bool is not supported");
    Expected<int64_t> n = rangeCount(t[0], t[1], t[2]);
    if (!n) return ctx.error(n.status().message());
    ctx.setOutput(0, t[0].dtype(), Shape({*n}));
    return Status::ok();
  };
  d.lowerElement = [](LowerContext& ctx) -> std::vector<ElementGen> {
    KernelBuilder* kb = &ctx.kb;
    Tensor start = *staticTensor(ctx.node, "start", 0), delta = *staticTensor(ctx.node, "delta", 2);
    DType type = ctx.outType(0), et = exprType(type);
    return {[=](const Index& idx) {
      // output[i] = start + i * delta, in the output's type.
      return kb->add(tensorElement(*kb, start, 0, type),
                     kb->mul(kb->cast(et, idx[0]), tensorElement(*kb, delta, 0, type)));
    }};
  };
  r.define(std::move(d));
}

void defineConstantOfShape(OpRegistry& r) {
  OpDef d = ops::newDef(OpKind::ConstantOfShape);
  d.minInputs = 0, d.maxInputs = 1;
  d.attrs = {ops::optionalAttr("shape", AttrKind::Ints),
             {"value", AttrKind::Tensor, AttrValue(Tensor(DType::F32, Shape({1}))), false}};
  d.staticInputs = {{0, "shape", AttrKind::Ints}};
  d.infer = [](InferContext& ctx) -> Status {
    std::optional<std::vector<int64_t>> shape = staticInts(ctx.node(), "shape", 0);
    if (!shape) return ctx.error("'shape' is required (input 0)");
    const Tensor& value = ctx.attrs().getTensor("value");
    if (value.numel() != 1) return ctx.error("value must have exactly one element, got " + value.shape().str());
    Shape out(*shape);
    if (!out.checkedNumel()) return ctx.error("shape " + listStr(*shape) + " is invalid");
    ctx.setOutput(0, value.dtype(), out);
    return Status::ok();
  };
  d.lowerElement = [](LowerContext& ctx) -> std::vector<ElementGen> {
    KernelBuilder* kb = &ctx.kb;
    Tensor value = ctx.attrs().getTensor("value");
    DType type = ctx.outType(0);
    return {[=](const Index&) { return tensorElement(*kb, value, 0, type); }};
  };
  r.define(std::move(d));
}

void defineEyeLike(OpRegistry& r) {
  OpDef d = ops::newDef(OpKind::EyeLike);
  d.attrs = {ops::optionalAttr("dtype", AttrKind::Int), ops::attrInt("k", 0)};
  d.dependsOnlyOnShapes = true;
  d.infer = [](InferContext& ctx) -> Status {
    if (ctx.inRank(0) != 2) return ctx.error("expected a 2-D input, got " + ctx.inShape(0).str());
    DType type = ctx.inType(0);
    if (const AttrValue* v = ctx.attrs().find("dtype")) {
      std::optional<DType> t = dtypeFromOnnx(static_cast<int>(std::get<int64_t>(*v)));
      if (!t) return ctx.error("dtype " + std::to_string(std::get<int64_t>(*v)) + " is not supported");
      type = *t;
    }
    ctx.setOutput(0, type, ctx.inShape(0));
    return Status::ok();
  };
  d.lowerElement = [](LowerContext& ctx) -> std::vector<ElementGen> {
    KernelBuilder* kb = &ctx.kb;
    int64_t k = ctx.attrs().getInt("k");
    DType et = exprType(ctx.outType(0));
    return {[=](const Index& idx) {
      ExprId onDiagonal = kb->eq(kb->sub(idx[1], idx[0]), kb->i64(k));
      return kb->select(onDiagonal, kb->constant(et, 1), kb->constant(et, 0));
    }};
  };
  r.define(std::move(d));
}

// Shape's [start, end) window: negative values count from the end, then clamp into [0, rank].
std::vector<int64_t> shapeWindow(const Node& n, const Shape& in) {
  int64_t rank = in.rank();
  auto norm = [&](int64_t v) { return std::clamp<int64_t>(v < 0 ? v + rank : v, 0, rank); };
  int64_t start = norm(n.attrs().getInt("start")), end = norm(n.attrs().getInt("end", rank));
  std::vector<int64_t> dims;
  for (int64_t i = start; i < end; ++i) dims.push_back(in[static_cast<int>(i)]);
  return dims;
}

void defineShape(OpRegistry& r) {
  OpDef d = ops::newDef(OpKind::Shape);
  d.attrs = {ops::attrInt("start", 0), ops::optionalAttr("end", AttrKind::Int)};
  d.dependsOnlyOnShapes = true;
  d.infer = [](InferContext& ctx) -> Status {
    int64_t n = static_cast<int64_t>(shapeWindow(ctx.node(), ctx.inShape(0)).size());
    ctx.setOutput(0, DType::I64, Shape({n}));
    return Status::ok();
  };
  d.lowerElement = [](LowerContext& ctx) -> std::vector<ElementGen> {
    KernelBuilder* kb = &ctx.kb;
    std::vector<int64_t> dims = shapeWindow(ctx.node, ctx.inShape(0));
    return {[=](const Index& idx) {
      if (dims.empty()) return kb->i64(0);  // an empty output: never run
      int64_t known;
      if (kb->isConstInt(idx[0], &known)) return kb->i64(dims[std::clamp<int64_t>(known, 0, dims.size() - 1)]);
      ExprId v = kb->i64(dims.back());
      for (int i = static_cast<int>(dims.size()) - 2; i >= 0; --i)
        v = kb->select(kb->eq(idx[0], kb->i64(i)), kb->i64(dims[i]), v);
      return v;
    }};
  };
  r.define(std::move(d));
}

void defineSize(OpRegistry& r) {
  OpDef d = ops::newDef(OpKind::Size);
  d.dependsOnlyOnShapes = true;
  d.infer = [](InferContext& ctx) -> Status {
    ctx.setOutput(0, DType::I64, Shape());
    return Status::ok();
  };
  d.lowerElement = [](LowerContext& ctx) -> std::vector<ElementGen> {
    KernelBuilder* kb = &ctx.kb;
    int64_t n = ctx.inShape(0).numel();
    return {[=](const Index&) { return kb->i64(n); }};
  };
  r.define(std::move(d));
}

}  // namespace

void defineGeneratorOps(OpRegistry& r) {
  defineOneHot(r);
  defineRange(r);
  defineConstantOfShape(r);
  defineEyeLike(r);
  defineShape(r);
  defineSize(r);
}

}  // namespace nnc
