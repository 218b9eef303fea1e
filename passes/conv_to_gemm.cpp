// Conv and ConvTranspose as GEMMs, for every target (cuda: a cuBLASLt call; cpu: a packed
// contraction). A Conv with group 1 in f32 or f64 becomes
//   cols = Im2Col(X)                  [N, C*K, P]    (K taps per channel, P output positions)
//   prod = MatMul(W as [M, C*K], cols) [N, M, P]      one batched GEMM, W shared by every image
//   Y    = Reshape(prod, [N, M, out...]), then Add(Y, B as [M, 1, ...]) when there is a bias
// A 1x1 Conv with unit strides and no padding needs no Im2Col: X reshaped to [N, C, P] is already the
// column matrix. Constant W and B are reshaped here (no node). A grouped Conv of one image whose
// groups each reduce over 16 or more products (ResNeXt's 3x3 groups, ShuffleNet's grouped 1x1s) is
// one GEMM per group, batched over the groups:
//   prod = MatMul(W as [G, M/G, C/G*K], cols as [G, C/G*K, P]) [G, M/G, P]
// (the channel-major column matrix splits by group without a copy). Depthwise Convs (one channel
// per group) and other small groups stay kernels: as GEMMs they would be many tiny ones.
//
// On cuda the fusion policy then makes the MatMul a library call and the Reshape, the bias Add and
// whatever pointwise ops follow one kernel (or inlines them into the next Conv's Im2Col); on the cpu
// the Reshape, the bias Add and the pointwise ops are the contraction's epilogue.
#include "ir/builder.h"
#include "ir/ops/window.h"
#include "passes/pass.h"
#include "passes/rewrite.h"

