// Channels-last layout (cpu): chains of depthwise-separable convolutions run on [N, spatial..., C]
// data, with conversions only at the chain's edges.
//
// Why channels-last (NHWC) and not a blocked NCHWc: a depthwise Conv vectorises along whatever axis
// is contiguous, and in MobileNet-style networks the images shrink to 8x8 or 4x4 while the channels
// grow to 384-960, so the channel axis is the one worth vectorising; and a 1x1 Conv on channels-last
// data is a plain MatMul, [N*P, C] x [C, M], whose constant B the packed GEMM already packs at compile
// time and whose rows (the positions) it tiles like any other. NCHWc would need its own GEMM operand
// layout and a channel count padded to the block; NHWC needs neither.
//
// 1. Candidates: MaxPools and AveragePools (PoolNhwc), depthwise Convs (one input and one output channel per group, at
// least kMinChannels
//    channels, at most ops::kMaxDepthwiseNhwcTaps taps) and pointwise Convs (1x1, group 1, unit
//    strides, no padding), in f32 or f64, and as a chain's head any other group-1 Conv (a network's
//    stem: its channel-first input is read through Im2Col, its result made channels-last by the
//    GEMM). Candidates linked through elementwise ops form chains; a chain is converted when it holds
//    a depthwise Conv and another candidate, so that a layout change pays for its edge transposes.
//    An isolated depthwise Conv keeps its channel-first kernel.
// 2. Each converted Conv becomes Transpose(to NCHW) . channels-last op . Transpose(to NHWC):
//      depthwise:  DepthwiseConvNhwc(x, W as [k..., C], B)
//      pointwise:  Reshape(MatMul(x as [N*P, C], W as [C, M]), [N, spatial..., M]) + B
//      head:       Reshape(MatMul(Im2Col(x channel-first) as rows, W as [C*K, M]), ...) + B
//      pool:       PoolNhwc(x) {the pool's attributes, mode}
//    (constant weights are reordered by fold-constants).
// 3. The to-NCHW transposes (the pass's, and the model's own) sink: an elementwise op whose inputs are all the same
// transpose (or
//    constants and small tensors, transposed the other way to match) computes on the untransposed
//    data and is transposed after, and so is a Concat of transposes; an input that another user
//    already reads channels-last (the chain's input, added back by a residual) is read so. Where a sunk transpose meets
//    the next Conv's to-NHWC transpose, simplify cancels the pair; those left are the chain's edges.
#include <algorithm>
#include <map>
#include <numeric>
#include <set>

#include "ir/op_registry.h"
#include "ir/ops/window.h"
#include "passes/rewrite.h"
#include "targets/cpu/cpu_passes.h"

namespace nnc::passes {

namespace {

// Below a vector's worth of channels, the channel-first kernel (vectorised along an image row) wins.
constexpr int64_t kMinChannels = 8;
// A non-constant input that is not a transpose is transposed to match when it is this many times
// smaller than the result (a squeeze-and-excitation scale [N, C, 1, 1]), never when it is big.
constexpr int64_t kSmallInputRatio = 8;

enum class Candidate { None, Depthwise, Pointwise, Head, Pool };

// A MaxPool (without Indices) or AveragePool over 8+ channels whose window unrolls.
bool isPoolCandidate(const Node& n) {
  if ((n.op() != OpKind::MaxPool && n.op() != OpKind::AveragePool) || n.numOutputs() != 1) return false;
  const DType t = n.output(0)->dtype();
  const Shape& x = n.input(0)->shape();
  if ((t != DType::F32 && t != DType::F64) || x.rank() < 3 || x[1] < kMinChannels || x.numel() == 0 ||
      n.output(0)->shape().numel() == 0)
    return false;
  int64_t taps = 1;
  for (int64_t k : n.attrs().getInts("kernel_shape")) taps *= k;
  return taps >= 1 && taps <= ops::kMaxDepthwiseNhwcTaps;
}

Candidate candidateOf(const Node& n) {
  if (isPoolCandidate(n)) return Candidate::Pool;
  if (n.op() != OpKind::Conv || n.numOutputs() != 1 || !n.input(0) || !n.input(1)) return Candidate::None;
  const DType t = n.output(0)->dtype();
  const Shape& x = n.input(0)->shape();
  const Shape& w = n.input(1)->shape();
  if ((t != DType::F32 && t != DType::F64) || x.rank() < 3 || x.numel() == 0 || w.numel() == 0 ||
      n.output(0)->shape().numel() == 0)
    return Candidate::None;
  const int64_t group = n.attrs().getInt("group");
  if (group == 1) return ops::isPointwiseConv(n) ? Candidate::Pointwise : Candidate::Head;
  int64_t taps = 1;
  for (int i = 2; i < w.rank(); ++i) taps *= w[i];
  if (group == x[1] && w[0] == x[1] && w[1] == 1 && x[1] >= kMinChannels && taps <= ops::kMaxDepthwiseNhwcTaps)
    return Candidate::Depthwise;
  return Candidate::None;
}

bool isLayoutFree(const Node& n) { return opFusionClass(n.op()) == FusionClass::Elementwise && n.numOutputs() == 1; }

// [0, 2, ..., r-1, 1] (NCHW -> NHWC) and its inverse [0, r-1, 1, ..., r-2].
std::vector<int64_t> toChannelsLast(int rank) {
  std::vector<int64_t> p = {0};
  for (int i = 2; i < rank; ++i) p.push_back(i);
  p.push_back(1);
  return p;
}

std::vector<int64_t> inverse(const std::vector<int64_t>& p) {
  std::vector<int64_t> q(p.size());
  for (size_t i = 0; i < p.size(); ++i) q[static_cast<size_t>(p[i])] = static_cast<int64_t>(i);
  return q;
}

class Rewriter {
 public:
  explicit Rewriter(Graph& graph) : graph_(graph) {}

