// Op definitions for the neural-network anchors of ir/ops.def — MatMul, Einsum, Conv,
// ConvTranspose, DeformConv and the pools — and the opaque TopK. Each anchor lowers to one kernel: the outer
// loop runs over the output, one reduction folds the contraction or window, and the value at the
// output index is returned for the lowering to store (with any fused epilogue applied).
// Semantics follow the newest ONNX opset.
#include <algorithm>
#include <functional>
#include <limits>
#include <optional>
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
using ops::ceilDiv;
using ops::computeWindow;
using ops::floorDiv;
using ops::listStr;
using ops::readAutoPad;
using ops::readSpatialInts;
using ops::spatialDims;
using ops::tapCount;
using ops::Taps;
using ops::Window;
using ops::windowAttrs;
using ops::windowTaps;

// --- small helpers

std::string typeStr(DType t) { return std::string(dtypeName(t)); }

Status requireFloat(const InferContext& ctx, int input) {
  if (isFloat(ctx.inType(input))) return Status::ok();
  return ctx.error("input " + std::to_string(input) + " has type " + typeStr(ctx.inType(input)) +
                   ", expected a float type");
}

// Output index = input index for every dim (the outer vars as the AnchorOutput index).
std::vector<AnchorOutput> single(const std::vector<ExprId>& index, ExprId value) {
  return {AnchorOutput{index, value, /*perInner=*/false}};
}

// ================================================================================================
// MatMul (numpy semantics: a 1-D operand is promoted to a matrix and the added dim removed again;
// batch dims broadcast).

struct MatMulDims {
  Shape batch;           // broadcast batch shape
  Shape aBatch, bBatch;  // each operand's own batch dims
  int64_t m = 1, k = 1, n = 1;
  bool aVector = false, bVector = false;
  Shape out;
};

Status matmulDims(const Shape& a, const Shape& b, MatMulDims* d) {
  if (a.rank() == 0 || b.rank() == 0)
    return Status::error(std::string("input ") + (a.rank() == 0 ? "A" : "B") + " is a scalar; MatMul needs rank >= 1");
  d->aVector = a.rank() == 1;
  d->bVector = b.rank() == 1;
  d->m = d->aVector ? 1 : a[a.rank() - 2];
  d->k = a[a.rank() - 1];
  const int64_t kb = d->bVector ? b[0] : b[b.rank() - 2];
  d->n = d->bVector ? 1 : b[b.rank() - 1];
  if (d->k != kb)
    return Status::error("inner dimensions differ: A is " + a.str() + ", B is " + b.str() + " (" +
                         std::to_string(d->k) + " vs " + std::to_string(kb) + ")");
  d->aBatch = Shape(std::vector<int64_t>(a.dims().begin(), a.dims().end() - std::min(a.rank(), 2)));
  d->bBatch = Shape(std::vector<int64_t>(b.dims().begin(), b.dims().end() - std::min(b.rank(), 2)));
  std::optional<Shape> batch = broadcastShapes(d->aBatch, d->bBatch);
  if (!batch)
    return Status::error("batch dimensions " + d->aBatch.str() + " and " + d->bBatch.str() + " do not broadcast");
  d->batch = *batch;
  std::vector<int64_t> out = d->batch.dims();
  if (!d->aVector) out.push_back(d->m);
  if (!d->bVector) out.push_back(d->n);
  d->out = Shape(out);
  return Status::ok();
}

Status inferMatMul(InferContext& ctx) {
  NNC_RETURN_IF_ERROR(ops::requireSameType(ctx));
  const DType t = ctx.inType(0);
  if (!isFloat(t) && !isInteger(t))
    return ctx.error("input 0 has type " + typeStr(t) + ", expected a float or integer type");
  MatMulDims d;
  if (Status s = matmulDims(ctx.inShape(0), ctx.inShape(1), &d); !s) return ctx.error(s.message());
  ctx.setOutput(0, t, d.out);
  return Status::ok();
}

