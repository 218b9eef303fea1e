// Channels-last window op definitions (anchors): DepthwiseConvNhwc and PoolNhwc.
// Both are nnc-internal, made by targets/cpu/channels_last.cpp; their taps are unrolled into one loop
// nest vectorised along the contiguous channels.
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "ir/ops/common.h"
#include "ir/ops/window.h"

namespace nnc {

namespace ops {

// A channels-last window's taps are unrolled: 1 to kMaxDepthwiseNhwcTaps of them.
Status checkUnrolledTaps(const std::vector<int64_t>& kernel) {
  const int64_t taps = saturatingProduct(kernel);
  if (taps < 1 || taps > kMaxDepthwiseNhwcTaps)
    return Status::error("the kernel " + listStr(kernel) + " has " + std::to_string(taps) + " taps, expected 1 to " +
                         std::to_string(kMaxDepthwiseNhwcTaps));
  return Status::ok();
}

Status depthwiseNhwcWindow(const Node& node, Window* w) {
  const Shape& x = node.input(0)->shape();
  const Shape& wt = node.input(1)->shape();
  if (x.rank() < 3)
    return Status::error("input X has rank " + std::to_string(x.rank()) + ", expected >= 3 (N, spatial..., C)");
  if (wt.rank() != x.rank() - 1 || wt[wt.rank() - 1] != x[x.rank() - 1])
    return Status::error("weight has shape " + wt.str() + ", expected [kernel..., " + std::to_string(x[x.rank() - 1]) +
                         "] for input " + x.str());
  std::vector<int64_t> in(x.dims().begin() + 1, x.dims().end() - 1);
  std::vector<int64_t> kernel(wt.dims().begin(), wt.dims().end() - 1);
  NNC_RETURN_IF_ERROR(checkUnrolledTaps(kernel));
  return computeWindow(node.attrs(), in, kernel, w);
}

}  // namespace ops

namespace {

using ops::checkUnrolledTaps;
using ops::depthwiseNhwcWindow;

using kir::ExprId;
using kir::KernelBuilder;
using ops::computeWindow;
using ops::listStr;
using ops::lowestValue;
using ops::singleOutput;
using ops::tapCount;
using ops::Taps;
using ops::Window;
using ops::windowTaps;

// ================================================================================================
// DepthwiseConvNhwc (nnc-internal, from targets/cpu/channels_last.cpp): a depthwise Conv (one input channel
// per group, one output channel per input channel) on channels-last data:
//   Y[n, o..., c] = B[c] + sum over taps k of X[n, o*s - pb + k*d, c] * W[k..., c]
// with X [N, spatial..., C], W [kernel..., C] and B [C]; strides, pads and dilations as Conv's (pads
// explicit: the pass resolves auto_pad). The taps are unrolled into one sum per output element, so the
// kernel is a single loop nest whose innermost loop runs along the contiguous channels: every load of
// X and W is a vector load, whatever the image size (the channel-first Conv vectorises along an output
// row, which is 4 or 8 points deep in a MobileNet). Tap sums are limited to ops::kMaxDepthwiseNhwcTaps
// terms.

// [N, out..., C] of a channels-last window over x [N, spatial..., C].
Shape nhwcWindowOutput(const Shape& x, const Window& w) {
  std::vector<int64_t> out = {x[0]};
  out.insert(out.end(), w.out.begin(), w.out.end());
  out.push_back(x[x.rank() - 1]);
  return Shape(out);
}

Status inferDepthwiseConvNhwc(InferContext& ctx) {
  Window w;
  if (Status s = depthwiseNhwcWindow(ctx.node(), &w); !s) return ctx.error(s.message());
  const Shape& x = ctx.inShape(0);
  const int64_t channels = x[x.rank() - 1];
  if (ctx.hasInput(2) && ctx.inShape(2) != Shape{channels})
    return ctx.error("bias has shape " + ctx.inShape(2).str() + ", expected [" + std::to_string(channels) + "]");
  ctx.setOutput(0, ctx.inType(0), nhwcWindowOutput(x, w));
  return Status::ok();
}

// The taps of a channels-last window at output [n, o..., c], unrolled in row-major kernel order:
// combine(...combine(term(tap 0), term(tap 1))...). term gets X's index at the tap (clamped into the
// input), the tap's validity and its kernel position.
using NhwcTerm =
    std::function<ExprId(const std::vector<ExprId>& xIndex, const Taps& taps, const std::vector<ExprId>& k)>;
ExprId foldNhwcTaps(KernelBuilder& kb, const Window& w, const std::vector<ExprId>& out, const NhwcTerm& term,
                    const std::function<ExprId(ExprId, ExprId)>& combine) {
  const std::vector<ExprId> o(out.begin() + 1, out.end() - 1);
  std::optional<ExprId> folded;
  std::vector<int64_t> tap(w.kernel.size(), 0);
  for (int64_t t = 0, taps = saturatingProduct(w.kernel); t < taps; ++t) {
    std::vector<ExprId> k;
    for (int64_t v : tap) k.push_back(kb.i64(v));
    const Taps at = windowTaps(kb, w, o, k);
    std::vector<ExprId> xi = {out.front()};
    xi.insert(xi.end(), at.clamped.begin(), at.clamped.end());
    xi.push_back(out.back());
    const ExprId v = term(xi, at, k);
    folded = folded ? combine(*folded, v) : v;
    for (int i = static_cast<int>(tap.size()) - 1; i >= 0 && ++tap[i] == w.kernel[i]; --i) tap[i] = 0;
  }
  return *folded;  // the window checks admit at least one tap
}

std::vector<AnchorOutput> lowerDepthwiseConvNhwc(LowerContext& ctx) {
  KernelBuilder& kb = ctx.kb;
  Window w;
  NNC_CHECK(depthwiseNhwcWindow(ctx.node, &w).isOk(), "DepthwiseConvNhwc lowered without inference");
  const std::vector<ExprId> out = kb.setOuter(ctx.outShape(0).dims());
  const ExprId c = out.back();
  ExprId sum = foldNhwcTaps(
      kb, w, out,
      [&](const std::vector<ExprId>& xi, const Taps& at, const std::vector<ExprId>& k) {
        std::vector<ExprId> wi = k;
        wi.push_back(c);
        const ExprId x = ctx.inputs[0](xi);
        return kb.mul(kb.select(at.valid, x, kb.constant(kb.dtypeOf(x), 0)), ctx.inputs[1](wi));
      },
      [&](ExprId a, ExprId b) { return kb.add(a, b); });
  if (ctx.hasInput(2)) sum = kb.add(sum, ctx.inputs[2]({c}));
  return singleOutput(out, sum);
}

// ================================================================================================
// PoolNhwc (nnc-internal, from targets/cpu/channels_last.cpp): MaxPool (mode "max", one output) or
// AveragePool (mode "average") on channels-last data [N, spatial..., C], with the pool's own
// attributes; taps unrolled and vectorised over the channels like DepthwiseConvNhwc.

Status poolNhwcWindow(const Node& node, Window* w) {
  NNC_RETURN_IF_ERROR(ops::kernelShapeWindow(node, w, /*channelsLast=*/true));
  NNC_RETURN_IF_ERROR(checkUnrolledTaps(w->kernel));
  const std::string mode = node.attrs().getString("mode");
  if (mode != "max" && mode != "average") return Status::error("mode is '" + mode + "', expected max or average");
  return Status::ok();
}

Status inferPoolNhwc(InferContext& ctx) {
  Window w;
  if (Status s = poolNhwcWindow(ctx.node(), &w); !s) return ctx.error(s.message());
  ctx.setOutput(0, ctx.inType(0), nhwcWindowOutput(ctx.inShape(0), w));
  return Status::ok();
}

std::vector<AnchorOutput> lowerPoolNhwc(LowerContext& ctx) {
  KernelBuilder& kb = ctx.kb;
  Window w;
  NNC_CHECK(poolNhwcWindow(ctx.node, &w).isOk(), "PoolNhwc lowered without inference");
  const std::vector<ExprId> out = kb.setOuter(ctx.outShape(0).dims());
  const bool isMax = ctx.attrs().getString("mode") == "max";
  const ExprId value = foldNhwcTaps(
      kb, w, out,
      [&](const std::vector<ExprId>& xi, const Taps& at, const std::vector<ExprId>&) {
        const ExprId x = ctx.inputs[0](xi);
        const DType t = kb.dtypeOf(x);
        return kb.select(at.valid, x, isMax ? lowestValue(kb, t) : kb.constant(t, 0));
      },
      [&](ExprId a, ExprId b) { return isMax ? kb.max(a, b) : kb.add(a, b); });
  if (isMax) return singleOutput(out, value);
  // The divisor as AveragePool's (see lowerPool in ir/ops/pool.cpp).
  const bool includePad = ctx.attrs().getInt("count_include_pad") != 0;
  ExprId count = kb.i64(1);
  for (int i = 0; i < w.rank(); ++i)
    count = kb.mul(count,
                   includePad ? kb.i64(w.kernel[i]) : tapCount(kb, w, i, out[static_cast<size_t>(i) + 1], 0, w.in[i]));
  return singleOutput(out, kb.div(value, kb.cast(kb.dtypeOf(value), count)));
}

}  // namespace

void defineNhwcOps(OpRegistry& r) {
  OpDef depthwise = ops::rereading(ops::anchorDef(OpKind::DepthwiseConvNhwc, 2, 3, ops::windowAttrs(),
                                                  inferDepthwiseConvNhwc, lowerDepthwiseConvNhwc));
  depthwise.typeRules = {TypeRule::allSame(), TypeRule::in(0, TypeSet::Float)};
  depthwise.internal = true;
  depthwise.keepsPadInput = true;  // explicit-padding's copy (large kernels) is read at affine indices
  r.define(depthwise);
  OpDef poolNhwc = ops::rereading(
      ops::anchorDef(OpKind::PoolNhwc, 1, 1,
                     ops::poolAttrs({ops::attrInt("count_include_pad", 0), ops::attrInt("storage_order", 0),
                                     ops::requiredAttr("mode", AttrKind::String)}),
                     inferPoolNhwc, lowerPoolNhwc));
  poolNhwc.typeRules = {TypeRule::in(0, TypeSet::Float)};
  poolNhwc.internal = true;
  r.define(poolNhwc);
}

}  // namespace nnc