  // A Conv or pool -> Transpose(to NCHW) . channels-last op . Transpose(to NHWC), per the file comment.
  Status convert(Node* node, Candidate kind) {
    Value* x = node->input(0);
    Value* w = node->input(1);
    Value* b = node->input(2);
    const int rank = x->shape().rank();
    const std::string base = node->name();
    Value* yl = nullptr;
    Value* xl = nullptr;
    if (kind != Candidate::Head) {
      NNC_ASSIGN_OR_RETURN(xl, transposeBefore(graph_, node, x, toChannelsLast(rank), base + "_nhwc"));
    }
    if (kind == Candidate::Pool) {
      Attributes attrs = node->attrs();
      attrs.set("mode", std::string(node->op() == OpKind::MaxPool ? "max" : "average"));
      NNC_ASSIGN_OR_RETURN(yl, insertBefore(graph_, node, OpKind::PoolNhwc, base + "_pool", {xl}, std::move(attrs)));
    } else if (kind == Candidate::Depthwise) {
      // W [C, 1, k...] -> [k..., C].
      const Shape& ws = w->shape();
      std::vector<int64_t> kc(ws.dims().begin() + 2, ws.dims().end());
      kc.insert(kc.begin(), ws[0]);
      NNC_ASSIGN_OR_RETURN(Value * w3, reshapeBefore(graph_, node, w, kc, base + "_weights"));
      std::vector<int64_t> perm(static_cast<size_t>(rank) - 1);
      std::iota(perm.begin(), perm.end(), 1);
      perm.back() = 0;  // [1, ..., S, 0]
      NNC_ASSIGN_OR_RETURN(Value * wl, transposeBefore(graph_, node, w3, perm, base + "_weights_nhwc"));
      Attributes attrs;
      for (const char* name : {"strides", "dilations"})
        if (node->attrs().has(name)) attrs.set(name, node->attrs().getInts(name));
      ops::Window win;
      NNC_RETURN_IF_ERROR(ops::computeWindow(node->attrs(), ops::spatialDims(x->shape()), ops::spatialDims(ws), &win));
      std::vector<int64_t> pads = win.padBegin;
      pads.insert(pads.end(), win.padEnd.begin(), win.padEnd.end());
      attrs.set("pads", pads);
      std::vector<Value*> ins = {xl, wl};
      if (b) ins.push_back(b);
      NNC_ASSIGN_OR_RETURN(
          yl, insertBefore(graph_, node, OpKind::DepthwiseConvNhwc, base + "_depthwise", ins, std::move(attrs)));
    } else {
      // y[n, p..., m] = sum over j of rows[n, p..., j] * W[m, j], the positions of every image as rows:
      // a 1x1 conv's channels-last input (j = c), or a head's patches of its channel-first input as
      // rows, one per output position (j = c*K + k).
      Value* rows = nullptr;
      const Shape& ws = w->shape();
      const int64_t outChannels = ws[0], products = ws.numel() / ws[0];
      if (kind == Candidate::Head) {
        Attributes attrs;
        for (const char* name : {"strides", "pads", "dilations"})
          if (node->attrs().has(name)) attrs.set(name, node->attrs().getInts(name));
        if (node->attrs().has("auto_pad")) attrs.set("auto_pad", node->attrs().getString("auto_pad"));
        attrs.set("kernel_shape", ops::spatialDims(ws));
        attrs.set("patch_rows", int64_t{1});
        NNC_ASSIGN_OR_RETURN(rows, insertBefore(graph_, node, OpKind::Im2Col, base + "_im2col", {x}, std::move(attrs)));
      } else {
        NNC_ASSIGN_OR_RETURN(
            rows, reshapeBefore(graph_, node, xl, {xl->shape().numel() / products, products}, base + "_rows"));
      }
      NNC_ASSIGN_OR_RETURN(Value * wm, reshapeBefore(graph_, node, w, {outChannels, products}, base + "_weights"));
      NNC_ASSIGN_OR_RETURN(Value * wt, transposeBefore(graph_, node, wm, {1, 0}, base + "_weights_t"));
      NNC_ASSIGN_OR_RETURN(Value * prod, insertBefore(graph_, node, OpKind::MatMul, base + "_gemm", {rows, wt}));
      std::vector<int64_t> dims = node->output(0)->shape().dims();  // [N, M, out...] -> [N, out..., M]
      dims.erase(dims.begin() + 1);
      dims.push_back(outChannels);
      NNC_ASSIGN_OR_RETURN(yl, reshapeBefore(graph_, node, prod, dims, base + "_out"));
      if (b) {
        NNC_ASSIGN_OR_RETURN(yl, insertBefore(graph_, node, OpKind::Add, base + "_add_bias", {yl, b}));
      }
    }
    NNC_ASSIGN_OR_RETURN(Value * y, transposeBefore(graph_, node, yl, inverse(toChannelsLast(rank)), base + "_nchw"));
    sinkable_.insert(y->producer());
    NNC_CHECK(y->shape() == node->output(0)->shape() && y->dtype() == node->output(0)->dtype(),
              node->diagPrefix() + "channels-last changed the result's type");
    graph_.replaceAllUsesWith(node->output(0), y);
    graph_.eraseNode(node);
    return Status::ok();
  }

