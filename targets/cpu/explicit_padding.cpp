// Explicit padding (cpu): a padded Conv or Im2Col reads its input through a zero Pad node instead of
// testing every tap against the borders. The window then reads the padded copy at affine indices
// (ir/ops/window.h tests no bound that cannot be crossed), so Im2Col's patches are separable and a
// packed GEMM reads them in place (targets/cpu/lower_contraction.cpp), and a depthwise conv's taps along a
// long unit-stride output row are plain loads LLVM vectorises; the copy costs one pass over the
// (small) input. The fusion policy keeps the Pad materialised (passes/fusion.cpp).
#include "ir/builder.h"
#include "ir/ops/window.h"
#include "targets/cpu/cpu_passes.h"

namespace nnc::passes {

namespace {

// A channels-last depthwise conv of this many taps or more (7 x 7) reads an explicitly padded copy: its taps are
// unrolled per output point, channels innermost, so the border tests cannot be partitioned out of the
// innermost loop; each tap's bounds test and select cost more than the conv's arithmetic at 7 x 7
// (ConvNeXt's block: 56 x 56 x 96 ran at 5 GFLOP/s). Small kernels keep the implicit padding: the copy
// would stand between a row pipeline's 1 x 1 conv and the depthwise conv (MobileNet's 3 x 3 blocks; at 5 x 5,
// EfficientNet-B0 gained nothing, bench/NOTES.md).
constexpr int64_t kMinPaddedNhwcTaps = 49;

// The node's window (its spatial input dims, kernel, pads), or false when it has none to compute.
bool windowOf(const Node& n, ops::Window* w) {
  if (n.op() == OpKind::Im2Col) return ops::kernelShapeWindow(n, w).isOk();
  if (n.op() == OpKind::DepthwiseConvNhwc) return ops::depthwiseNhwcWindow(n, w).isOk();
  const Shape& x = n.input(0)->shape();
  const Shape& k = n.input(1)->shape();
  if (x.rank() < 3 || k.rank() != x.rank()) return false;
  return ops::computeWindow(n.attrs(), std::vector<int64_t>(x.dims().begin() + 2, x.dims().end()),
                            std::vector<int64_t>(k.dims().begin() + 2, k.dims().end()), w)
      .isOk();
}

}  // namespace

Expected<bool> explicitPadding(Graph& graph) {
  bool changed = false;
  const std::vector<Node*> nodes = graph.nodes();
  for (Node* n : nodes) {
    const bool nhwc = n->op() == OpKind::DepthwiseConvNhwc;
    if (n->op() != OpKind::Conv && n->op() != OpKind::Im2Col && !nhwc) continue;
    if (!isFloat(n->output(0)->dtype()) || n->output(0)->shape().numel() == 0 || n->input(0)->shape().numel() == 0)
      continue;
    ops::Window w;
    if (!windowOf(*n, &w)) continue;
    bool padded = false;
    for (int i = 0; i < w.rank(); ++i) padded |= w.padBegin[i] != 0 || w.padEnd[i] != 0;
    if (!padded) continue;
    if (nhwc && saturatingProduct(w.kernel) < kMinPaddedNhwcTaps) continue;
    // A conv that stays a window (depthwise) gains from the copy along long unit-stride output rows,
    // whose taps then vectorise without a border, and along short rows (MobileNet's 16, 8, 4 and 2
    // pixels), where the border pieces of the implicit padding are most of the row and leave too
    // few points to vectorise (144 channels of 16 x 16 ran much faster with the copy, the copy included).
    // Long strided rows keep the implicit padding: their partitioned interior vectorises, and a
    // pass over a large input costs more (measured, bench/NOTES.md).
    if (n->op() == OpKind::Conv) {
      const Shape& out = n->output(0)->shape();
      if (out.rank() < 3) continue;
      const bool shortRows = out[out.rank() - 1] < 32;
      if (!shortRows && w.strides[static_cast<size_t>(w.rank() - 1)] != 1) continue;
    }
    // Pad [N, C, spatial...] by [0, 0, begin...] and [0, 0, end...] ([N, spatial..., C]: [0, begin..., 0]).
    const int first = nhwc ? 1 : 2;  // the first spatial dim
    std::vector<int64_t> pads(2 * (static_cast<size_t>(w.rank()) + 2), 0);
    for (int i = 0; i < w.rank(); ++i) {
      pads[first + i] = w.padBegin[i];
      pads[w.rank() + 2 + first + i] = w.padEnd[i];
    }
    Attributes padAttrs;
    padAttrs.set("mode", std::string("constant"));
    padAttrs.set("pads", pads);
    Node* pad =
        graph.insertNodeBefore(n, OpKind::Pad, graph.uniqueName(n->name() + "_pad"), {n->input(0)}, 1, padAttrs);
    NNC_RETURN_IF_ERROR(inferNode(*pad));
    const Shape before = n->output(0)->shape();
    graph.setNodeInput(n, 0, pad->output(0));
    n->attrs().set("pads", std::vector<int64_t>(2 * static_cast<size_t>(w.rank()), 0));
    if (!nhwc) n->attrs().set("auto_pad", std::string("NOTSET"));
    NNC_RETURN_IF_ERROR(inferNode(*n));
    NNC_CHECK(n->output(0)->shape() == before, n->diagPrefix() + "explicit padding changed the output shape");
    changed = true;
  }
  return changed;
}

}  // namespace nnc::passes