std::vector<AnchorOutput> lowerMatMul(LowerContext& ctx) {
  KernelBuilder& kb = ctx.kb;
  MatMulDims d;
  NNC_CHECK(matmulDims(ctx.inShape(0), ctx.inShape(1), &d).isOk(), "MatMul lowered without inference");
  std::vector<ExprId> out = kb.setOuter(d.out.dims());
  const int nb = d.batch.rank();
  std::vector<ExprId> batch(out.begin(), out.begin() + nb);
  std::vector<ExprId> kv = kb.reductionVars({d.k});
  std::vector<ExprId> ai = ops::broadcastIndex(kb, batch, d.aBatch);
  std::vector<ExprId> bi = ops::broadcastIndex(kb, batch, d.bBatch);
  if (!d.aVector) ai.push_back(out[nb]);
  ai.push_back(kv[0]);
  bi.push_back(kv[0]);
  if (!d.bVector) bi.push_back(out.back());
  ExprId body = kb.mul(ctx.inputs[0](ai), ctx.inputs[1](bi));
  return single(out, kb.reduce(ReduceOp::Sum, kv, body));
}

// MatMul as one batched GEMM call: f32 or f64, and each operand's batch dims either all 1 (the same
// matrix for every batch, stride 0) or equal to the output's (contiguous matrices). A batch that only
// partly broadcasts ([2, 1] against [1, 3]) has no single stride: the MatMul stays a kernel.
std::optional<GemmShape> matmulAsGemm(const Node& node) {
  const DType t = node.output(0)->dtype();
  if (t != DType::F32 && t != DType::F64) return std::nullopt;
  MatMulDims d;
  if (!matmulDims(node.input(0)->shape(), node.input(1)->shape(), &d).isOk()) return std::nullopt;
  if (d.m < 1 || d.n < 1 || d.k < 1 || d.batch.numel() < 1) return std::nullopt;
  GemmShape p;
  p.dtype = t;
  p.batch = d.batch.numel();
  p.m = d.m;
  p.n = d.n;
  p.k = d.k;
  auto stride = [&](const Shape& own, int64_t matrix) -> std::optional<int64_t> {
    if (own.numel() == 1) return 0;
    std::vector<int64_t> padded(static_cast<size_t>(d.batch.rank() - own.rank()), 1);
    padded.insert(padded.end(), own.dims().begin(), own.dims().end());
    if (Shape(padded) != d.batch) return std::nullopt;
    return matrix;
  };
  std::optional<int64_t> sa = stride(d.aBatch, d.m * d.k), sb = stride(d.bBatch, d.k * d.n);
  if (!sa || !sb) return std::nullopt;
  p.strideA = *sa;
  p.strideB = *sb;
  p.strideC = d.m * d.n;
  return p;
}

// ================================================================================================
// Einsum. Labels are letters (ids 0..51) and ellipsis dims (ids 52.., right-aligned across
// operands and broadcast numpy-style).

constexpr int kEllipsisLabel = 52;

struct EinsumSpec {
  std::vector<std::vector<int>> operandLabels;  // per operand, per dim
  std::vector<int> outputLabels;
  std::vector<int64_t> labelSize;  // indexed by label id; -1 when unused
  std::vector<int> reducedLabels;
};

int letterId(char c) { return c >= 'a' && c <= 'z' ? c - 'a' : c >= 'A' && c <= 'Z' ? 26 + (c - 'A') : -1; }
char letterOf(int id) { return static_cast<char>(id < 26 ? 'a' + id : 'A' + (id - 26)); }

// One term as tokens: letter ids, and -1 for an ellipsis.
Status parseTerm(const std::string& term, std::vector<int>* tokens) {
  bool sawEllipsis = false;
  for (size_t i = 0; i < term.size(); ++i) {
    if (term[i] == '.') {
      if (term.compare(i, 3, "...") != 0) return Status::error("a '.' outside an ellipsis in term '" + term + "'");
      if (sawEllipsis) return Status::error("term '" + term + "' has more than one ellipsis");
      sawEllipsis = true;
      tokens->push_back(-1);
      i += 2;
      continue;
    }
    int id = letterId(term[i]);
    if (id < 0) return Status::error(std::string("invalid character '") + term[i] + "' in term '" + term + "'");
    tokens->push_back(id);
  }
  return Status::ok();
}