  // A transpose the model itself wrote back to channel-first (NHWC -> NCHW) sinks like the pass's own.
  void markSinkable(const Node* transpose) { sinkable_.insert(transpose); }

  // Sinks the transposes feeding `n` below it when the file comment's rule allows; true if it did.
  Expected<bool> sink(Node* n) {
    Value* y = n->output(0);
    const int rank = y->shape().rank();
    auto ours = [&](Value* v) { return v && v->producer() && sinkable_.count(v->producer()); };
    const std::vector<int64_t>* perm = nullptr;
    for (Value* v : n->inputs())
      if (ours(v) && v->shape().rank() == rank) {
        perm = &v->producer()->attrs().getInts("perm");
        break;
      }
    if (!perm) return false;
    const std::vector<int64_t> p = *perm, q = inverse(p);
    auto transposedByP = [&](Value* v) { return ours(v) && v->producer()->attrs().getInts("perm") == p; };
    // A value already transposed to channels-last for another user (the chain's input, read again
    // by a residual Add) is used in that form.
    auto alreadyTransposed = [&](Value* v) -> Value* {
      for (const Use& u : v->users())
        if (u.node->op() == OpKind::Transpose && u.node->attrs().getInts("perm", {}) == q) return u.node->output(0);
      return nullptr;
    };
    const bool concat = n->op() == OpKind::Concat;
    for (Value* v : n->inputs()) {
      if (!v || transposedByP(v) || v->shape().rank() == 0 || (v->shape().rank() == rank && alreadyTransposed(v)))
        continue;
      if (concat || v->shape().rank() > rank) return false;
      if (!v->isConstant() && v->shape().numel() * kSmallInputRatio > y->shape().numel()) return false;
    }
    std::vector<Value*> inputs;
    for (Value* v : n->inputs()) {
      if (!v || v->shape().rank() == 0) {
        inputs.push_back(v);
      } else if (transposedByP(v)) {
        inputs.push_back(v->producer()->input(0));
      } else if (Value* existing = v->shape().rank() == rank ? alreadyTransposed(v) : nullptr) {
        inputs.push_back(existing);
      } else {
        // Broadcast to the result's rank, then the inverse transpose (folded when constant).
        std::vector<int64_t> dims(static_cast<size_t>(rank - v->shape().rank()), 1);
        dims.insert(dims.end(), v->shape().dims().begin(), v->shape().dims().end());
        NNC_ASSIGN_OR_RETURN(Value * full, reshapeBefore(graph_, n, v, dims, v->name() + "_rank"));
        NNC_ASSIGN_OR_RETURN(Value * moved, transposeBefore(graph_, n, full, q, v->name() + "_nhwc"));
        inputs.push_back(moved);
      }
    }
    Attributes attrs = n->attrs();
    if (concat) {
      int64_t axis = attrs.getInt("axis");
      if (axis < 0) axis += rank;
      attrs.set("axis", p[static_cast<size_t>(axis)]);  // the result's axis a is the input's axis p[a]
    }
    NNC_ASSIGN_OR_RETURN(Value * inner, insertBefore(graph_, n, n->op(), n->name(), inputs, std::move(attrs)));
    NNC_ASSIGN_OR_RETURN(Value * out, transposeBefore(graph_, n, inner, p, n->name() + "_nchw"));
    sinkable_.insert(out->producer());
    NNC_CHECK(out->shape() == y->shape() && out->dtype() == y->dtype(),
              n->diagPrefix() + "channels-last changed the result's type");
    graph_.replaceAllUsesWith(y, out);
    graph_.eraseNode(n);
    return true;
  }

