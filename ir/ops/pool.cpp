// Pool op definitions (anchors): MaxPool, AveragePool, LpPool and the global pools.
// The windowed pools reduce over kernel_shape (MaxPool optionally also returns the indices), the
// global ones over the whole spatial extent; semantics follow the newest ONNX opset.
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "ir/ops/common.h"
#include "ir/ops/window.h"

namespace nnc {
namespace {

using kir::ExprId;
using kir::ExprOp;
using kir::KernelBuilder;
using kir::ReduceOp;
using ops::lowestValue;
using ops::singleOutput;
using ops::spatialDims;
using ops::tapCount;
using ops::Taps;
using ops::Window;
using ops::windowTaps;

// ================================================================================================
// Pools.

enum class PoolKind { Max, Average, Lp };

std::function<Status(InferContext&)> inferPool(PoolKind kind) {
  return [kind](InferContext& ctx) -> Status {
    const DType t = ctx.inType(0);
    // MaxPool's own type set (the other pools' is a TypeRule).
    if (kind == PoolKind::Max && !isFloat(t) && t != DType::I8 && t != DType::U8)
      return ctx.error("input 0 has type " + std::string(dtypeName(t)) + ", expected a float type or i8/u8");
    Window w;
    if (Status s = ops::kernelShapeWindow(ctx.node(), &w); !s) return ctx.error(s.message());
    if (kind == PoolKind::Max) {
      const int64_t order = ctx.attrs().getInt("storage_order");
      if (order != 0 && order != 1) return ctx.error("storage_order must be 0 or 1, got " + std::to_string(order));
    }
    if (kind == PoolKind::Lp && ctx.attrs().getInt("p") < 1)
      return ctx.error("p must be positive, got " + std::to_string(ctx.attrs().getInt("p")));
    std::vector<int64_t> out = {ctx.inShape(0)[0], ctx.inShape(0)[1]};
    out.insert(out.end(), w.out.begin(), w.out.end());
    ctx.setOutput(0, t, Shape(out));
    if (ctx.numOutputs() > 1) ctx.setOutput(1, DType::I64, Shape(out));
    return Status::ok();
  };
}

// sum |x|^p for an Lp pool's body, and its p-th root.
ExprId lpTerm(KernelBuilder& kb, ExprId x, int64_t p) {
  if (p == 1) return kb.unary(ExprOp::Abs, x);
  if (p == 2) return kb.mul(x, x);
  return kb.binary(ExprOp::Pow, kb.unary(ExprOp::Abs, x), kb.constant(kb.dtypeOf(x), static_cast<double>(p)));
}
ExprId lpRoot(KernelBuilder& kb, ExprId sum, int64_t p) {
  if (p == 1) return sum;
  if (p == 2) return kb.unary(ExprOp::Sqrt, sum);
  return kb.binary(ExprOp::Pow, sum, kb.constant(kb.dtypeOf(sum), 1.0 / static_cast<double>(p)));
}

std::function<std::vector<AnchorOutput>(LowerContext&)> lowerPool(PoolKind kind) {
  return [kind](LowerContext& ctx) -> std::vector<AnchorOutput> {
    KernelBuilder& kb = ctx.kb;
    Window w;
    NNC_CHECK(ops::kernelShapeWindow(ctx.node, &w).isOk(), "pool lowered without inference");
    std::vector<ExprId> out = kb.setOuter(ctx.outShape(0).dims());
    const ExprId n = out[0], c = out[1];
    std::vector<ExprId> o(out.begin() + 2, out.end());
    // The window's body over fresh reduction vars (a second reduction needs its own).
    auto body = [&](std::vector<ExprId>* vars) {
      *vars = kb.reductionVars(w.kernel);
      Taps taps = windowTaps(kb, w, o, *vars);
      std::vector<ExprId> xi = {n, c};
      xi.insert(xi.end(), taps.clamped.begin(), taps.clamped.end());
      ExprId x = ctx.inputs[0](xi);
      const DType t = kb.dtypeOf(x);
      if (kind == PoolKind::Max) return kb.select(taps.valid, x, lowestValue(kb, t));
      if (kind == PoolKind::Lp) x = lpTerm(kb, x, ctx.attrs().getInt("p"));
      return kb.select(taps.valid, x, kb.constant(t, 0));
    };
    std::vector<ExprId> rv;
    ExprId b = body(&rv);
    if (kind == PoolKind::Lp)
      return singleOutput(out, lpRoot(kb, kb.reduce(ReduceOp::Sum, rv, b), ctx.attrs().getInt("p")));
    if (kind == PoolKind::Average) {
      // count_include_pad=1 divides by the whole kernel, also for a ceil_mode window that runs past
      // the end padding (the ONNX reference and backend test data; PyTorch clips it there).
      const bool includePad = ctx.attrs().getInt("count_include_pad") != 0;
      ExprId count = kb.i64(1);
      for (int i = 0; i < w.rank(); ++i)
        count = kb.mul(count, includePad ? kb.i64(w.kernel[i]) : tapCount(kb, w, i, o[i], 0, w.in[i]));
      ExprId sum = kb.reduce(ReduceOp::Sum, rv, b);
      kb.unrollWindow(sum);
      return singleOutput(out, kb.div(sum, kb.cast(kb.dtypeOf(sum), count)));
    }
    const ExprId max = kb.reduce(ReduceOp::Max, rv, b);
    kb.unrollWindow(max);
    std::vector<AnchorOutput> result = singleOutput(out, max);
    if (ctx.node.numOutputs() < 2) return result;
    // Indices: the first maximum's flat position in the input, NCHW order (storage_order 0) or
    // with the spatial dims column-major (storage_order 1), as ONNX defines it.
    std::vector<ExprId> rv2;
    ExprId b2 = body(&rv2);
    ExprId arg = kb.reduce(ReduceOp::ArgMax, rv2, b2);
    std::vector<ExprId> k = kb.unflatten(arg, Shape(w.kernel));
    Taps taps = windowTaps(kb, w, o, k);
    const bool columnMajor = ctx.attrs().getInt("storage_order") == 1;
    const int64_t spatialSize = saturatingProduct(w.in);
    ExprId flat = kb.mul(kb.add(kb.mul(n, kb.i64(ctx.inShape(0)[1])), c), kb.i64(spatialSize));
    int64_t stride = 1;
    for (int j = 0; j < w.rank(); ++j) {
      const int i = columnMajor ? j : w.rank() - 1 - j;
      flat = kb.add(flat, kb.mul(taps.clamped[i], kb.i64(stride)));
      stride *= w.in[i];
    }
    result.push_back(AnchorOutput{out, flat, /*perInner=*/false});
    return result;
  };
}

// Global pools: the window is the whole spatial extent.
std::function<Status(InferContext&)> inferGlobalPool() {
  return [](InferContext& ctx) -> Status {
    const Shape& x = ctx.inShape(0);
    if (x.rank() < 3)
      return ctx.error("input X has rank " + std::to_string(x.rank()) + ", expected >= 3 (N, C, spatial...)");
    if (ctx.attrs().has("p") && ctx.attrs().getInt("p") < 1)
      return ctx.error("p must be positive, got " + std::to_string(ctx.attrs().getInt("p")));
    std::vector<int64_t> out(x.rank(), 1);
    out[0] = x[0];
    out[1] = x[1];
    ctx.setOutput(0, ctx.inType(0), Shape(out));
    return Status::ok();
  };
}

std::function<std::vector<AnchorOutput>(LowerContext&)> lowerGlobalPool(PoolKind kind) {
  return [kind](LowerContext& ctx) -> std::vector<AnchorOutput> {
    KernelBuilder& kb = ctx.kb;
    const Shape& x = ctx.inShape(0);
    std::vector<ExprId> out = kb.setOuter(ctx.outShape(0).dims());
    std::vector<int64_t> spatial = spatialDims(x);
    std::vector<ExprId> rv = kb.flatReductionVars(spatial);
    std::vector<ExprId> xi = {out[0], out[1]};
    xi.insert(xi.end(), rv.begin(), rv.end());
    ExprId v = ctx.inputs[0](xi);
    if (kind == PoolKind::Max) return singleOutput(out, kb.reduce(ReduceOp::Max, rv, v));
    if (kind == PoolKind::Lp) {
      const int64_t p = ctx.attrs().getInt("p");
      return singleOutput(out, lpRoot(kb, kb.reduce(ReduceOp::Sum, rv, lpTerm(kb, v, p)), p));
    }
    const int64_t count = saturatingProduct(spatial);
    ExprId sum = kb.reduce(ReduceOp::Sum, rv, v);
    return singleOutput(out, kb.div(sum, kb.constant(kb.dtypeOf(sum), static_cast<double>(count))));
  };
}

}  // namespace

void definePoolOps(OpRegistry& r) {
  // MaxPool checks its type set itself (float or i8/u8); the other pools take a float type.
  auto pool = [&](OpKind kind, AttrSpec extra, PoolKind pk) {
    OpDef d = ops::rereading(ops::anchorDef(kind, 1, 1, ops::poolAttrs({extra}), inferPool(pk), lowerPool(pk)));
    if (pk == PoolKind::Max)
      d.maxOutputs = 2;  // the indices
    else
      d.typeRules = {TypeRule::in(0, TypeSet::Float)};
    r.define(std::move(d));
  };
  pool(OpKind::MaxPool, ops::attrInt("storage_order", 0), PoolKind::Max);
  pool(OpKind::AveragePool, ops::attrInt("count_include_pad", 0), PoolKind::Average);
  pool(OpKind::LpPool, ops::attrInt("p", 2), PoolKind::Lp);
  auto global = [&](OpKind kind, std::vector<AttrSpec> attrs, PoolKind pk) {
    OpDef d = ops::anchorDef(kind, 1, 1, std::move(attrs), inferGlobalPool(), lowerGlobalPool(pk));
    d.typeRules = {TypeRule::in(0, TypeSet::Float)};
    r.define(std::move(d));
  };
  global(OpKind::GlobalMaxPool, {}, PoolKind::Max);
  global(OpKind::GlobalAveragePool, {}, PoolKind::Average);
  global(OpKind::GlobalLpPool, {ops::attrInt("p", 2)}, PoolKind::Lp);
}

}  // namespace nnc
