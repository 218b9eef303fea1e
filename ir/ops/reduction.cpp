// Op definitions for the reduction anchors of ir/ops.def that are not contractions or windows:
// Reduce*, ArgMax/ArgMin, softmax-like row ops, normalizations, LRN, CumSum and the scatters.
// Each lowers to one kernel: outer loop = the points that own a result, ordered reductions, and
// (for row ops) an inner loop writing the whole row. Semantics follow the newest ONNX opset; the
// importer maps older opsets (attributes that became inputs, Softmax before 13) onto this form.
#include <algorithm>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "ir/ops/common.h"

namespace nnc {
namespace {

using kir::ExprId;
using kir::ExprOp;
using kir::KernelBuilder;
using kir::ReduceOp;

// ---------------------------------------------------------------------------------------------
// Shared helpers

// Sums and products accumulate narrow integers in 64 bits (so that ReduceMean divides the true sum);
// f32 accumulates in f32 like ONNX Runtime and numpy, f64 in f64.
DType accumType(DType t) {
  if (isHalfLike(t)) return DType::F32;
  if (isSignedInt(t)) return DType::I64;
  if (isUnsignedInt(t)) return DType::U64;
  return t;
}

ExprId num(KernelBuilder& kb, DType t, double v) {
  return isFloat(t) ? kb.constant(t, v) : kb.constantInt(t, static_cast<int64_t>(v));
}

ExprId castTo(KernelBuilder& kb, DType t, ExprId e) { return kb.dtypeOf(e) == t ? e : kb.cast(t, e); }

ExprId loadAs(LowerContext& ctx, int input, const std::vector<ExprId>& index, DType t) {
  return castTo(ctx.kb, t, ctx.inputs[input](index));
}

// An Ints value that ONNX passes as an input in newer opsets (Reduce* axes): the attribute when
// present, else the data of a constant input, else absent. A non-constant input is an error.
Expected<std::optional<std::vector<int64_t>>> staticInts(const Node& node, const std::string& attr, int input) {
  if (node.attrs().has(attr)) return std::optional<std::vector<int64_t>>(node.attrs().getInts(attr));
  const Value* v = node.input(input);
  if (v == nullptr) return std::optional<std::vector<int64_t>>();
  if (!v->isConstant())
    return Status::error(node.diagPrefix() + "input " + std::to_string(input) + " (" + attr +
                         ") must be a compile-time constant");
  return std::optional<std::vector<int64_t>>(v->constant().toInt64s());
}

// Normalises a list of axes into per-dim flags, rejecting out-of-range and repeated axes.
Expected<std::vector<bool>> axisFlags(const InferContext& ctx, const std::vector<int64_t>& axes, int rank) {
  std::vector<bool> flags(rank, false);
  for (int64_t a : axes) {
    NNC_ASSIGN_OR_RETURN(int axis, ops::checkAxis(ctx, a, rank));
    if (flags[axis]) return ctx.error("axes " + ops::listStr(axes) + " name axis " + std::to_string(axis) + " twice");
    flags[axis] = true;
  }
  return flags;
}

// The same after inference has validated them (lowering).
std::vector<bool> axisFlagsChecked(const std::vector<int64_t>& axes, int rank) {
  std::vector<bool> flags(rank, false);
  for (int64_t a : axes) {
    std::optional<int> axis = normalizeAxis(a, rank);
    NNC_CHECK(axis.has_value(), "axes were validated by inference");
    flags[*axis] = true;
  }
  return flags;
}

int normalizedAxis(int64_t axis, int rank) {
  std::optional<int> a = normalizeAxis(axis, rank);
  NNC_CHECK(a.has_value(), "axis was validated by inference");
  return *a;
}

// Splits the dims of `shape` by `flags`: the extents of the dims with flag == `which`.
std::vector<int64_t> extentsWhere(const Shape& shape, const std::vector<bool>& flags, bool which) {
  std::vector<int64_t> e;
  for (int d = 0; d < shape.rank(); ++d)
    if (flags[d] == which) e.push_back(shape[d]);
  return e;
}

// Fresh reduction vars for the flagged dims of a value: one flat loop when those dims are adjacent
// (KernelBuilder::flatReductionVars: a unit-stride loop over a row-major value's H x W).
std::vector<ExprId> reductionVarsWhere(KernelBuilder& kb, const Shape& shape, const std::vector<bool>& flags) {
  const auto first = std::find(flags.begin(), flags.end(), true);
  const auto pastLast = std::find(first, flags.end(), false);
  const bool adjacent = std::find(pastLast, flags.end(), true) == flags.end();
  std::vector<int64_t> extents = extentsWhere(shape, flags, true);
  return adjacent ? kb.flatReductionVars(extents) : kb.reductionVars(extents);
}

// A full multi-index from the vars of the unflagged dims (`rest`) and of the flagged dims (`flagged`).
std::vector<ExprId> mergeIndex(const std::vector<bool>& flags, const std::vector<ExprId>& rest,
                               const std::vector<ExprId>& flagged) {
  std::vector<ExprId> index;
  size_t r = 0, f = 0;
  for (bool flag : flags) index.push_back(flag ? flagged[f++] : rest[r++]);
  return index;
}

// Flagged dims pinned to 0 (a kept reduced dim, or a LayerNorm statistic's normalized dims).
std::vector<ExprId> pinnedIndex(KernelBuilder& kb, const std::vector<bool>& flags, const std::vector<ExprId>& rest) {
  return mergeIndex(flags, rest, std::vector<ExprId>(flags.size(), kb.i64(0)));
}

std::vector<ExprId> withAxis(std::vector<ExprId> index, int axis, ExprId v) {
  index.insert(index.begin() + axis, v);
  return index;
}

std::vector<int64_t> withoutAxis(const Shape& shape, int axis) {
  std::vector<int64_t> e = shape.dims();
  e.erase(e.begin() + axis);
  return e;
}

std::vector<bool> fromAxis(int rank, int axis) {
  std::vector<bool> flags(rank, false);
  for (int d = axis; d < rank; ++d) flags[d] = true;
  return flags;
}

// ---------------------------------------------------------------------------------------------
// Reduce*

enum class ReduceKind { Sum, Mean, Max, Min, Prod, L1, L2, LogSum, LogSumExp, SumSquare };

// The reduce attribute/input `axes` as per-dim flags; `noop` when the node reduces nothing.
struct ReduceAxes {
  std::vector<bool> reduced;
  bool noop = false;
};

Expected<ReduceAxes> reduceAxes(const InferContext& ctx) {
  NNC_ASSIGN_OR_RETURN(auto axes, staticInts(ctx.node(), "axes", 1));
  ReduceAxes r;
  int rank = ctx.inRank(0);
  if (!axes || axes->empty()) {
    r.noop = ctx.attrs().getInt("noop_with_empty_axes") != 0;
    r.reduced.assign(rank, !r.noop);
    return r;
  }
  NNC_ASSIGN_OR_RETURN(r.reduced, axisFlags(ctx, *axes, rank));
  return r;
}

ReduceAxes reduceAxesChecked(const LowerContext& ctx) {
  auto axes = staticInts(ctx.node, "axes", 1);
  NNC_CHECK(axes.isOk(), "axes were validated by inference");
  ReduceAxes r;
  int rank = ctx.inShape(0).rank();
  if (!axes.value() || axes.value()->empty()) {
    r.noop = ctx.attrs().getInt("noop_with_empty_axes") != 0;
    r.reduced.assign(rank, !r.noop);
    return r;
  }
  r.reduced = axisFlagsChecked(*axes.value(), rank);
  return r;
}

Status inferReduce(InferContext& ctx) {
  NNC_ASSIGN_OR_RETURN(ReduceAxes ra, reduceAxes(ctx));
  bool keep = ctx.attrs().getInt("keepdims") != 0;
  std::vector<int64_t> out;
  const Shape& in = ctx.inShape(0);
  for (int d = 0; d < in.rank(); ++d) {
    if (!ra.reduced[d])
      out.push_back(in[d]);
    else if (keep)
      out.push_back(1);
  }
  ctx.setOutput(0, ctx.inType(0), Shape(out));
  return Status::ok();
}

// The reduced value of one kind: `x(index)` reads the input in its compute type at an index built
// from fresh reduction vars (called once per reduction).
ExprId reduceValue(KernelBuilder& kb, ReduceKind kind, DType t, int64_t count,
                   const std::function<ExprId(const std::vector<ExprId>&)>& x,
                   const std::function<std::vector<ExprId>()>& newIndexVars,
                   const std::function<std::vector<ExprId>(const std::vector<ExprId>&)>& indexOf) {
  DType ct = ops::exprType(t), at = accumType(t);
  // Integer L2/LogSum/LogSumExp apply their float function in f64 and truncate back.
  DType ft = isFloat(t) ? ct : DType::F64;
  auto fold = [&](ReduceOp op, DType bodyType, const std::function<ExprId(ExprId)>& f) {
    std::vector<ExprId> vars = newIndexVars();
    return kb.reduce(op, vars, f(castTo(kb, bodyType, x(indexOf(vars)))));
  };
  auto identity = [](ExprId e) { return e; };
  auto square = [&](ExprId e) { return kb.mul(e, e); };
  switch (kind) {
    case ReduceKind::Sum: return castTo(kb, ct, fold(ReduceOp::Sum, at, identity));
    case ReduceKind::Mean: return castTo(kb, ct, kb.div(fold(ReduceOp::Sum, at, identity), num(kb, at, count)));
    case ReduceKind::Prod: return castTo(kb, ct, fold(ReduceOp::Prod, at, identity));
    case ReduceKind::SumSquare: return castTo(kb, ct, fold(ReduceOp::Sum, at, square));
    case ReduceKind::L1:
      return castTo(
          kb, ct, fold(ReduceOp::Sum, at, [&](ExprId e) { return isUnsignedInt(at) ? e : kb.unary(ExprOp::Abs, e); }));
    case ReduceKind::L2: return castTo(kb, ct, kb.unary(ExprOp::Sqrt, castTo(kb, ft, fold(ReduceOp::Sum, at, square))));
    case ReduceKind::LogSum:
      return castTo(kb, ct, kb.unary(ExprOp::Log, castTo(kb, ft, fold(ReduceOp::Sum, at, identity))));
    case ReduceKind::Max:
    case ReduceKind::Min: {
      ReduceOp op = kind == ReduceKind::Max ? ReduceOp::Max : ReduceOp::Min;
      if (t != DType::Bool) return fold(op, ct, identity);
      return kb.binary(ExprOp::Ne, fold(op, DType::U8, identity), kb.constantInt(DType::U8, 0));
    }
    case ReduceKind::LogSumExp: {
      // log(sum(exp(x - m))) + m with m = max(x) for stability; an infinite m is replaced by 0
      // so that all -inf gives -inf and a +inf gives +inf (instead of inf - inf = NaN).
      ExprId m = fold(ReduceOp::Max, ft, identity);
      ExprId shift = kb.select(kb.isInf(m, true, true), kb.constant(ft, 0), m);
      ExprId s = fold(ReduceOp::Sum, ft, [&](ExprId e) { return kb.unary(ExprOp::Exp, kb.sub(e, shift)); });
      return castTo(kb, ct, kb.add(kb.unary(ExprOp::Log, s), shift));
    }
  }
  NNC_CHECK(false, "unhandled reduce kind");
  return kir::kNoExpr;
}

std::vector<AnchorOutput> lowerReduce(LowerContext& ctx, ReduceKind kind) {
  KernelBuilder& kb = ctx.kb;
  const Shape& in = ctx.inShape(0);
  DType t = ctx.inType(0);
  ReduceAxes ra = reduceAxesChecked(ctx);
  if (ra.noop) {
    // ONNX: the output equals the input (the ONNX reference squares for ReduceSumSquare).
    std::vector<ExprId> vars = kb.setOuter(in.dims());
    ExprId x = ctx.inputs[0](vars);
    return {{vars, kind == ReduceKind::SumSquare ? kb.mul(x, x) : x, false}};
  }
  std::vector<ExprId> outer = kb.setOuter(extentsWhere(in, ra.reduced, false));
  std::vector<int64_t> redExtents = extentsWhere(in, ra.reduced, true);
  ExprId value = reduceValue(
      kb, kind, t, saturatingProduct(redExtents), [&](const std::vector<ExprId>& idx) { return ctx.inputs[0](idx); },
      [&] { return reductionVarsWhere(kb, in, ra.reduced); },
      [&](const std::vector<ExprId>& vars) { return mergeIndex(ra.reduced, outer, vars); });
  bool keep = ctx.attrs().getInt("keepdims") != 0;
  std::vector<ExprId> outIndex = keep ? pinnedIndex(kb, ra.reduced, outer) : outer;
  return {{outIndex, value, false}};
}

void defineReduce(OpRegistry& r, OpKind kind, ReduceKind rk) {
  OpDef d;
  d.kind = kind;
  d.minInputs = 1;
  d.maxInputs = 2;
  d.attrs = {ops::optionalAttr("axes", AttrKind::Ints), ops::attrInt("keepdims", 1),
             ops::attrInt("noop_with_empty_axes", 0)};
  d.staticInputs = {{1, "axes", AttrKind::Ints}};
  d.checkStaticInputs = false;  // staticInts words the error, after the type check
  d.typeRules = {TypeRule::in(0, rk == ReduceKind::Max || rk == ReduceKind::Min ? TypeSet::Any : TypeSet::Numeric)};
  d.infer = inferReduce;
  d.lowerAnchor = [rk](LowerContext& ctx) { return lowerReduce(ctx, rk); };
  r.define(std::move(d));
}

// ---------------------------------------------------------------------------------------------
// ArgMax / ArgMin

void defineArgReduce(OpRegistry& r, OpKind kind, ReduceOp op) {
  OpDef d;
  d.kind = kind;
  d.attrs = {ops::attrInt("axis", 0), ops::attrInt("keepdims", 1), ops::attrInt("select_last_index", 0)};
  d.typeRules = {TypeRule::in(0, TypeSet::Numeric)};
  d.infer = [](InferContext& ctx) -> Status {
    NNC_ASSIGN_OR_RETURN(int axis, ops::checkAxis(ctx, ctx.attrs().getInt("axis"), ctx.inRank(0)));
    const Shape& in = ctx.inShape(0);
    if (in[axis] == 0)
      return ctx.error("cannot take the index of an extremum over axis " + std::to_string(axis) + " of size 0");
    std::vector<int64_t> out = in.dims();
    if (ctx.attrs().getInt("keepdims") != 0)
      out[axis] = 1;
    else
      out.erase(out.begin() + axis);
    ctx.setOutput(0, DType::I64, Shape(out));
    return Status::ok();
  };
  d.lowerAnchor = [op](LowerContext& ctx) -> std::vector<AnchorOutput> {
    KernelBuilder& kb = ctx.kb;
    const Shape& in = ctx.inShape(0);
    int axis = normalizedAxis(ctx.attrs().getInt("axis"), in.rank());
    std::vector<ExprId> outer = kb.setOuter(withoutAxis(in, axis));
    std::vector<ExprId> rv = kb.reductionVars({in[axis]});
    ExprId x = loadAs(ctx, 0, withAxis(outer, axis, rv[0]), ops::exprType(ctx.inType(0)));
    ExprId index = kb.reduce(op, rv, x, ctx.attrs().getInt("select_last_index") != 0);
    bool keep = ctx.attrs().getInt("keepdims") != 0;
    return {{keep ? withAxis(outer, axis, kb.i64(0)) : outer, index, false}};
  };
  r.define(std::move(d));
}

// ---------------------------------------------------------------------------------------------
// Softmax, LogSoftmax, Hardmax, LpNormalization: row ops over one axis.

enum class RowKind { Softmax, LogSoftmax, Hardmax, LpNorm };

std::vector<AnchorOutput> lowerRow(LowerContext& ctx, RowKind kind) {
  KernelBuilder& kb = ctx.kb;
  const Shape& in = ctx.inShape(0);
  DType ct = ops::exprType(ctx.inType(0));
  int axis = normalizedAxis(ctx.attrs().getInt("axis"), in.rank());
  std::vector<ExprId> outer = kb.setOuter(withoutAxis(in, axis));
  auto xAt = [&](ExprId v) { return loadAs(ctx, 0, withAxis(outer, axis, v), ct); };
  auto fold = [&](ReduceOp op, const std::function<ExprId(ExprId)>& body) {
    std::vector<ExprId> rv = kb.reductionVars({in[axis]});
    return kb.reduce(op, rv, body(xAt(rv[0])));
  };
  ExprId value = kir::kNoExpr;
  std::vector<ExprId> iv = kb.setInner({in[axis]});
  ExprId x = xAt(iv[0]);
  switch (kind) {
    case RowKind::Softmax:
    case RowKind::LogSoftmax: {
      ExprId m = fold(ReduceOp::Max, [](ExprId e) { return e; });
      // x - max <= 0, and the sum of the exps is >= 1 (the max's own term): the exp of a
      // non-positive value, which needs neither overflow nor subnormal handling (a result below
      // FLT_MIN is below FLT_MIN / sum in the output too).
      ExprId s = fold(ReduceOp::Sum, [&](ExprId e) { return kb.expOfNonPositive(kb.sub(e, m)); });
      // Softmax multiplies by 1 / sum, once per row, instead of dividing every element (a vector
      // division costs several multiplies; the result moves by at most an ulp).
      value = kind == RowKind::Softmax ? kb.mul(kb.expOfNonPositive(kb.sub(x, m)), kb.div(kb.constant(ct, 1), s))
                                       : kb.sub(kb.sub(x, m), kb.unary(ExprOp::Log, s));
      break;
    }
    case RowKind::Hardmax: {
      std::vector<ExprId> rv = kb.reductionVars({in[axis]});
      ExprId a = kb.reduce(ReduceOp::ArgMax, rv, xAt(rv[0]));
      value = kb.select(kb.eq(iv[0], a), kb.constant(ct, 1), kb.constant(ct, 0));
      break;
    }
    case RowKind::LpNorm: {
      bool l1 = ctx.attrs().getInt("p") == 1;
      ExprId s = fold(ReduceOp::Sum, [&](ExprId e) { return l1 ? kb.unary(ExprOp::Abs, e) : kb.mul(e, e); });
      value = kb.div(x, l1 ? s : kb.unary(ExprOp::Sqrt, s));
      break;
    }
  }
  return {{withAxis(outer, axis, iv[0]), value, true}};
}

void defineRowOp(OpRegistry& r, OpKind kind, RowKind rk) {
  OpDef d;
  d.kind = kind;
  d.attrs = {ops::attrInt("axis", -1)};
  if (rk == RowKind::LpNorm) d.attrs.push_back(ops::attrInt("p", 2));
  d.typeRules = {TypeRule::in(0, TypeSet::Float)};
  d.infer = [rk](InferContext& ctx) -> Status {
    NNC_RETURN_IF_ERROR(ops::checkAxis(ctx, ctx.attrs().getInt("axis"), ctx.inRank(0)).status());
    if (rk == RowKind::LpNorm) {
      int64_t p = ctx.attrs().getInt("p");
      if (p != 1 && p != 2) return ctx.error("p must be 1 or 2, got " + std::to_string(p));
    }
    ctx.setOutput(0, ctx.inType(0), ctx.inShape(0));
    return Status::ok();
  };
  d.lowerAnchor = [rk](LowerContext& ctx) { return lowerRow(ctx, rk); };
  r.define(std::move(d));
}

// ---------------------------------------------------------------------------------------------
// Normalizations: mean and variance by two reductions (mean, then the sum of squared deviations),
// then the normalized row in the inner loop.

struct Moments {
  ExprId mean, variance;
};

// Mean and (biased) variance over the flagged dims of input 0, for the current outer point.
Moments moments(LowerContext& ctx, const std::vector<bool>& flags, const std::vector<ExprId>& outer, DType ct) {
  KernelBuilder& kb = ctx.kb;
  std::vector<int64_t> extents = extentsWhere(ctx.inShape(0), flags, true);
  ExprId n = kb.constant(ct, static_cast<double>(saturatingProduct(extents)));
  std::vector<ExprId> rv = reductionVarsWhere(kb, ctx.inShape(0), flags);
  ExprId mean = kb.div(kb.reduce(ReduceOp::Sum, rv, loadAs(ctx, 0, mergeIndex(flags, outer, rv), ct)), n);
  rv = reductionVarsWhere(kb, ctx.inShape(0), flags);
  ExprId dev = kb.sub(loadAs(ctx, 0, mergeIndex(flags, outer, rv), ct), mean);
  ExprId variance = kb.div(kb.reduce(ReduceOp::Sum, rv, kb.mul(dev, dev)), n);
  return {mean, variance};
}

void defineLayerNormalization(OpRegistry& r) {
  OpDef d;
  d.kind = OpKind::LayerNormalization;
  d.minInputs = 2;
  d.maxInputs = 3;
  d.minOutputs = 1;
  d.maxOutputs = 3;
  d.attrs = {ops::attrInt("axis", -1), ops::attrFloat("epsilon", 1e-5), ops::attrInt("stash_type", 1)};
  d.typeRules = {TypeRule::in(0, TypeSet::Float), TypeRule::sameAs(1, 0), TypeRule::sameAs(2, 0)};
  d.infer = [](InferContext& ctx) -> Status {
    const Shape& x = ctx.inShape(0);
    NNC_ASSIGN_OR_RETURN(int axis, ops::checkAxis(ctx, ctx.attrs().getInt("axis"), x.rank()));
    for (int i = 1; i < 3; ++i) {
      if (!ctx.hasInput(i)) continue;
      std::optional<Shape> b = broadcastShapes(x, ctx.inShape(i));
      if (!b || *b != x)
        return ctx.error(std::string(i == 1 ? "scale" : "bias") + " shape " + ctx.inShape(i).str() +
                         " does not broadcast to input shape " + x.str());
    }
    std::optional<DType> stash = dtypeFromOnnx(static_cast<int>(ctx.attrs().getInt("stash_type")));
    if (!stash || !isFloat(*stash))
      return ctx.error("stash_type " + std::to_string(ctx.attrs().getInt("stash_type")) + " is not a float type");
    ctx.setOutput(0, ctx.inType(0), x);
    Shape stat = x;
    for (int i = axis; i < x.rank(); ++i) stat[i] = 1;
    for (int i = 1; i < ctx.numOutputs(); ++i) ctx.setOutput(i, *stash, stat);
    return Status::ok();
  };
  d.lowerAnchor = [](LowerContext& ctx) -> std::vector<AnchorOutput> {
    KernelBuilder& kb = ctx.kb;
    const Shape& x = ctx.inShape(0);
    int axis = normalizedAxis(ctx.attrs().getInt("axis"), x.rank());
    std::optional<DType> stash = dtypeFromOnnx(static_cast<int>(ctx.attrs().getInt("stash_type")));
    DType ct = ctx.inType(0) == DType::F64 || stash == DType::F64 ? DType::F64 : DType::F32;
    std::vector<bool> flags = fromAxis(x.rank(), axis);
    std::vector<ExprId> outer = kb.setOuter(extentsWhere(x, flags, false));
    Moments mo = moments(ctx, flags, outer, ct);
    double eps = ctx.attrs().getFloat("epsilon");
    ExprId invStd = kb.div(kb.constant(ct, 1), kb.unary(ExprOp::Sqrt, kb.add(mo.variance, kb.constant(ct, eps))));
    std::vector<ExprId> iv = kb.setInner(extentsWhere(x, flags, true));
    std::vector<ExprId> index = mergeIndex(flags, outer, iv);
    ExprId y = kb.mul(kb.mul(kb.sub(loadAs(ctx, 0, index, ct), mo.mean), invStd),
                      castTo(kb, ct, ops::loadBroadcast(ctx, 1, index)));
    if (ctx.hasInput(2)) y = kb.add(y, castTo(kb, ct, ops::loadBroadcast(ctx, 2, index)));
    std::vector<AnchorOutput> outs = {{index, y, true}};
    std::vector<ExprId> statIndex = pinnedIndex(kb, flags, outer);
    if (ctx.node.numOutputs() > 1) outs.push_back({statIndex, mo.mean, false});
    if (ctx.node.numOutputs() > 2) outs.push_back({statIndex, invStd, false});
    return outs;
  };
  r.define(std::move(d));
}

// RmsNormalization (nnc-internal, from passes/recognize_rms_norm.cpp; ONNX's RMSNormalization of
// opset 23 without stash_type): y = x / sqrt(mean(x^2 over axis..) + epsilon) * scale, one reduction
// and the scaled row, in one kernel.
void defineRmsNormalization(OpRegistry& r) {
  OpDef d;
  d.kind = OpKind::RmsNormalization;
  d.internal = true;
  d.minInputs = d.maxInputs = 2;
  d.attrs = {ops::attrInt("axis", -1), ops::attrFloat("epsilon", 1e-5)};
  d.typeRules = {TypeRule::in(0, TypeSet::Float), TypeRule::sameAs(1, 0)};
  d.infer = [](InferContext& ctx) -> Status {
    const Shape& x = ctx.inShape(0);
    NNC_RETURN_IF_ERROR(ops::checkAxis(ctx, ctx.attrs().getInt("axis"), x.rank()).status());
    std::optional<Shape> b = broadcastShapes(x, ctx.inShape(1));
    if (!b || *b != x)
      return ctx.error("scale shape " + ctx.inShape(1).str() + " does not broadcast to input shape " + x.str());
    ctx.setOutput(0, ctx.inType(0), x);
    return Status::ok();
  };
  d.lowerAnchor = [](LowerContext& ctx) -> std::vector<AnchorOutput> {
    KernelBuilder& kb = ctx.kb;
    const Shape& x = ctx.inShape(0);
    const int axis = normalizedAxis(ctx.attrs().getInt("axis"), x.rank());
    const DType ct = ops::exprType(ctx.inType(0));
    std::vector<bool> flags = fromAxis(x.rank(), axis);
    std::vector<ExprId> outer = kb.setOuter(extentsWhere(x, flags, false));
    std::vector<int64_t> extents = extentsWhere(x, flags, true);
    std::vector<ExprId> rv = reductionVarsWhere(kb, x, flags);
    const ExprId xr = loadAs(ctx, 0, mergeIndex(flags, outer, rv), ct);
    const ExprId meanSquare = kb.div(kb.reduce(ReduceOp::Sum, rv, kb.mul(xr, xr)),
                                     kb.constant(ct, static_cast<double>(saturatingProduct(extents))));
    const ExprId invRms =
        kb.div(kb.constant(ct, 1),
               kb.unary(ExprOp::Sqrt, kb.add(meanSquare, kb.constant(ct, ctx.attrs().getFloat("epsilon")))));
    std::vector<ExprId> iv = kb.setInner(extents);
    std::vector<ExprId> index = mergeIndex(flags, outer, iv);
    const ExprId y =
        kb.mul(kb.mul(loadAs(ctx, 0, index, ct), invRms), castTo(kb, ct, ops::loadBroadcast(ctx, 1, index)));
    return {{index, y, true}};
  };
  r.define(std::move(d));
}

void defineInstanceNormalization(OpRegistry& r) {
  OpDef d;
  d.kind = OpKind::InstanceNormalization;
  d.minInputs = d.maxInputs = 3;
  d.attrs = {ops::attrFloat("epsilon", 1e-5)};
  d.typeRules = {TypeRule::in(0, TypeSet::Float), TypeRule::sameAs(1, 0), TypeRule::sameAs(2, 0)};
  d.infer = [](InferContext& ctx) -> Status {
    const Shape& x = ctx.inShape(0);
    if (x.rank() < 2) return ctx.error("expected an input of rank >= 2 (N x C x ...), got " + x.str());
    for (int i = 1; i < 3; ++i) {
      if (ctx.inShape(i) != Shape{x[1]})
        return ctx.error(std::string(i == 1 ? "scale" : "bias") + " has shape " + ctx.inShape(i).str() +
                         ", expected [" + std::to_string(x[1]) + "]");
    }
    ctx.setOutput(0, ctx.inType(0), x);
    return Status::ok();
  };
  d.lowerAnchor = [](LowerContext& ctx) -> std::vector<AnchorOutput> {
    KernelBuilder& kb = ctx.kb;
    const Shape& x = ctx.inShape(0);
    DType ct = ops::exprType(ctx.inType(0));
    std::vector<bool> flags = fromAxis(x.rank(), 2);
    std::vector<ExprId> outer = kb.setOuter(extentsWhere(x, flags, false));
    Moments mo = moments(ctx, flags, outer, ct);
    ExprId eps = kb.constant(ct, ctx.attrs().getFloat("epsilon"));
    ExprId invStd = kb.div(kb.constant(ct, 1), kb.unary(ExprOp::Sqrt, kb.add(mo.variance, eps)));
    std::vector<ExprId> iv = kb.setInner(extentsWhere(x, flags, true));
    std::vector<ExprId> index = mergeIndex(flags, outer, iv);
    ExprId scale = loadAs(ctx, 1, {outer[1]}, ct), bias = loadAs(ctx, 2, {outer[1]}, ct);
    ExprId y = kb.add(kb.mul(kb.mul(kb.sub(loadAs(ctx, 0, index, ct), mo.mean), invStd), scale), bias);
    return {{index, y, true}};
  };
  r.define(std::move(d));
}

void defineMeanVarianceNormalization(OpRegistry& r) {
  OpDef d;
  d.kind = OpKind::MeanVarianceNormalization;
  d.attrs = {ops::attrInts("axes", {0, 2, 3})};
  d.typeRules = {TypeRule::in(0, TypeSet::Float)};
  d.infer = [](InferContext& ctx) -> Status {
    NNC_RETURN_IF_ERROR(axisFlags(ctx, ctx.attrs().getInts("axes"), ctx.inRank(0)).status());
    ctx.setOutput(0, ctx.inType(0), ctx.inShape(0));
    return Status::ok();
  };
  d.lowerAnchor = [](LowerContext& ctx) -> std::vector<AnchorOutput> {
    KernelBuilder& kb = ctx.kb;
    const Shape& x = ctx.inShape(0);
    DType ct = ops::exprType(ctx.inType(0));
    std::vector<bool> flags = axisFlagsChecked(ctx.attrs().getInts("axes"), x.rank());
    std::vector<ExprId> outer = kb.setOuter(extentsWhere(x, flags, false));
    Moments mo = moments(ctx, flags, outer, ct);
    // The ONNX function body: (X - mean) / (sqrt(variance) + 1e-9).
    ExprId denom = kb.add(kb.unary(ExprOp::Sqrt, mo.variance), kb.constant(ct, 1e-9));
    std::vector<ExprId> iv = kb.setInner(extentsWhere(x, flags, true));
    std::vector<ExprId> index = mergeIndex(flags, outer, iv);
    return {{index, kb.div(kb.sub(loadAs(ctx, 0, index, ct), mo.mean), denom), true}};
  };
  r.define(std::move(d));
}

// ---------------------------------------------------------------------------------------------
// LRN: y = x / (bias + alpha / size * sum of squares over the channel window) ^ beta.

void defineLRN(OpRegistry& r) {
  OpDef d;
  d.kind = OpKind::LRN;
  d.rereadsInputs = true;
  d.attrs = {ops::attrFloat("alpha", 1e-4), ops::attrFloat("beta", 0.75), ops::attrFloat("bias", 1.0),
             ops::requiredAttr("size", AttrKind::Int)};
  d.typeRules = {TypeRule::in(0, TypeSet::Float)};
  d.infer = [](InferContext& ctx) -> Status {
    if (ctx.inRank(0) < 2)
      return ctx.error("expected an input of rank >= 2 (N x C x ...), got " + ctx.inShape(0).str());
    if (ctx.attrs().getInt("size") < 1)
      return ctx.error("size must be positive, got " + std::to_string(ctx.attrs().getInt("size")));
    ctx.setOutput(0, ctx.inType(0), ctx.inShape(0));
    return Status::ok();
  };
  d.lowerAnchor = [](LowerContext& ctx) -> std::vector<AnchorOutput> {
    KernelBuilder& kb = ctx.kb;
    const Shape& x = ctx.inShape(0);
    DType ct = ops::exprType(ctx.inType(0));
    int64_t size = ctx.attrs().getInt("size"), channels = x[1];
    std::vector<ExprId> outer = kb.setOuter(x.dims());
    ExprId c, inside;
    std::vector<ExprId> rv;
    if (size <= channels) {
      // Channel c' = c - floor((size-1)/2) + r; outside [0, C) contributes 0 (the load is clamped).
      rv = kb.reductionVars({size});
      c = kb.add(kb.sub(outer[1], kb.i64((size - 1) / 2)), rv[0]);
      inside = kb.logicalAnd(kb.le(kb.i64(0), c), kb.lt(c, kb.i64(channels)));
    } else {
      // A window wider than the channels (size may be huge): loop over the C channels instead,
      // keeping those with c' - c + floor((size-1)/2) in [0, size).
      rv = kb.reductionVars({channels});
      c = rv[0];
      ExprId r = kb.add(kb.sub(c, outer[1]), kb.i64((size - 1) / 2));
      inside = kb.logicalAnd(kb.le(kb.i64(0), r), kb.lt(r, kb.i64(size)));
    }
    std::vector<ExprId> index = outer;
    index[1] = kb.clamp(c, 0, channels - 1);
    ExprId v = loadAs(ctx, 0, index, ct);
    ExprId sum = kb.reduce(ReduceOp::Sum, rv, kb.select(inside, kb.mul(v, v), kb.constant(ct, 0)));
    double alpha = ctx.attrs().getFloat("alpha"), beta = ctx.attrs().getFloat("beta");
    ExprId base = kb.add(kb.constant(ct, ctx.attrs().getFloat("bias")),
                         kb.mul(kb.constant(ct, alpha / static_cast<double>(size)), sum));
    ExprId y = kb.div(loadAs(ctx, 0, outer, ct), kb.binary(ExprOp::Pow, base, kb.constant(ct, beta)));
    return {{outer, y, false}};
  };
  r.define(std::move(d));
}

// ---------------------------------------------------------------------------------------------
// CumSum: each output is a sum over the whole axis with a condition on the position, which costs
// O(n^2) along the axis; a scan structure in kernel IR would make it linear.

Expected<int64_t> cumSumAxis(const Node& node) {
  if (node.attrs().has("axis")) return node.attrs().getInt("axis");
  const Value* v = node.input(1);
  if (v == nullptr) return Status::error(node.diagPrefix() + "missing axis");
  if (!v->isConstant()) return Status::error(node.diagPrefix() + "input 1 (axis) must be a compile-time constant");
  std::vector<int64_t> a = v->constant().toInt64s();
  if (a.size() != 1)
    return Status::error(node.diagPrefix() + "axis must hold one value, got " + std::to_string(a.size()));
  return a[0];
}

void defineCumSum(OpRegistry& r) {
  OpDef d;
  d.kind = OpKind::CumSum;
  d.rereadsInputs = true;
  d.minInputs = 1;
  d.maxInputs = 2;
  d.attrs = {ops::optionalAttr("axis", AttrKind::Int), ops::attrInt("exclusive", 0), ops::attrInt("reverse", 0)};
  d.staticInputs = {{1, "axis", AttrKind::Int}};
  d.checkStaticInputs = false;  // cumSumAxis words the error, after the type check
  d.typeRules = {TypeRule::in(0, TypeSet::Numeric)};
  d.infer = [](InferContext& ctx) -> Status {
    NNC_ASSIGN_OR_RETURN(int64_t axis, cumSumAxis(ctx.node()));
    NNC_RETURN_IF_ERROR(ops::checkAxis(ctx, axis, ctx.inRank(0)).status());
    ctx.setOutput(0, ctx.inType(0), ctx.inShape(0));
    return Status::ok();
  };
  d.lowerAnchor = [](LowerContext& ctx) -> std::vector<AnchorOutput> {
    KernelBuilder& kb = ctx.kb;
    const Shape& x = ctx.inShape(0);
    DType t = ctx.inType(0), at = accumType(t);
    auto axisValue = cumSumAxis(ctx.node);
    NNC_CHECK(axisValue.isOk(), "axis was validated by inference");
    int axis = normalizedAxis(axisValue.value(), x.rank());
    std::vector<ExprId> outer = kb.setOuter(x.dims());
    std::vector<ExprId> rv = kb.reductionVars({x[axis]});
    std::vector<ExprId> index = outer;
    index[axis] = rv[0];
    bool exclusive = ctx.attrs().getInt("exclusive") != 0, reverse = ctx.attrs().getInt("reverse") != 0;
    ExprId i = outer[axis], j = rv[0];
    ExprOp cmp = reverse ? (exclusive ? ExprOp::Gt : ExprOp::Ge) : (exclusive ? ExprOp::Lt : ExprOp::Le);
    ExprId body = kb.select(kb.binary(cmp, j, i), loadAs(ctx, 0, index, at), num(kb, at, 0));
    ExprId sum = kb.reduce(ReduceOp::Sum, rv, body);
    return {{outer, castTo(kb, ops::exprType(t), sum), false}};
  };
  r.define(std::move(d));
}

// ---------------------------------------------------------------------------------------------
// ScatterElements / ScatterND: out[i] = data[i] combined with every update whose (wrapped) index
// is i. Each output point scans the updates that could target it with a match condition, which
// is quadratic in the worst case (ScatterND scans all updates per point); a scatter kernel
// writing through indices would be linear but is not expressible in this kernel structure.

enum class ScatterReduction { None, Add, Mul, Max, Min };

std::optional<ScatterReduction> scatterReduction(const std::string& s) {
  if (s == "none") return ScatterReduction::None;
  if (s == "add") return ScatterReduction::Add;
  if (s == "mul") return ScatterReduction::Mul;
  if (s == "max") return ScatterReduction::Max;
  if (s == "min") return ScatterReduction::Min;
  return std::nullopt;
}

// After the type rules (scatterTypeRules()): the indices' type and the reduction.
Status checkScatterTypes(InferContext& ctx) {
  DType it = ctx.inType(1);
  if (it != DType::I32 && it != DType::I64)
    return ctx.error("indices have type " + std::string(dtypeName(it)) + ", expected i32 or i64");
  const std::string& red = ctx.attrs().getString("reduction");
  std::optional<ScatterReduction> sr = scatterReduction(red);
  if (!sr) return ctx.error("unknown reduction '" + red + "', expected none, add, mul, max or min");
  if (*sr != ScatterReduction::None && ctx.inType(0) == DType::Bool)
    return ctx.error("reduction '" + red + "' is not supported for bool data");
  return Status::ok();
}

// Data and updates share a dtype (any).
std::vector<TypeRule> scatterTypeRules() { return {TypeRule::in(0, TypeSet::Any), TypeRule::sameAs(2, 0)}; }

// An index value as i64, negative values counted from the end of a dim of `extent`.
ExprId wrapIndex(KernelBuilder& kb, ExprId index, int64_t extent) {
  index = castTo(kb, DType::I64, index);
  return kb.select(kb.lt(index, kb.i64(0)), kb.add(index, kb.i64(extent)), index);
}

// Combines data[i] with the matching updates. `match(vars)` and `update(vars)` read at the update
// picked by fresh reduction vars; `updateAtFlat(flat)` reads the update at a flat position in the
// scanned domain (for "none", where the last match wins).
ExprId combineScatter(KernelBuilder& kb, ScatterReduction red, DType t, ExprId data,
                      const std::vector<int64_t>& scanExtents,
                      const std::function<ExprId(const std::vector<ExprId>&)>& match,
                      const std::function<ExprId(const std::vector<ExprId>&)>& update,
                      const std::function<ExprId(ExprId)>& updateAtFlat) {
  DType ct = ops::exprType(t), at = accumType(t);
  int64_t count = saturatingProduct(scanExtents);
  if (count == 0) return data;
  std::vector<ExprId> rv = kb.reductionVars(scanExtents);
  Shape scanShape(scanExtents);
  switch (red) {
    case ScatterReduction::None: {
      ExprId flat = kb.flatIndex(rv, scanShape);
      ExprId last = kb.reduce(ReduceOp::Max, rv, kb.select(match(rv), flat, kb.i64(-1)));
      ExprId picked = updateAtFlat(kb.clamp(last, 0, count - 1));
      return kb.select(kb.binary(ExprOp::Ge, last, kb.i64(0)), castTo(kb, ct, picked), data);
    }
    case ScatterReduction::Add: {
      ExprId s = kb.reduce(ReduceOp::Sum, rv, kb.select(match(rv), castTo(kb, at, update(rv)), num(kb, at, 0)));
      return castTo(kb, ct, kb.add(castTo(kb, at, data), s));
    }
    case ScatterReduction::Mul: {
      ExprId p = kb.reduce(ReduceOp::Prod, rv, kb.select(match(rv), castTo(kb, at, update(rv)), num(kb, at, 1)));
      return castTo(kb, ct, kb.mul(castTo(kb, at, data), p));
    }
    case ScatterReduction::Max:
    case ScatterReduction::Min: {
      // data[i] stands in for non-matching updates (so no identity value is needed), and is
      // combined once more outside: when every update matches, the fold never sees it.
      const bool isMax = red == ScatterReduction::Max;
      ExprId folded =
          kb.reduce(isMax ? ReduceOp::Max : ReduceOp::Min, rv, kb.select(match(rv), castTo(kb, ct, update(rv)), data));
      return kb.binary(isMax ? ExprOp::Max : ExprOp::Min, data, folded);
    }
  }
  NNC_CHECK(false, "unhandled scatter reduction");
  return kir::kNoExpr;
}

void defineScatterElements(OpRegistry& r) {
  OpDef d;
  d.kind = OpKind::ScatterElements;
  d.rereadsInputs = true;
  d.minInputs = d.maxInputs = 3;
  d.attrs = {ops::attrInt("axis", 0), ops::attrString("reduction", "none")};
  d.typeRules = scatterTypeRules();
  d.infer = [](InferContext& ctx) -> Status {
    NNC_RETURN_IF_ERROR(checkScatterTypes(ctx));
    const Shape& data = ctx.inShape(0);
    const Shape& idx = ctx.inShape(1);
    NNC_ASSIGN_OR_RETURN(int axis, ops::checkAxis(ctx, ctx.attrs().getInt("axis"), data.rank()));
    if (idx != ctx.inShape(2))
      return ctx.error("indices shape " + idx.str() + " differs from updates shape " + ctx.inShape(2).str());
    if (idx.rank() != data.rank())
      return ctx.error("indices have rank " + std::to_string(idx.rank()) + ", expected the data's rank " +
                       std::to_string(data.rank()));
    for (int i = 0; i < data.rank(); ++i)
      if (i != axis && idx[i] > data[i])
        return ctx.error("indices shape " + idx.str() + " exceeds data shape " + data.str() + " in dim " +
                         std::to_string(i));
    ctx.setOutput(0, ctx.inType(0), data);
    return Status::ok();
  };
  d.lowerAnchor = [](LowerContext& ctx) -> std::vector<AnchorOutput> {
    KernelBuilder& kb = ctx.kb;
    const Shape& data = ctx.inShape(0);
    const Shape& upd = ctx.inShape(2);
    DType t = ctx.inType(0);
    int axis = normalizedAxis(ctx.attrs().getInt("axis"), data.rank());
    auto red = scatterReduction(ctx.attrs().getString("reduction"));
    NNC_CHECK(red.has_value(), "reduction was validated by inference");
    std::vector<ExprId> outer = kb.setOuter(data.dims());
    ExprId x = loadAs(ctx, 0, outer, ops::exprType(t));
    if (upd.numel() == 0) return {{outer, x, false}};
    // Only updates with the same coordinates off the axis can target `outer`: scan the axis of
    // the updates, and require the output point to lie inside the updates' extent off the axis.
    std::vector<ExprId> inRange;
    std::vector<ExprId> base = outer;
    for (int i = 0; i < data.rank(); ++i) {
      if (i == axis || upd[i] == data[i]) continue;
      inRange.push_back(kb.lt(outer[i], kb.i64(upd[i])));
      base[i] = kb.clamp(outer[i], 0, upd[i] - 1);
    }
    auto at = [&](ExprId j) {
      std::vector<ExprId> index = base;
      index[axis] = j;
      return index;
    };
    auto match = [&](const std::vector<ExprId>& rv) {
      ExprId m = kb.eq(wrapIndex(kb, ctx.inputs[1](at(rv[0])), data[axis]), outer[axis]);
      for (ExprId c : inRange) m = kb.logicalAnd(m, c);
      return m;
    };
    auto update = [&](const std::vector<ExprId>& rv) { return ctx.inputs[2](at(rv[0])); };
    auto updateAtFlat = [&](ExprId flat) { return ctx.inputs[2](at(flat)); };
    return {{outer, combineScatter(kb, *red, t, x, {upd[axis]}, match, update, updateAtFlat), false}};
  };
  d.indexChecks = [](const Node& n) -> std::vector<IndexCheck> {
    const Shape& data = n.input(0)->shape();
    return {ops::axisIndexCheck(1, data[normalizedAxis(n.attrs().getInt("axis"), data.rank())])};
  };
  r.define(std::move(d));
}

void defineScatterND(OpRegistry& r) {
  OpDef d;
  d.kind = OpKind::ScatterND;
  d.rereadsInputs = true;
  d.minInputs = d.maxInputs = 3;
  d.attrs = {ops::attrString("reduction", "none")};
  d.typeRules = scatterTypeRules();
  d.infer = [](InferContext& ctx) -> Status {
    NNC_RETURN_IF_ERROR(checkScatterTypes(ctx));
    const Shape& data = ctx.inShape(0);
    const Shape& idx = ctx.inShape(1);
    if (idx.rank() < 1) return ctx.error("indices must have rank >= 1");
    int64_t k = idx[idx.rank() - 1];
    if (k > data.rank())
      return ctx.error("indices address " + std::to_string(k) + " dims, but data has rank " +
                       std::to_string(data.rank()));
    std::vector<int64_t> expect(idx.dims().begin(), idx.dims().end() - 1);
    expect.insert(expect.end(), data.dims().begin() + k, data.dims().end());
    if (ctx.inShape(2) != Shape(expect))
      return ctx.error("updates have shape " + ctx.inShape(2).str() + ", expected " + Shape(expect).str());
    ctx.setOutput(0, ctx.inType(0), data);
    return Status::ok();
  };
  d.lowerAnchor = [](LowerContext& ctx) -> std::vector<AnchorOutput> {
    KernelBuilder& kb = ctx.kb;
    const Shape& data = ctx.inShape(0);
    const Shape& idx = ctx.inShape(1);
    DType t = ctx.inType(0);
    auto red = scatterReduction(ctx.attrs().getString("reduction"));
    NNC_CHECK(red.has_value(), "reduction was validated by inference");
    int q = idx.rank();
    int64_t k = idx[q - 1];
    std::vector<int64_t> prefix(idx.dims().begin(), idx.dims().end() - 1);
    std::vector<ExprId> outer = kb.setOuter(data.dims());
    ExprId x = loadAs(ctx, 0, outer, ops::exprType(t));
    // The update for index tuple j at output point i is updates[j..., i[k:]...].
    auto updateIndex = [&](const std::vector<ExprId>& j) {
      std::vector<ExprId> index = j;
      index.insert(index.end(), outer.begin() + k, outer.end());
      return index;
    };
    auto match = [&](const std::vector<ExprId>& j) {
      ExprId m = kb.boolean(true);
      for (int64_t c = 0; c < k; ++c) {
        std::vector<ExprId> at = j;
        at.push_back(kb.i64(c));
        ExprId e = kb.eq(wrapIndex(kb, ctx.inputs[1](at), data[static_cast<int>(c)]), outer[c]);
        m = c == 0 ? e : kb.logicalAnd(m, e);
      }
      return m;
    };
    auto update = [&](const std::vector<ExprId>& j) { return ctx.inputs[2](updateIndex(j)); };
    auto updateAtFlat = [&](ExprId flat) { return ctx.inputs[2](updateIndex(kb.unflatten(flat, Shape(prefix)))); };
    return {{outer, combineScatter(kb, *red, t, x, prefix, match, update, updateAtFlat), false}};
  };
  d.indexChecks = [](const Node& n) -> std::vector<IndexCheck> {
    const Shape &data = n.input(0)->shape(), &ind = n.input(1)->shape();
    return {
        ops::tupleIndexCheck(1, std::vector<int64_t>(data.dims().begin(), data.dims().begin() + ind[ind.rank() - 1]))};
  };
  r.define(std::move(d));
}

}  // namespace

void defineReductionOps(OpRegistry& r) {
  defineReduce(r, OpKind::ReduceSum, ReduceKind::Sum);
  defineReduce(r, OpKind::ReduceMean, ReduceKind::Mean);
  defineReduce(r, OpKind::ReduceMax, ReduceKind::Max);
  defineReduce(r, OpKind::ReduceMin, ReduceKind::Min);
  defineReduce(r, OpKind::ReduceProd, ReduceKind::Prod);
  defineReduce(r, OpKind::ReduceL1, ReduceKind::L1);
  defineReduce(r, OpKind::ReduceL2, ReduceKind::L2);
  defineReduce(r, OpKind::ReduceLogSum, ReduceKind::LogSum);
  defineReduce(r, OpKind::ReduceLogSumExp, ReduceKind::LogSumExp);
  defineReduce(r, OpKind::ReduceSumSquare, ReduceKind::SumSquare);
  defineArgReduce(r, OpKind::ArgMax, ReduceOp::ArgMax);
  defineArgReduce(r, OpKind::ArgMin, ReduceOp::ArgMin);
  defineRowOp(r, OpKind::Softmax, RowKind::Softmax);
  defineRowOp(r, OpKind::LogSoftmax, RowKind::LogSoftmax);
  defineRowOp(r, OpKind::Hardmax, RowKind::Hardmax);
  defineRowOp(r, OpKind::LpNormalization, RowKind::LpNorm);
  defineLayerNormalization(r);
  defineRmsNormalization(r);
  defineInstanceNormalization(r);
  defineMeanVarianceNormalization(r);
  defineLRN(r);
  defineCumSum(r);
  defineScatterElements(r);
  defineScatterND(r);
}

}  // namespace nnc