 private:
  Graph& graph_;
  std::set<const Node*> sinkable_;  // the to-NCHW transposes this pass made
};

// Union-find over candidate Convs and the elementwise ops between them.
class Chains {
 public:
  explicit Chains(const std::vector<Node*>& nodes) {
    for (size_t i = 0; i < nodes.size(); ++i) index_[nodes[i]] = i;
    parent_.resize(nodes.size());
    std::iota(parent_.begin(), parent_.end(), size_t{0});
  }
  size_t find(size_t i) {
    while (parent_[i] != i) i = parent_[i] = parent_[parent_[i]];
    return i;
  }
  void link(const Node* a, const Node* b) { parent_[find(index_.at(a))] = find(index_.at(b)); }
  size_t of(const Node* n) { return find(index_.at(n)); }

 private:
  std::map<const Node*, size_t> index_;
  std::vector<size_t> parent_;
};

}  // namespace

Expected<bool> channelsLast(Graph& graph) {
  const std::vector<Node*> nodes = graph.nodes();
  std::map<const Node*, Candidate> candidates;
  for (Node* n : nodes)
    if (Candidate c = candidateOf(*n); c != Candidate::None) candidates[n] = c;
  if (candidates.empty()) return false;

  Chains chains(nodes);
  auto linkable = [&](const Node* n) { return candidates.count(n) || isLayoutFree(*n); };
  for (Node* n : nodes) {
    if (!linkable(n)) continue;
    // A Conv links to the chain of its input, a head to none (its input stays channel-first).
    const auto it = candidates.find(n);
    const int linkedInputs = it == candidates.end() ? n->numInputs() : it->second == Candidate::Head ? 0 : 1;
    for (int i = 0; i < linkedInputs; ++i) {
      Node* p = n->input(i) ? n->input(i)->producer() : nullptr;
      if (p && linkable(p)) chains.link(n, p);
    }
  }
  std::map<size_t, std::pair<int, int>> perChain;  // chain -> (depthwise, all) candidates
  for (const auto& [n, kind] : candidates) {
    auto& [depthwise, all] = perChain[chains.of(n)];
    depthwise += kind == Candidate::Depthwise;
    ++all;
  }

  Rewriter rewriter(graph);
  bool changed = false;
  for (Node* n : nodes) {
    auto it = candidates.find(n);
    if (it == candidates.end()) continue;
    const auto& [depthwise, all] = perChain[chains.of(n)];
    if (depthwise == 0 || all < 2) continue;
    NNC_RETURN_IF_ERROR(rewriter.convert(n, it->second));
    changed = true;
  }
  if (!changed) return false;
  // The model's own channel-first transposes sink too: ConvNeXt permutes each block's branch back to
  // NCHW before its layer scale and residual Add; sunk, the residual stream stays channels-last, and the
  // next block's depthwise conv reads it without a transpose (read through one, at a stride of H * W
  // floats per channel, its kernel ran at 0.4-0.8 GB/s).
  for (Node* n : graph.nodes()) {
    if (n->op() != OpKind::Transpose || !n->input(0) || n->input(0)->shape().rank() < 3) continue;
    const int rank = n->input(0)->shape().rank();
    if (n->attrs().getInts("perm", {}) == inverse(toChannelsLast(rank))) rewriter.markSinkable(n);
  }
  for (Node* n : graph.nodes()) {
    if (!isLayoutFree(*n) && n->op() != OpKind::Concat) continue;
    NNC_RETURN_IF_ERROR(rewriter.sink(n).status());
  }
  return true;
}

}  // namespace nnc::passes
