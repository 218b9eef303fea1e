// Contraction op definitions (anchors): MatMul, with numpy batch semantics, and Einsum with its parser.
// Each lowers to one kernel whose reduction folds the contracted dims.
#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "ir/ops/common.h"

namespace nnc {
namespace {

using kir::ExprId;
using kir::KernelBuilder;
using kir::ReduceOp;
using ops::singleOutput;

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
  const DType t = ctx.inType(0);
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
  return singleOutput(out, kb.reduce(ReduceOp::Sum, kv, body));
}

// MatMul as one batched GEMM call: f32 or f64, and each operand's batch dims either all 1 (the same
// matrix for every batch, stride 0) or equal to the output's (contiguous matrices). A batch that only
// partly broadcasts ([2, 1] against [1, 3]) has no single stride: the MatMul stays a kernel.
std::optional<GemmShape> gemmShapeOf(const Node& node) {
  const DType t = node.output(0)->dtype();
  if (t != DType::F32 && t != DType::F64) return std::nullopt;
  MatMulDims d;
  if (!matmulDims(node.input(0)->shape(), node.input(1)->shape(), &d).isOk()) return std::nullopt;
  if (d.m < 1 || d.n < 1 || d.k < 1 || d.batch.numel() < 1) return std::nullopt;
  GemmShape p;
  p.dtype = t;
  p.operandDtype = node.input(0)->dtype();
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

std::optional<GemmShape> matmulAsGemm(const Node& node) { return gemmShapeOf(node); }

// ================================================================================================
// MixedMatMul: MatMul's semantics on bf16 or f16 operands, products summed and returned in f32 (as
// cuBLASLt's CUBLAS_COMPUTE_32F with f32 C). The kernel is MatMul's: loads of half types yield f32.

Status inferMixedMatMul(InferContext& ctx) {
  const DType t = ctx.inType(0);
  if (t != DType::BF16 && t != DType::F16)
    return ctx.error("operands of type " + std::string(dtypeName(t)) + ", expected bf16 or f16");
  MatMulDims d;
  if (Status s = matmulDims(ctx.inShape(0), ctx.inShape(1), &d); !s) return ctx.error(s.message());
  ctx.setOutput(0, DType::F32, d.out);
  return Status::ok();
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
  const DType t = ctx.inType(0);
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
  if (spec.reducedLabels.empty()) return singleOutput(out, product);
  return singleOutput(out, kb.reduce(ReduceOp::Sum, rv, product));
}

}  // namespace

void defineContractionOps(OpRegistry& r) {
  // Operands of one dtype, a float or an integer one.
  const std::vector<TypeRule> operands = {TypeRule::allSame(),
                                          TypeRule::in(0, TypeSet::Numeric, "a float or integer type")};
  OpDef matmul = ops::rereading(ops::anchorDef(OpKind::MatMul, 2, 2, {}, inferMatMul, lowerMatMul));
  matmul.typeRules = operands;
  matmul.asGemm = matmulAsGemm;
  r.define(matmul);
  OpDef mixed = ops::rereading(ops::anchorDef(OpKind::MixedMatMul, 2, 2, {}, inferMixedMatMul, lowerMatMul));
  mixed.typeRules = {TypeRule::allSame()};
  mixed.asGemm = gemmShapeOf;
  mixed.internal = true;
  r.define(mixed);
  OpDef einsum = ops::rereading(ops::anchorDef(OpKind::Einsum, 1, 64, {ops::requiredAttr("equation", AttrKind::String)},
                                               inferEinsum, lowerEinsum));
  einsum.typeRules = operands;
  r.define(einsum);
}

}  // namespace nnc
