// Convolution op definitions (anchors): Conv, ConvTranspose, DeformConv, Im2Col and Col2ImSum.
// Im2Col and Col2ImSum are nnc-internal (passes/conv_to_gemm.cpp). Each anchor lowers to one kernel:
// the outer loop runs over the output, one reduction folds the channels and taps.
#include <algorithm>
#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

#include "ir/ops/common.h"
#include "ir/ops/window.h"

namespace nnc {
namespace {

using kir::ElementGen;
using kir::ExprId;
using kir::ExprOp;
using kir::KernelBuilder;
using kir::ReduceOp;
using ops::computeWindow;
using ops::ConvTransposeGeometry;
using ops::floorDiv;
using ops::listStr;
using ops::readAutoPad;
using ops::readSpatialInts;
using ops::singleOutput;
using ops::spatialDims;
using ops::Taps;
using ops::Window;
using ops::windowAttrs;
using ops::windowTaps;

// ================================================================================================
// Conv: Y[n, m, o...] = B[m] + sum over (c, k...) of X[n, g*C/group + c, o*s - pb + k*d] * W[m, c, k...].

struct ConvGeometry {
  Window w;
  int64_t group = 1, inPerGroup = 1, outChannels = 1;
};

Status convGeometry(const Node& node, ConvGeometry* g) {
  const Shape& x = node.input(0)->shape();
  const Shape& w = node.input(1)->shape();
  const Attributes& attrs = node.attrs();
  if (x.rank() < 3)
    return Status::error("input X has rank " + std::to_string(x.rank()) + ", expected >= 3 (N, C, spatial...)");
  if (w.rank() != x.rank())
    return Status::error("weight has rank " + std::to_string(w.rank()) + ", expected " + std::to_string(x.rank()) +
                         " like the input");
  g->group = attrs.getInt("group");
  if (g->group < 1) return Status::error("group must be positive, got " + std::to_string(g->group));
  const int64_t c = x[1];
  g->outChannels = w[0];
  g->inPerGroup = w[1];
  // By division: the product of huge dims (allowed when another dim is 0) would overflow.
  if (c % g->group != 0 || c / g->group != w[1])
    return Status::error("input has " + std::to_string(c) + " channels, weight " + w.str() + " expects " +
                         std::to_string(w[1]) + " per group x group " + std::to_string(g->group));
  if (g->outChannels % g->group != 0)
    return Status::error("output channels " + std::to_string(g->outChannels) + " are not divisible by group " +
                         std::to_string(g->group));
  std::vector<int64_t> kernel = spatialDims(w);
  if (attrs.has("kernel_shape") && attrs.getInts("kernel_shape") != kernel)
    return Status::error("kernel_shape " + listStr(attrs.getInts("kernel_shape")) + " does not match the weight's " +
                         "spatial dims " + listStr(kernel));
  NNC_RETURN_IF_ERROR(computeWindow(attrs, spatialDims(x), kernel, &g->w));
  if (node.input(2)) {
    const Shape& b = node.input(2)->shape();
    if (b != Shape{g->outChannels})
      return Status::error("bias has shape " + b.str() + ", expected [" + std::to_string(g->outChannels) + "]");
  }
  return Status::ok();
}

Status inferConv(InferContext& ctx) {
  ConvGeometry g;
  if (Status s = convGeometry(ctx.node(), &g); !s) return ctx.error(s.message());
  std::vector<int64_t> out = {ctx.inShape(0)[0], g.outChannels};
  out.insert(out.end(), g.w.out.begin(), g.w.out.end());
  ctx.setOutput(0, ctx.inType(0), Shape(out));
  return Status::ok();
}

std::vector<AnchorOutput> lowerConv(LowerContext& ctx) {
  KernelBuilder& kb = ctx.kb;
  ConvGeometry g;
  NNC_CHECK(convGeometry(ctx.node, &g).isOk(), "Conv lowered without inference");
  const Window& w = g.w;
  std::vector<ExprId> out = kb.setOuter(ctx.outShape(0).dims());
  std::vector<int64_t> extents = {g.inPerGroup};
  extents.insert(extents.end(), w.kernel.begin(), w.kernel.end());
  std::vector<ExprId> rv = kb.reductionVars(extents);
  const ExprId n = out[0], m = out[1];
  std::vector<ExprId> o(out.begin() + 2, out.end()), k(rv.begin() + 1, rv.end());
  Taps taps = windowTaps(kb, w, o, k);
  const ExprId groupIndex = kb.binary(ExprOp::FloorDiv, m, kb.i64(g.outChannels / g.group));
  const ExprId c = kb.add(kb.mul(groupIndex, kb.i64(g.inPerGroup)), rv[0]);
  std::vector<ExprId> xi = {n, c};
  xi.insert(xi.end(), taps.clamped.begin(), taps.clamped.end());
  std::vector<ExprId> wi = {m, rv[0]};
  wi.insert(wi.end(), k.begin(), k.end());
  ExprId x = ctx.inputs[0](xi);
  const ExprId zero = kb.constant(kb.dtypeOf(x), 0);
  ExprId body = kb.mul(kb.select(taps.valid, x, zero), ctx.inputs[1](wi));
  ExprId value = kb.reduce(ReduceOp::Sum, rv, body);
  kb.unrollWindow(value);
  if (ctx.hasInput(2)) value = kb.add(value, ctx.inputs[2]({m}));
  return singleOutput(out, value);
}

// ================================================================================================
// Im2Col (nnc-internal, from passes/conv_to_gemm.cpp): the patches a Conv with the same attributes
// would multiply, as the columns of a matrix per image:
//   Y[n, c*K + kk, p] = X[n, c, o*s - pb + k*d]  (0 where that lies in the padding)
// with K = prod(kernel_shape), kk the row-major flat index of the tap k, p that of the output position
// o. So Conv(X, W) = Reshape(MatMul(Reshape(W, [M, C*K]), Im2Col(X)), [N, M, out...]) for group 1.

// With patch_rows = 1 the same patches are rows, one per output position: Y[n, p, c*K + kk] (the
// channels-last head of targets/cpu/channels_last.cpp multiplies them by W as [C*K, M]).

bool patchRows(const Node& node) { return node.attrs().getInt("patch_rows") != 0; }

OpDef im2colDef() {
  OpDef d;
  d.kind = OpKind::Im2Col;
  d.internal = true;
  d.keepsPadInput = true;
  std::vector<AttrSpec> attrs = windowAttrs();
  attrs.push_back(ops::requiredAttr("kernel_shape", AttrKind::Ints));
  attrs.push_back(ops::attrInt("patch_rows", 0));
  d.attrs = std::move(attrs);
  d.infer = [](InferContext& ctx) -> Status {
    Window w;
    if (Status s = ops::kernelShapeWindow(ctx.node(), &w); !s) return ctx.error(s.message());
    const Shape& x = ctx.inShape(0);
    const int64_t products = saturatingProduct({x[1], saturatingProduct(w.kernel)}),
                  positions = saturatingProduct(w.out);
    const Shape out = patchRows(ctx.node()) ? Shape({x[0], positions, products}) : Shape({x[0], products, positions});
    if (!out.checkedNumel()) return ctx.error("the patches " + out.str() + " would be too large");
    ctx.setOutput(0, ctx.inType(0), out);
    return Status::ok();
  };
  // Walked as [N, C*K, out...] (columns) or [N, out..., C, kernel...] (rows): the innermost loop runs
  // along an output row or a kernel row, and the index arithmetic is affine.
  d.iterationShape = [](const Node& node) {
    Window w;
    NNC_CHECK(ops::kernelShapeWindow(node, &w).isOk(), "Im2Col lowered without inference");
    const Shape& y = node.output(0)->shape();
    std::vector<int64_t> dims = {y[0]};
    if (patchRows(node)) {
      dims.insert(dims.end(), w.out.begin(), w.out.end());
      dims.push_back(node.input(0)->shape()[1]);
      dims.insert(dims.end(), w.kernel.begin(), w.kernel.end());
    } else {
      dims.push_back(y[1]);
      dims.insert(dims.end(), w.out.begin(), w.out.end());
    }
    return Shape(dims);
  };
  d.lowerElement = [](LowerContext& ctx) -> std::vector<ElementGen> {
    KernelBuilder* kb = &ctx.kb;
    Window w;
    NNC_CHECK(ops::kernelShapeWindow(ctx.node, &w).isOk(), "Im2Col lowered without inference");
    const int64_t taps = saturatingProduct(w.kernel);
    const bool rows = patchRows(ctx.node);
    ElementGen x = ctx.inputs[0];
    return {[=](const std::vector<ExprId>& idx) {
      const ExprId product = rows ? idx[2] : idx[1], position = rows ? idx[1] : idx[2];
      const ExprId c = kb->binary(ExprOp::FloorDiv, product, kb->i64(taps));
      const std::vector<ExprId> k =
          kb->unflatten(kb->binary(ExprOp::FloorMod, product, kb->i64(taps)), Shape(w.kernel));
      const std::vector<ExprId> o = kb->unflatten(position, Shape(w.out));
      const Taps t = windowTaps(*kb, w, o, k);
      std::vector<ExprId> xi = {idx[0], c};
      xi.insert(xi.end(), t.clamped.begin(), t.clamped.end());
      const ExprId v = x(xi);
      return kb->select(t.valid, v, kb->constant(kb->dtypeOf(v), 0));
    }};
  };
  return d;
}

// ================================================================================================
// ConvTranspose: Y[n, m, o...] = B[m] + sum over (c, k...) of X[n, g*C/group + c, i...] *
// W[g*C/group + c, m % (M/group), k...] where o + pb - k*d = i*s with 0 <= i < in.

// A transposed window (ConvTranspose, Col2ImSum): tap k of output o reads input position i where
// o + pb - k*d = i*s, valid when that is a multiple of the stride and 0 <= i < in; `index` is i
// clamped into the input, one per spatial axis.
struct TransposedTaps {
  ExprId valid;
  std::vector<ExprId> index;
};

TransposedTaps transposedTaps(KernelBuilder& kb, const std::vector<ExprId>& o, const std::vector<ExprId>& k,
                              const std::vector<int64_t>& in, const std::vector<int64_t>& strides,
                              const std::vector<int64_t>& dilations, const std::vector<int64_t>& padBegin) {
  TransposedTaps taps{kb.boolean(true), {}};
  for (size_t i = 0; i < in.size(); ++i) {
    const int64_t s = strides[i];
    const ExprId t = kb.sub(kb.add(o[i], kb.i64(padBegin[i])), kb.mul(k[i], kb.i64(dilations[i])));
    taps.valid = kb.logicalAnd(taps.valid, kb.le(kb.i64(0), t));
    taps.valid = kb.logicalAnd(taps.valid, kb.lt(t, kb.i64(in[i] * s)));
    if (s != 1) taps.valid = kb.logicalAnd(taps.valid, kb.eq(kb.binary(ExprOp::FloorMod, t, kb.i64(s)), kb.i64(0)));
    taps.index.push_back(kb.clamp(kb.binary(ExprOp::FloorDiv, t, kb.i64(s)), 0, in[i] - 1));
  }
  return taps;
}

Status convTransposeGeometry(const Node& node, ConvTransposeGeometry* g) {
  const Shape& x = node.input(0)->shape();
  const Shape& w = node.input(1)->shape();
  const Attributes& attrs = node.attrs();
  if (x.rank() < 3)
    return Status::error("input X has rank " + std::to_string(x.rank()) + ", expected >= 3 (N, C, spatial...)");
  if (w.rank() != x.rank())
    return Status::error("weight has rank " + std::to_string(w.rank()) + ", expected " + std::to_string(x.rank()) +
                         " like the input");
  g->group = attrs.getInt("group");
  if (g->group < 1) return Status::error("group must be positive, got " + std::to_string(g->group));
  if (x[1] != w[0])
    return Status::error("input has " + std::to_string(x[1]) + " channels but weight " + w.str() + " has " +
                         std::to_string(w[0]));
  if (x[1] % g->group != 0)
    return Status::error("input channels " + std::to_string(x[1]) + " are not divisible by group " +
                         std::to_string(g->group));
  g->inPerGroup = x[1] / g->group;
  g->outPerGroup = w[1];
  if (g->outPerGroup > kMaxElements / g->group)
    return Status::error("weight " + w.str() + " x group " + std::to_string(g->group) +
                         " gives too many output channels");
  g->in = spatialDims(x);
  g->kernel = spatialDims(w);
  const size_t n = g->in.size();
  if (attrs.has("kernel_shape") && attrs.getInts("kernel_shape") != g->kernel)
    return Status::error("kernel_shape " + listStr(attrs.getInts("kernel_shape")) + " does not match the weight's " +
                         "spatial dims " + listStr(g->kernel));
  NNC_RETURN_IF_ERROR(readSpatialInts(attrs, "strides", n, 1, 1, &g->strides));
  NNC_RETURN_IF_ERROR(readSpatialInts(attrs, "dilations", n, 1, 1, &g->dilations));
  std::vector<int64_t> pads, outputPadding;
  NNC_RETURN_IF_ERROR(readSpatialInts(attrs, "pads", 2 * n, 0, 0, &pads));
  NNC_RETURN_IF_ERROR(readSpatialInts(attrs, "output_padding", n, 0, 0, &outputPadding));
  std::string autoPad;
  NNC_RETURN_IF_ERROR(readAutoPad(attrs, &autoPad));
  for (size_t i = 0; i < n; ++i)
    if (outputPadding[i] >= std::max(g->strides[i], g->dilations[i]))
      return Status::error("output_padding " + listStr(outputPadding) + " must be smaller than the stride or dilation");
  std::vector<int64_t> outputShape;
  if (attrs.has("output_shape")) {
    outputShape = attrs.getInts("output_shape");
    // Some exporters give the full N, C, spatial... shape; the spatial part is what counts.
    if (outputShape.size() == n + 2) outputShape.erase(outputShape.begin(), outputShape.begin() + 2);
    if (outputShape.size() != n)
      return Status::error("output_shape has " + std::to_string(attrs.getInts("output_shape").size()) +
                           " values, expected " + std::to_string(n));
    for (int64_t d : outputShape)
      if (d < 1) return Status::error("output_shape " + listStr(outputShape) + " must be positive");
  } else if (autoPad == "SAME_UPPER" || autoPad == "SAME_LOWER") {
    for (size_t i = 0; i < n; ++i) outputShape.push_back(saturatingProduct({g->in[i], g->strides[i]}));
  }
  for (int64_t d : outputShape)
    if (d > kMaxElements) return Status::error("output_shape " + listStr(outputShape) + " is too large");
  g->padBegin.assign(n, 0);
  g->out.assign(n, 0);
  for (size_t i = 0; i < n; ++i) {
    // In 128 bits: an empty input may have huge spatial and kernel dims, whose products overflow.
    const __int128 wide = static_cast<__int128>(g->strides[i]) * (g->in[i] - 1) + outputPadding[i] +
                          static_cast<__int128>(g->kernel[i] - 1) * g->dilations[i] + 1;
    if (wide > kMaxElements || wide < -kMaxElements)
      return Status::error("the output on spatial axis " + std::to_string(i) + " would be too large");
    const int64_t full = static_cast<int64_t>(wide);
    if (!outputShape.empty()) {
      // Pads derived from the requested size; ONNX: SAME_UPPER puts the smaller half first.
      const int64_t total = full - outputShape[i];
      g->padBegin[i] = autoPad == "SAME_UPPER" ? floorDiv(total, 2) : total - floorDiv(total, 2);
      g->out[i] = outputShape[i];
    } else {
      g->padBegin[i] = autoPad == "NOTSET" ? pads[i] : 0;
      g->out[i] = full - (autoPad == "NOTSET" ? pads[i] + pads[n + i] : 0);
    }
    if (g->out[i] < 1)
      return Status::error("output size " + std::to_string(g->out[i]) + " on spatial axis " + std::to_string(i) +
                           " is not positive");
  }
  if (node.input(2)) {
    const Shape& b = node.input(2)->shape();
    if (b != Shape{g->outPerGroup * g->group})
      return Status::error("bias has shape " + b.str() + ", expected [" + std::to_string(g->outPerGroup * g->group) +
                           "]");
  }
  return Status::ok();
}

Status inferConvTranspose(InferContext& ctx) {
  ConvTransposeGeometry g;
  if (Status s = convTransposeGeometry(ctx.node(), &g); !s) return ctx.error(s.message());
  std::vector<int64_t> out = {ctx.inShape(0)[0], g.outPerGroup * g.group};
  out.insert(out.end(), g.out.begin(), g.out.end());
  ctx.setOutput(0, ctx.inType(0), Shape(out));
  return Status::ok();
}

std::vector<AnchorOutput> lowerConvTranspose(LowerContext& ctx) {
  KernelBuilder& kb = ctx.kb;
  ConvTransposeGeometry g;
  NNC_CHECK(convTransposeGeometry(ctx.node, &g).isOk(), "ConvTranspose lowered without inference");
  std::vector<ExprId> out = kb.setOuter(ctx.outShape(0).dims());
  std::vector<int64_t> extents = {g.inPerGroup};
  extents.insert(extents.end(), g.kernel.begin(), g.kernel.end());
  std::vector<ExprId> rv = kb.reductionVars(extents);
  const ExprId n = out[0], m = out[1];
  const ExprId groupIndex = kb.binary(ExprOp::FloorDiv, m, kb.i64(g.outPerGroup));
  const ExprId c = kb.add(kb.mul(groupIndex, kb.i64(g.inPerGroup)), rv[0]);
  std::vector<ExprId> xi = {n, c};
  std::vector<ExprId> wi = {c, kb.binary(ExprOp::FloorMod, m, kb.i64(g.outPerGroup))};
  const TransposedTaps taps =
      transposedTaps(kb, std::vector<ExprId>(out.begin() + 2, out.end()), std::vector<ExprId>(rv.begin() + 1, rv.end()),
                     g.in, g.strides, g.dilations, g.padBegin);
  xi.insert(xi.end(), taps.index.begin(), taps.index.end());
  wi.insert(wi.end(), rv.begin() + 1, rv.end());
  ExprId x = ctx.inputs[0](xi);
  const ExprId zero = kb.constant(kb.dtypeOf(x), 0);
  ExprId body = kb.mul(kb.select(taps.valid, x, zero), ctx.inputs[1](wi));
  ExprId value = kb.reduce(ReduceOp::Sum, rv, body);
  if (ctx.hasInput(2)) value = kb.add(value, ctx.inputs[2]({m}));
  return singleOutput(out, value);
}

// ================================================================================================
// Col2ImSum (nnc-internal, from passes/conv_to_gemm.cpp): the columns of a ConvTranspose's GEMM,
// [N, C*K, L] with K = prod(kernel_shape) and L = prod(blocks) (the ConvTranspose's input positions),
// summed into the image they overlap:
//   Y[n, c, o...] = sum over k... of X[n, c*K + kk, i...] where o + pb - k*d = i*s with 0 <= i < blocks
// So ConvTranspose(X, W) = Col2ImSum(MatMul(W as [C, M*K] transposed, X as [N, C, L])) for group 1: the
// reduction over input channels runs in the GEMM, and each output sums K products instead of C*K.
// Attributes: image_shape (the output's spatial dims), blocks, kernel_shape, strides, dilations and
// pads_begin, all with one value per spatial axis (the ConvTranspose's resolved geometry).

struct Col2ImGeometry {
  std::vector<int64_t> image, blocks, kernel, strides, dilations, padBegin;
};

Status col2ImGeometry(const Node& node, Col2ImGeometry* g) {
  const Attributes& a = node.attrs();
  g->image = a.getInts("image_shape");
  g->blocks = a.getInts("blocks");
  g->kernel = a.getInts("kernel_shape");
  g->strides = a.getInts("strides");
  g->dilations = a.getInts("dilations");
  g->padBegin = a.getInts("pads_begin");
  const size_t n = g->image.size();
  for (const std::vector<int64_t>* v : {&g->blocks, &g->kernel, &g->strides, &g->dilations, &g->padBegin})
    if (v->size() != n || n == 0) return Status::error("the geometry attributes must have one value per spatial axis");
  for (size_t i = 0; i < n; ++i)
    if (g->image[i] < 1 || g->blocks[i] < 1 || g->kernel[i] < 1 || g->strides[i] < 1 || g->dilations[i] < 1 ||
        g->image[i] > kMaxElements || g->blocks[i] > kMaxElements || g->kernel[i] > kMaxElements ||
        g->strides[i] > kMaxElements || g->dilations[i] > kMaxElements || std::abs(g->padBegin[i]) > kMaxElements)
      return Status::error("the geometry attributes are out of range");
  const Shape& x = node.input(0)->shape();
  if (x.rank() != 3 || x[1] % saturatingProduct(g->kernel) != 0 || x[2] != saturatingProduct(g->blocks))
    return Status::error("input " + x.str() + " is not [N, C*K, L] for kernel " + listStr(g->kernel) + " and blocks " +
                         listStr(g->blocks));
  return Status::ok();
}

OpDef col2ImDef() {
  OpDef d;
  d.kind = OpKind::Col2Im;
  d.internal = true;
  d.attrs = {ops::requiredAttr("image_shape", AttrKind::Ints),  ops::requiredAttr("blocks", AttrKind::Ints),
             ops::requiredAttr("kernel_shape", AttrKind::Ints), ops::requiredAttr("strides", AttrKind::Ints),
             ops::requiredAttr("dilations", AttrKind::Ints),    ops::requiredAttr("pads_begin", AttrKind::Ints)};
  d.typeRules = {TypeRule::in(0, TypeSet::Float)};
  d.infer = [](InferContext& ctx) -> Status {
    Col2ImGeometry g;
    if (Status s = col2ImGeometry(ctx.node(), &g); !s) return ctx.error(s.message());
    const Shape& x = ctx.inShape(0);
    std::vector<int64_t> out = {x[0], x[1] / saturatingProduct(g.kernel)};
    out.insert(out.end(), g.image.begin(), g.image.end());
    if (!Shape(out).checkedNumel()) return ctx.error("the image " + Shape(out).str() + " would be too large");
    ctx.setOutput(0, ctx.inType(0), Shape(out));
    return Status::ok();
  };
  d.lowerAnchor = [](LowerContext& ctx) {
    KernelBuilder& kb = ctx.kb;
    Col2ImGeometry g;
    NNC_CHECK(col2ImGeometry(ctx.node, &g).isOk(), "Col2ImSum lowered without inference");
    std::vector<ExprId> out = kb.setOuter(ctx.outShape(0).dims());
    std::vector<ExprId> rv = kb.reductionVars(g.kernel);
    const TransposedTaps taps = transposedTaps(kb, std::vector<ExprId>(out.begin() + 2, out.end()), rv, g.blocks,
                                               g.strides, g.dilations, g.padBegin);
    const ExprId row = kb.add(kb.mul(out[1], kb.i64(saturatingProduct(g.kernel))), kb.flatIndex(rv, Shape(g.kernel)));
    const ExprId x = ctx.inputs[0]({out[0], row, kb.flatIndex(taps.index, Shape(g.blocks))});
    const ExprId value = kb.reduce(ReduceOp::Sum, rv, kb.select(taps.valid, x, kb.constant(kb.dtypeOf(x), 0)));
    return singleOutput(out, value);
  };
  return d;
}

// ================================================================================================
// DeformConv: Conv whose taps sample X at fractional positions shifted by per-output offsets
// (multilinear interpolation, zero outside), each tap optionally weighted by a mask:
//   Y[n, m, o...] = B[m] + sum over (c, k...) of W[m, c, k...] * mask[n, og*K + k, o...] *
//                   sample(X[n, g*C/group + c], o*s - pb + k*d + offset[n, (og*K + k)*nd + axis, o...])
// where og is the input channel's offset group and K the number of kernel taps.

struct DeformGeometry {
  std::vector<int64_t> in, kernel, strides, dilations, padBegin, out;
  int64_t group = 1, offsetGroup = 1, inPerGroup = 1, outChannels = 1, taps = 1;
};

Status deformGeometry(const Node& node, DeformGeometry* g) {
  const Shape& x = node.input(0)->shape();
  const Shape& w = node.input(1)->shape();
  const Attributes& attrs = node.attrs();
  if (x.rank() < 3)
    return Status::error("input X has rank " + std::to_string(x.rank()) + ", expected >= 3 (N, C, spatial...)");
  if (w.rank() != x.rank())
    return Status::error("weight has rank " + std::to_string(w.rank()) + ", expected " + std::to_string(x.rank()) +
                         " like the input");
  g->group = attrs.getInt("group");
  g->offsetGroup = attrs.getInt("offset_group");
  if (g->group < 1 || g->offsetGroup < 1)
    return Status::error("group " + std::to_string(g->group) + " and offset_group " + std::to_string(g->offsetGroup) +
                         " must be positive");
  g->outChannels = w[0];
  g->inPerGroup = w[1];
  if (x[1] % g->group != 0 || x[1] / g->group != w[1])
    return Status::error("input has " + std::to_string(x[1]) + " channels, weight " + w.str() + " expects " +
                         std::to_string(w[1]) + " per group x group " + std::to_string(g->group));
  if (g->outChannels % g->group != 0)
    return Status::error("output channels " + std::to_string(g->outChannels) + " are not divisible by group " +
                         std::to_string(g->group));
  if (x[1] % g->offsetGroup != 0)
    return Status::error("input channels " + std::to_string(x[1]) + " are not divisible by offset_group " +
                         std::to_string(g->offsetGroup));
  g->in = spatialDims(x);
  g->kernel = spatialDims(w);
  const size_t n = g->in.size();
  if (attrs.has("kernel_shape") && attrs.getInts("kernel_shape") != g->kernel)
    return Status::error("kernel_shape " + listStr(attrs.getInts("kernel_shape")) + " does not match the weight's " +
                         "spatial dims " + listStr(g->kernel));
  std::vector<int64_t> pads;
  NNC_RETURN_IF_ERROR(readSpatialInts(attrs, "strides", n, 1, 1, &g->strides));
  NNC_RETURN_IF_ERROR(readSpatialInts(attrs, "dilations", n, 1, 1, &g->dilations));
  NNC_RETURN_IF_ERROR(readSpatialInts(attrs, "pads", 2 * n, 0, 0, &pads));
  g->padBegin.assign(pads.begin(), pads.begin() + n);
  for (int64_t k : g->kernel)
    if (k > ops::kMaxWindowValue)
      return Status::error("kernel size " + listStr(g->kernel) + " has a value above 2^31 - 1");
  g->taps = saturatingProduct(g->kernel);
  for (size_t i = 0; i < n; ++i) {
    const int64_t span = g->in[i] + pads[i] + pads[n + i] - (g->kernel[i] - 1) * g->dilations[i] - 1;
    if (g->kernel[i] < 1 || span < 0)
      return Status::error("kernel " + listStr(g->kernel) + " does not fit the padded input on spatial axis " +
                           std::to_string(i));
    g->out.push_back(span / g->strides[i] + 1);
  }
  // Saturating: offset_group is an unbounded attribute and an empty weight may have huge taps.
  std::vector<int64_t> spatialOut = {x[0], saturatingProduct({g->offsetGroup, g->taps, static_cast<int64_t>(n)})};
  spatialOut.insert(spatialOut.end(), g->out.begin(), g->out.end());
  if (node.input(2)->shape() != Shape(spatialOut))
    return Status::error("offset has shape " + node.input(2)->shape().str() + ", expected " + Shape(spatialOut).str());
  if (node.input(3) && node.input(3)->shape() != Shape{g->outChannels})
    return Status::error("bias has shape " + node.input(3)->shape().str() + ", expected [" +
                         std::to_string(g->outChannels) + "]");
  spatialOut[1] = saturatingProduct({g->offsetGroup, g->taps});
  if (node.input(4) && node.input(4)->shape() != Shape(spatialOut))
    return Status::error("mask has shape " + node.input(4)->shape().str() + ", expected " + Shape(spatialOut).str());
  return Status::ok();
}

Status inferDeformConv(InferContext& ctx) {
  DeformGeometry g;
  if (Status s = deformGeometry(ctx.node(), &g); !s) return ctx.error(s.message());
  std::vector<int64_t> out = {ctx.inShape(0)[0], g.outChannels};
  out.insert(out.end(), g.out.begin(), g.out.end());
  ctx.setOutput(0, ctx.inType(0), Shape(out));
  return Status::ok();
}

std::vector<AnchorOutput> lowerDeformConv(LowerContext& ctx) {
  KernelBuilder& kb = ctx.kb;
  DeformGeometry g;
  NNC_CHECK(deformGeometry(ctx.node, &g).isOk(), "DeformConv lowered without inference");
  const int nd = static_cast<int>(g.in.size());
  std::vector<ExprId> out = kb.setOuter(ctx.outShape(0).dims());
  std::vector<int64_t> extents = {g.inPerGroup};
  extents.insert(extents.end(), g.kernel.begin(), g.kernel.end());
  std::vector<ExprId> rv = kb.reductionVars(extents);
  const ExprId n = out[0], m = out[1];
  std::vector<ExprId> o(out.begin() + 2, out.end()), k(rv.begin() + 1, rv.end());
  const ExprId groupIndex = kb.binary(ExprOp::FloorDiv, m, kb.i64(g.outChannels / g.group));
  const ExprId c = kb.add(kb.mul(groupIndex, kb.i64(g.inPerGroup)), rv[0]);
  const int64_t channels = g.inPerGroup * g.group;
  const ExprId tap = kb.add(kb.mul(kb.binary(ExprOp::FloorDiv, c, kb.i64(channels / g.offsetGroup)), kb.i64(g.taps)),
                            kb.flatIndex(k, Shape(g.kernel)));
  auto perOutput = [&](int input, ExprId channel) {
    std::vector<ExprId> index = {n, channel};
    index.insert(index.end(), o.begin(), o.end());
    return ctx.inputs[input](index);
  };
  // Per axis: the sample position, its floor (as an index) and fraction. A position outside
  // (-1, in) (or NaN) has no corner inside, so it is replaced by -1 and the sample zeroed.
  const DType ct = ctx.inType(0) == DType::F64 ? DType::F64 : DType::F32;  // f16/bf16 load as f32
  ExprId inside = kb.boolean(true);
  std::vector<ExprId> low, frac;
  for (int i = 0; i < nd; ++i) {
    ExprId base =
        kb.add(kb.sub(kb.mul(o[i], kb.i64(g.strides[i])), kb.i64(g.padBegin[i])), kb.mul(k[i], kb.i64(g.dilations[i])));
    ExprId pos = kb.add(kb.cast(ct, base), perOutput(2, kb.add(kb.mul(tap, kb.i64(nd)), kb.i64(i))));
    ExprId ok =
        kb.logicalAnd(kb.lt(kb.constant(ct, -1), pos), kb.lt(pos, kb.constant(ct, static_cast<double>(g.in[i]))));
    inside = kb.logicalAnd(inside, ok);
    ExprId safe = kb.unary(ExprOp::Floor, kb.select(ok, pos, kb.constant(ct, -1)));
    low.push_back(kb.cast(DType::I64, safe));
    frac.push_back(kb.sub(kb.select(ok, pos, kb.constant(ct, -1)), safe));
  }
  ExprId sample = kb.constant(ct, 0);
  for (int corner = 0; corner < (1 << nd); ++corner) {
    std::vector<ExprId> xi = {n, c};
    ExprId valid = kb.boolean(true), weight = kb.constant(ct, 1);
    for (int i = 0; i < nd; ++i) {
      const bool high = (corner >> i) & 1;
      ExprId coord = high ? kb.add(low[i], kb.i64(1)) : low[i];
      valid = kb.logicalAnd(valid, kb.logicalAnd(kb.le(kb.i64(0), coord), kb.lt(coord, kb.i64(g.in[i]))));
      xi.push_back(kb.clamp(coord, 0, g.in[i] - 1));
      weight = kb.mul(weight, high ? frac[i] : kb.sub(kb.constant(ct, 1), frac[i]));
    }
    ExprId x = ctx.inputs[0](xi);
    sample = kb.add(sample, kb.mul(weight, kb.select(valid, x, kb.constant(kb.dtypeOf(x), 0))));
  }
  sample = kb.select(inside, sample, kb.constant(ct, 0));
  std::vector<ExprId> wi = {m, rv[0]};
  wi.insert(wi.end(), k.begin(), k.end());
  ExprId body = kb.mul(sample, ctx.inputs[1](wi));
  if (ctx.hasInput(4)) body = kb.mul(body, perOutput(4, tap));
  ExprId value = kb.reduce(ReduceOp::Sum, rv, body);
  if (ctx.hasInput(3)) value = kb.add(value, ctx.inputs[3]({m}));
  return singleOutput(out, value);
}

}  // namespace

Status ops::resolveConvTranspose(const Node& node, ConvTransposeGeometry* g) { return convTransposeGeometry(node, g); }

void defineConvOps(OpRegistry& r) {
  // X, W and the bias of one float dtype.
  const std::vector<TypeRule> floatOperands = {TypeRule::allSame(), TypeRule::in(0, TypeSet::Float)};
  std::vector<AttrSpec> convAttrs = windowAttrs();
  convAttrs.push_back(ops::attrInt("group", 1));
  convAttrs.push_back(ops::optionalAttr("kernel_shape", AttrKind::Ints));
  OpDef conv = ops::rereading(ops::anchorDef(OpKind::Conv, 2, 3, convAttrs, inferConv, lowerConv));
  conv.typeRules = floatOperands;
  conv.keepsPadInput = true;
  r.define(conv);
  r.define(im2colDef());
  convAttrs.push_back(ops::optionalAttr("output_padding", AttrKind::Ints));
  convAttrs.push_back(ops::optionalAttr("output_shape", AttrKind::Ints));
  OpDef convTranspose =
      ops::rereading(ops::anchorDef(OpKind::ConvTranspose, 2, 3, convAttrs, inferConvTranspose, lowerConvTranspose));
  convTranspose.typeRules = floatOperands;
  r.define(convTranspose);
  r.define(col2ImDef());  // each column element feeds one output: no re-reading
  OpDef deform = ops::rereading(
      ops::anchorDef(OpKind::DeformConv, 3, 5,
                     {ops::optionalAttr("dilations", AttrKind::Ints), ops::attrInt("group", 1),
                      ops::optionalAttr("kernel_shape", AttrKind::Ints), ops::attrInt("offset_group", 1),
                      ops::optionalAttr("pads", AttrKind::Ints), ops::optionalAttr("strides", AttrKind::Ints)},
                     inferDeformConv, lowerDeformConv));
  deform.typeRules = floatOperands;
  r.define(deform);
}

}  // namespace nnc