Status parseEinsum(std::string equation, const std::vector<Shape>& shapes, EinsumSpec* spec) {
  equation.erase(std::remove(equation.begin(), equation.end(), ' '), equation.end());
  const size_t arrow = equation.find("->");
  const std::string lhs = equation.substr(0, arrow);
  std::vector<std::string> terms;
  for (size_t start = 0;;) {
    size_t comma = lhs.find(',', start);
    terms.push_back(lhs.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  if (terms.size() != shapes.size())
    return Status::error("equation has " + std::to_string(terms.size()) + " input terms but the node has " +
                         std::to_string(shapes.size()) + " inputs");

  std::vector<std::vector<int>> tokens(terms.size());
  int ellipsisRank = 0;
  for (size_t t = 0; t < terms.size(); ++t) {
    NNC_RETURN_IF_ERROR(parseTerm(terms[t], &tokens[t]));
    const bool hasEllipsis = std::count(tokens[t].begin(), tokens[t].end(), -1) > 0;
    const int letters = static_cast<int>(tokens[t].size()) - (hasEllipsis ? 1 : 0);
    const int rank = shapes[t].rank();
    if (hasEllipsis ? rank < letters : rank != letters)
      return Status::error("term '" + terms[t] + "' has " + std::to_string(letters) + " labels but input " +
                           std::to_string(t) + " has rank " + std::to_string(rank));
    if (hasEllipsis) {
      ellipsisRank = std::max(ellipsisRank, rank - letters);
    }
  }

  spec->labelSize.assign(kEllipsisLabel + ellipsisRank, -1);
  spec->operandLabels.assign(terms.size(), {});
  std::vector<int> letterCount(kEllipsisLabel, 0);
  for (size_t t = 0; t < terms.size(); ++t) {
    const Shape& shape = shapes[t];
    const int letters =
        static_cast<int>(std::count_if(tokens[t].begin(), tokens[t].end(), [](int x) { return x >= 0; }));
    const int ellDims = shape.rank() - letters;
    std::vector<int>& labels = spec->operandLabels[t];
    for (int tok : tokens[t]) {
      if (tok == -1) {
        for (int j = 0; j < ellDims; ++j) labels.push_back(kEllipsisLabel + ellipsisRank - ellDims + j);
      } else {
        labels.push_back(tok);
        ++letterCount[tok];
      }
    }
    for (int dim = 0; dim < shape.rank(); ++dim) {
      const int label = labels[dim];
      int64_t& size = spec->labelSize[label];
      const int64_t s = shape[dim];
      if (size == -1 || (label >= kEllipsisLabel && size == 1)) {
        size = s;
      } else if (s != size && !(label >= kEllipsisLabel && s == 1)) {
        if (label >= kEllipsisLabel)
          return Status::error("ellipsis dimensions of input " + std::to_string(t) + " " + shape.str() +
                               " do not broadcast with the other inputs");
        return Status::error(std::string("label '") + letterOf(label) + "' has size " + std::to_string(size) + " and " +
                             std::to_string(s) + " (input " + std::to_string(t) + ")");
      }
    }
  }

  if (arrow == std::string::npos) {
    for (int j = 0; j < ellipsisRank; ++j) spec->outputLabels.push_back(kEllipsisLabel + j);
    // Letters appearing exactly once, in alphabetical (ASCII) order: uppercase ids sort first.
    std::vector<int> once;
    for (int id = 0; id < kEllipsisLabel; ++id)
      if (letterCount[id] == 1) once.push_back(id);
    std::sort(once.begin(), once.end(), [](int a, int b) { return letterOf(a) < letterOf(b); });
    spec->outputLabels.insert(spec->outputLabels.end(), once.begin(), once.end());
  } else {
    const std::string rhs = equation.substr(arrow + 2);
    std::vector<int> out;
    NNC_RETURN_IF_ERROR(parseTerm(rhs, &out));
    for (int tok : out) {
      if (tok == -1) {
        for (int j = 0; j < ellipsisRank; ++j) spec->outputLabels.push_back(kEllipsisLabel + j);
        continue;
      }
      if (spec->labelSize[tok] < 0)
        return Status::error(std::string("output label '") + letterOf(tok) + "' does not appear in any input");
      if (std::count(spec->outputLabels.begin(), spec->outputLabels.end(), tok) > 0)
        return Status::error(std::string("output label '") + letterOf(tok) + "' appears twice");
      spec->outputLabels.push_back(tok);
    }
  }
  for (int id = 0; id < static_cast<int>(spec->labelSize.size()); ++id) {
    if (spec->labelSize[id] < 0) continue;
    if (std::find(spec->outputLabels.begin(), spec->outputLabels.end(), id) == spec->outputLabels.end())
      spec->reducedLabels.push_back(id);
  }
  return Status::ok();
}

std::vector<Shape> inputShapes(const Node& node) {
  std::vector<Shape> shapes;
  for (const Value* v : node.inputs()) shapes.push_back(v->shape());
  return shapes;
}

Status inferEinsum(InferContext& ctx) {
  NNC_RETURN_IF_ERROR(ops::requireSameType(ctx));
  const DType t = ctx.inType(0);
  if (!isFloat(t) && !isInteger(t))
    return ctx.error("input 0 has type " + typeStr(t) + ", expected a float or integer type");
  for (int i = 0; i < ctx.numInputs(); ++i)
    if (!ctx.hasInput(i)) return ctx.error("input " + std::to_string(i) + " is missing");
  EinsumSpec spec;
  if (Status s = parseEinsum(ctx.attrs().getString("equation"), inputShapes(ctx.node()), &spec); !s)
    return ctx.error("equation '" + ctx.attrs().getString("equation") + "': " + s.message());
  std::vector<int64_t> out;
  for (int label : spec.outputLabels) out.push_back(spec.labelSize[label]);
  ctx.setOutput(0, t, Shape(out));
  return Status::ok();
}

std::vector<AnchorOutput> lowerEinsum(LowerContext& ctx) {
  KernelBuilder& kb = ctx.kb;
  EinsumSpec spec;
  NNC_CHECK(parseEinsum(ctx.attrs().getString("equation"), inputShapes(ctx.node), &spec).isOk(),
            "Einsum lowered without inference");
  std::vector<ExprId> out = kb.setOuter(ctx.outShape(0).dims());
  std::vector<ExprId> var(spec.labelSize.size(), kir::kNoExpr);
  for (size_t i = 0; i < out.size(); ++i) var[spec.outputLabels[i]] = out[i];
  std::vector<int64_t> reducedExtents;
  for (int label : spec.reducedLabels) reducedExtents.push_back(spec.labelSize[label]);
  std::vector<ExprId> rv;
  if (!spec.reducedLabels.empty()) {
    rv = kb.reductionVars(reducedExtents);
    for (size_t i = 0; i < rv.size(); ++i) var[spec.reducedLabels[i]] = rv[i];
  }
  ExprId product = kir::kNoExpr;
  for (size_t t = 0; t < spec.operandLabels.size(); ++t) {
    const Shape& shape = ctx.inShape(static_cast<int>(t));
    std::vector<ExprId> index;
    for (int dim = 0; dim < shape.rank(); ++dim) {
      const int label = spec.operandLabels[t][dim];
      // A size-1 ellipsis dim broadcast against a larger one reads index 0.
      index.push_back(shape[dim] == 1 ? kb.i64(0) : var[label]);
    }
    ExprId v = ctx.inputs[t](index);
    product = product == kir::kNoExpr ? v : kb.mul(product, v);
  }
  if (spec.reducedLabels.empty()) return single(out, product);
  return single(out, kb.reduce(ReduceOp::Sum, rv, product));
}

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
  NNC_RETURN_IF_ERROR(ops::requireSameType(ctx));
  NNC_RETURN_IF_ERROR(requireFloat(ctx, 0));
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
  return single(out, value);
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

// The smallest value of expression type `t`: what a padded tap contributes to a max.
ExprId lowestValue(KernelBuilder& kb, DType t) {
  if (isFloat(t)) return kb.constant(t, -std::numeric_limits<double>::infinity());
  if (isUnsignedInt(t)) return kb.constantInt(t, 0);
  switch (t) {
    case DType::I8: return kb.constantInt(t, std::numeric_limits<int8_t>::min());
    case DType::I16: return kb.constantInt(t, std::numeric_limits<int16_t>::min());
    case DType::I32: return kb.constantInt(t, std::numeric_limits<int32_t>::min());
    default: return kb.constantInt(t, std::numeric_limits<int64_t>::min());
  }
}

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

// A channels-last window's taps are unrolled: 1 to ops::kMaxDepthwiseNhwcTaps of them.
Status checkUnrolledTaps(const std::vector<int64_t>& kernel) {
  const int64_t taps = saturatingProduct(kernel);
  if (taps < 1 || taps > ops::kMaxDepthwiseNhwcTaps)
    return Status::error("the kernel " + listStr(kernel) + " has " + std::to_string(taps) + " taps, expected 1 to " +
                         std::to_string(ops::kMaxDepthwiseNhwcTaps));
  return Status::ok();
}

// [N, out..., C] of a channels-last window over x [N, spatial..., C].
Shape nhwcWindowOutput(const Shape& x, const Window& w) {
  std::vector<int64_t> out = {x[0]};
  out.insert(out.end(), w.out.begin(), w.out.end());
  out.push_back(x[x.rank() - 1]);
  return Shape(out);
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

Status inferDepthwiseConvNhwc(InferContext& ctx) {
  NNC_RETURN_IF_ERROR(ops::requireSameType(ctx));
  NNC_RETURN_IF_ERROR(requireFloat(ctx, 0));
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
  return single(out, sum);
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
  NNC_RETURN_IF_ERROR(requireFloat(ctx, 0));
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
  if (isMax) return single(out, value);
  // The divisor as AveragePool's (see lowerPool).
  const bool includePad = ctx.attrs().getInt("count_include_pad") != 0;
  ExprId count = kb.i64(1);
  for (int i = 0; i < w.rank(); ++i)
    count = kb.mul(count,
                   includePad ? kb.i64(w.kernel[i]) : tapCount(kb, w, i, out[static_cast<size_t>(i) + 1], 0, w.in[i]));
  return single(out, kb.div(value, kb.cast(kb.dtypeOf(value), count)));
}

// ================================================================================================
// ConvTranspose: Y[n, m, o...] = B[m] + sum over (c, k...) of X[n, g*C/group + c, i...] *
// W[g*C/group + c, m % (M/group), k...] where o + pb - k*d = i*s with 0 <= i < in.

using ops::ConvTransposeGeometry;

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
  NNC_RETURN_IF_ERROR(ops::requireSameType(ctx));
  NNC_RETURN_IF_ERROR(requireFloat(ctx, 0));
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
  return single(out, value);
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
  d.infer = [](InferContext& ctx) -> Status {
    NNC_RETURN_IF_ERROR(requireFloat(ctx, 0));
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
    return single(out, value);
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
  NNC_RETURN_IF_ERROR(ops::requireSameType(ctx));
  NNC_RETURN_IF_ERROR(requireFloat(ctx, 0));
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
  return single(out, value);
}

// ================================================================================================
// Pools.

enum class PoolKind { Max, Average, Lp };

std::function<Status(InferContext&)> inferPool(PoolKind kind) {
  return [kind](InferContext& ctx) -> Status {
    const DType t = ctx.inType(0);
    if (kind == PoolKind::Max ? !(isFloat(t) || t == DType::I8 || t == DType::U8) : !isFloat(t))
      return ctx.error("input 0 has type " + typeStr(t) + ", expected a float type" +
                       (kind == PoolKind::Max ? " or i8/u8" : ""));
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
    if (kind == PoolKind::Lp) return single(out, lpRoot(kb, kb.reduce(ReduceOp::Sum, rv, b), ctx.attrs().getInt("p")));
    if (kind == PoolKind::Average) {
      // count_include_pad=1 divides by the whole kernel, also for a ceil_mode window that runs past
      // the end padding (the ONNX reference and backend test data; PyTorch clips it there).
      const bool includePad = ctx.attrs().getInt("count_include_pad") != 0;
      ExprId count = kb.i64(1);
      for (int i = 0; i < w.rank(); ++i)
        count = kb.mul(count, includePad ? kb.i64(w.kernel[i]) : tapCount(kb, w, i, o[i], 0, w.in[i]));
      ExprId sum = kb.reduce(ReduceOp::Sum, rv, b);
      kb.unrollWindow(sum);
      return single(out, kb.div(sum, kb.cast(kb.dtypeOf(sum), count)));
    }
    const ExprId max = kb.reduce(ReduceOp::Max, rv, b);
    kb.unrollWindow(max);
    std::vector<AnchorOutput> result = single(out, max);
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
    NNC_RETURN_IF_ERROR(requireFloat(ctx, 0));
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
    if (kind == PoolKind::Max) return single(out, kb.reduce(ReduceOp::Max, rv, v));
    if (kind == PoolKind::Lp) {
      const int64_t p = ctx.attrs().getInt("p");
      return single(out, lpRoot(kb, kb.reduce(ReduceOp::Sum, rv, lpTerm(kb, v, p)), p));
    }
    const int64_t count = saturatingProduct(spatial);
    ExprId sum = kb.reduce(ReduceOp::Sum, rv, v);
    return single(out, kb.div(sum, kb.constant(kb.dtypeOf(sum), static_cast<double>(count))));
  };
}

// ================================================================================================
// TopK (opaque: runs builtins/builtin_topk.cpp).

Status inferTopK(InferContext& ctx) {
  const DType t = ctx.inType(0);
  if (!isFloat(t) && !isInteger(t))
    return ctx.error("input 0 has type " + typeStr(t) + ", expected a float or integer type");
  if (!ctx.attrs().has("k"))
    return ctx.error("input K must be a compile-time constant (bind it with --bind NAME=FILE.pb)");
  const Shape& x = ctx.inShape(0);
  if (x.rank() == 0) return ctx.error("input X is a scalar; TopK needs rank >= 1");
  NNC_ASSIGN_OR_RETURN(int axis, ops::checkAxis(ctx, ctx.attrs().getInt("axis"), x.rank()));
  const int64_t k = ctx.attrs().getInt("k");
  if (k < 0) return ctx.error("k must be non-negative, got " + std::to_string(k));
  if (k > x[axis])
    return ctx.error("k = " + std::to_string(k) + " is larger than axis " + std::to_string(axis) + " of size " +
                     std::to_string(x[axis]));
  Shape out = x;
  out[axis] = k;
  ctx.setOutput(0, t, out);
  ctx.setOutput(1, DType::I64, out);
  return Status::ok();
}

// Params: dtype (ONNX numbering), rank, dims..., axis, k, largest, sorted, number of input slots.
std::vector<int64_t> encodeTopK(const Node& node) {
  const Shape& x = node.input(0)->shape();
  std::vector<int64_t> p = {dtypeToOnnx(node.input(0)->dtype()), x.rank()};
  p.insert(p.end(), x.dims().begin(), x.dims().end());
  std::optional<int> axis = normalizeAxis(node.attrs().getInt("axis"), x.rank());
  NNC_CHECK(axis.has_value(), "TopK encoded without inference");
  p.push_back(*axis);
  p.push_back(node.attrs().getInt("k"));
  p.push_back(node.attrs().getInt("largest") != 0 ? 1 : 0);
  p.push_back(node.attrs().getInt("sorted") != 0 ? 1 : 0);
  p.push_back(node.numInputs());
  return p;
}

// ================================================================================================
// Attribute schemas.

std::vector<AttrSpec> poolAttrs(std::vector<AttrSpec> extra) {
  std::vector<AttrSpec> a = windowAttrs();
  a.push_back(ops::attrInt("ceil_mode", 0));
  a.push_back(ops::requiredAttr("kernel_shape", AttrKind::Ints));
  a.insert(a.end(), extra.begin(), extra.end());
  return a;
}

OpDef anchor(OpKind kind, int minIn, int maxIn, std::vector<AttrSpec> attrs, std::function<Status(InferContext&)> infer,
             std::function<std::vector<AnchorOutput>(LowerContext&)> lower) {
  OpDef d;
  d.kind = kind;
  d.minInputs = minIn;
  d.maxInputs = maxIn;
  d.attrs = std::move(attrs);
  d.infer = std::move(infer);
  d.lowerAnchor = std::move(lower);
  return d;
}

OpDef rereading(OpDef d) {
  d.rereadsInputs = true;
  return d;
}

}  // namespace

Status ops::resolveConvTranspose(const Node& node, ConvTransposeGeometry* g) { return convTransposeGeometry(node, g); }

void defineNnOps(OpRegistry& r) {
  OpDef matmul = rereading(anchor(OpKind::MatMul, 2, 2, {}, inferMatMul, lowerMatMul));
  matmul.asGemm = matmulAsGemm;
  r.define(matmul);
  r.define(rereading(
      anchor(OpKind::Einsum, 1, 64, {ops::requiredAttr("equation", AttrKind::String)}, inferEinsum, lowerEinsum)));

  std::vector<AttrSpec> convAttrs = windowAttrs();
  convAttrs.push_back(ops::attrInt("group", 1));
  convAttrs.push_back(ops::optionalAttr("kernel_shape", AttrKind::Ints));
  OpDef conv = rereading(anchor(OpKind::Conv, 2, 3, convAttrs, inferConv, lowerConv));
  conv.keepsPadInput = true;
  r.define(conv);
  r.define(im2colDef());
  OpDef depthwise =
      rereading(anchor(OpKind::DepthwiseConvNhwc, 2, 3, windowAttrs(), inferDepthwiseConvNhwc, lowerDepthwiseConvNhwc));
  depthwise.internal = true;
  r.define(depthwise);
  OpDef poolNhwc = rereading(anchor(OpKind::PoolNhwc, 1, 1,
                                    poolAttrs({ops::attrInt("count_include_pad", 0), ops::attrInt("storage_order", 0),
                                               ops::requiredAttr("mode", AttrKind::String)}),
                                    inferPoolNhwc, lowerPoolNhwc));
  poolNhwc.internal = true;
  r.define(poolNhwc);
  convAttrs.push_back(ops::optionalAttr("output_padding", AttrKind::Ints));
  convAttrs.push_back(ops::optionalAttr("output_shape", AttrKind::Ints));
  r.define(rereading(anchor(OpKind::ConvTranspose, 2, 3, convAttrs, inferConvTranspose, lowerConvTranspose)));
  r.define(col2ImDef());  // each column element feeds one output: no re-reading
  r.define(rereading(anchor(OpKind::DeformConv, 3, 5,
                            {ops::optionalAttr("dilations", AttrKind::Ints), ops::attrInt("group", 1),
                             ops::optionalAttr("kernel_shape", AttrKind::Ints), ops::attrInt("offset_group", 1),
                             ops::optionalAttr("pads", AttrKind::Ints), ops::optionalAttr("strides", AttrKind::Ints)},
                            inferDeformConv, lowerDeformConv)));

  OpDef maxPool = rereading(anchor(OpKind::MaxPool, 1, 1, poolAttrs({ops::attrInt("storage_order", 0)}),
                                   inferPool(PoolKind::Max), lowerPool(PoolKind::Max)));
  maxPool.maxOutputs = 2;
  r.define(maxPool);
  r.define(rereading(anchor(OpKind::AveragePool, 1, 1, poolAttrs({ops::attrInt("count_include_pad", 0)}),
                            inferPool(PoolKind::Average), lowerPool(PoolKind::Average))));
  r.define(rereading(anchor(OpKind::LpPool, 1, 1, poolAttrs({ops::attrInt("p", 2)}), inferPool(PoolKind::Lp),
                            lowerPool(PoolKind::Lp))));
  r.define(anchor(OpKind::GlobalMaxPool, 1, 1, {}, inferGlobalPool(), lowerGlobalPool(PoolKind::Max)));
  r.define(anchor(OpKind::GlobalAveragePool, 1, 1, {}, inferGlobalPool(), lowerGlobalPool(PoolKind::Average)));
  r.define(
      anchor(OpKind::GlobalLpPool, 1, 1, {ops::attrInt("p", 2)}, inferGlobalPool(), lowerGlobalPool(PoolKind::Lp)));

  OpDef topk;
  topk.kind = OpKind::TopK;
  topk.minInputs = 1;
  topk.maxInputs = 2;
  topk.minOutputs = topk.maxOutputs = 2;
  topk.attrs = {ops::attrInt("axis", -1), ops::attrInt("largest", 1), ops::attrInt("sorted", 1),
                ops::optionalAttr("k", AttrKind::Int)};
  topk.staticInputs = {StaticInput{1, "k", AttrKind::Int}};
  topk.infer = inferTopK;
  topk.opaque = OpaqueKernel{"nnc_builtin_topk", encodeTopK};
  r.define(topk);
}

}  // namespace nnc