namespace nnc::passes {

namespace {

// Replaces the (de)convolution `conv` by `result` plus its bias (input 2, one per output channel,
// added as [M, 1, ...] over the spatial dims), checking that the type did not change.
Status replaceWith(Graph& graph, Node* conv, Value* result) {
  Value* y = conv->output(0);
  if (Value* bias = conv->input(2)) {
    std::vector<int64_t> column(static_cast<size_t>(y->shape().rank()) - 1, 1);
    column[0] = y->shape()[1];
    NNC_ASSIGN_OR_RETURN(Value * b, reshapeBefore(graph, conv, bias, column, conv->name() + "_bias"));
    NNC_ASSIGN_OR_RETURN(result, insertBefore(graph, conv, OpKind::Add, conv->name() + "_add_bias", {result, b}));
  }
  NNC_CHECK(result->shape() == y->shape() && result->dtype() == y->dtype(),
            conv->diagPrefix() + "conv-to-gemm changed the result's type");
  graph.replaceAllUsesWith(y, result);
  graph.eraseNode(conv);
  return Status::ok();
}

// Group 1, or groups of one image that are GEMMs worth the name (see the file comment).
bool asGemms(const Node& conv) {
  const int64_t groups = conv.attrs().getInt("group");
  if (groups == 1) return true;
  const Shape& x = conv.input(0)->shape();
  const Shape& w = conv.input(1)->shape();
  if (groups < 1 || x.rank() < 3 || x[0] != 1 || w[0] % groups != 0) return false;
  int64_t products = w[1];  // channels per group x taps
  for (int i = 2; i < w.rank(); ++i) products *= w[i];
  return w[1] > 1 && products >= 16;
}

Status rewrite(Graph& graph, Node* conv) {
  Value* x = conv->input(0);
  Value* w = conv->input(1);
  Value* y = conv->output(0);
  const Shape& xs = x->shape();
  const Shape& ws = w->shape();
  const Shape& ys = y->shape();
  const int spatialRank = xs.rank() - 2;
  int64_t taps = 1, positions = 1;
  for (int i = 0; i < spatialRank; ++i) {
    taps *= ws[2 + i];
    positions *= ys[2 + i];
  }
  const std::string base = conv->name();

  Value* cols = nullptr;
  if (ops::isPointwiseConv(*conv)) {
    NNC_ASSIGN_OR_RETURN(cols, reshapeBefore(graph, conv, x, {xs[0], xs[1], positions}, base + "_cols"));
  } else {
    // The Conv's own window attributes (strides, pads, dilations, auto_pad) and its kernel shape.
    Attributes attrs;
    for (const char* name : {"strides", "pads", "dilations"})
      if (conv->attrs().has(name)) attrs.set(name, conv->attrs().getInts(name));
    if (conv->attrs().has("auto_pad")) attrs.set("auto_pad", conv->attrs().getString("auto_pad"));
    attrs.set("kernel_shape", std::vector<int64_t>(ws.dims().begin() + 2, ws.dims().end()));
    NNC_ASSIGN_OR_RETURN(cols, insertBefore(graph, conv, OpKind::Im2Col, base + "_im2col", {x}, std::move(attrs)));
  }
  const int64_t groups = conv->attrs().getInt("group");
  std::vector<int64_t> weightDims = {ws[0], ws[1] * taps};
  if (groups > 1) {
    NNC_ASSIGN_OR_RETURN(cols, reshapeBefore(graph, conv, cols, {groups, ws[1] * taps, positions}, base + "_groups"));
    weightDims = {groups, ws[0] / groups, ws[1] * taps};
  }
  NNC_ASSIGN_OR_RETURN(Value * weights, reshapeBefore(graph, conv, w, weightDims, base + "_weights"));
  NNC_ASSIGN_OR_RETURN(Value * gemm, insertBefore(graph, conv, OpKind::MatMul, base + "_gemm", {weights, cols}));
  NNC_ASSIGN_OR_RETURN(Value * result, reshapeBefore(graph, conv, gemm, ys.dims(), base + "_out"));
  return replaceWith(graph, conv, result);
}

// ConvTranspose(X, W) with group 1 as a GEMM and a sum of overlapping columns:
//   cols = MatMul(W as [C, M*K] transposed, X as [N, C, L])   [N, M*K, L]   (L input positions)
//   Y    = Col2ImSum(cols), then Add(Y, B as [M, 1, ...])
// The reduction over the C input channels runs in the GEMM; each output then sums K products.
// Worth it when there are channels to reduce (C >= 8); a transposed W that is constant folds.
bool convTransposeAsGemm(const Node& n) {
  const DType t = n.output(0)->dtype();
  const Shape& x = n.input(0)->shape();
  return n.attrs().getInt("group") == 1 && (t == DType::F32 || t == DType::F64) && x.rank() >= 3 && x[1] >= 8 &&
         n.output(0)->shape().numel() > 0 && x.numel() > 0;
}

Status rewriteConvTranspose(Graph& graph, Node* deconv) {
  Value* x = deconv->input(0);
  Value* w = deconv->input(1);
  ops::ConvTransposeGeometry geo;
  NNC_RETURN_IF_ERROR(ops::resolveConvTranspose(*deconv, &geo));
  const Shape& xs = x->shape();
  const Shape& ws = w->shape();
  const int64_t taps = saturatingProduct(geo.kernel), positions = saturatingProduct(geo.in);
  const int64_t outChannels = ws[1];
  const std::string base = deconv->name();
  NNC_ASSIGN_OR_RETURN(Value * rows, reshapeBefore(graph, deconv, x, {xs[0], xs[1], positions}, base + "_rows"));
  NNC_ASSIGN_OR_RETURN(Value * flatW, reshapeBefore(graph, deconv, w, {ws[0], outChannels * taps}, base + "_weights"));
  NNC_ASSIGN_OR_RETURN(Value * wt, transposeBefore(graph, deconv, flatW, {1, 0}, base + "_weights_t"));
  NNC_ASSIGN_OR_RETURN(Value * gemm, insertBefore(graph, deconv, OpKind::MatMul, base + "_gemm", {wt, rows}));
  Attributes attrs;
  attrs.set("image_shape", geo.out);
  attrs.set("blocks", geo.in);
  attrs.set("kernel_shape", geo.kernel);
  attrs.set("strides", geo.strides);
  attrs.set("dilations", geo.dilations);
  attrs.set("pads_begin", geo.padBegin);
  NNC_ASSIGN_OR_RETURN(Value * summed,
                       insertBefore(graph, deconv, OpKind::Col2Im, base + "_col2im", {gemm}, std::move(attrs)));
  return replaceWith(graph, deconv, summed);
}

}  // namespace

Expected<bool> convToGemm(Graph& graph) {
  bool changed = false;
  for (Node* n : graph.nodes()) {
    if (n->op() == OpKind::ConvTranspose && convTransposeAsGemm(*n)) {
      NNC_RETURN_IF_ERROR(rewriteConvTranspose(graph, n));
      changed = true;
      continue;
    }
    if (n->op() != OpKind::Conv || !asGemms(*n)) continue;
    const DType t = n->output(0)->dtype();
    // Empty outputs and empty weights (C = 0: the kernel dims are then unbounded by any tensor) stay.
    if ((t != DType::F32 && t != DType::F64) || n->output(0)->shape().numel() == 0 || n->input(1)->shape().numel() == 0)
      continue;
    NNC_RETURN_IF_ERROR(rewrite(graph, n));
    changed = true;
  }
  return changed;
}

}  // namespace nnc::passes
