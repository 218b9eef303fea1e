// Shape and layout op definitions (Injective): Reshape, Transpose, Expand, Tile, Slice, Concat, Split, Pad.
// Also DepthToSpace, SpaceToDepth and Trilu. Every output element reads input elements at indices
// computed from its own multi-index, so these ops lower to index arithmetic and never materialise.
//
// Element generators must never load out of bounds, even in a select branch that is not taken (targets
// may evaluate both arms), so every computed index is clamped into its input's range.
#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "ir/ops/common.h"

namespace nnc {

namespace ops {

Expected<std::vector<int64_t>> transposePerm(const Node& n, int rank) {
  std::vector<int64_t> perm;
  if (const AttrValue* v = n.attrs().find("perm")) {
    perm = std::get<std::vector<int64_t>>(*v);
  } else {
    for (int i = rank - 1; i >= 0; --i) perm.push_back(i);
  }
  if (static_cast<int>(perm.size()) != rank) return Status::error(countMessage("perm", perm.size(), rank));
  std::vector<bool> seen(rank, false);
  for (int64_t p : perm) {
    if (p < 0 || p >= rank || seen[p])
      return Status::error("perm " + listStr(perm) + " is not a permutation of 0.." + std::to_string(rank - 1));
    seen[p] = true;
  }
  return perm;
}

}  // namespace ops

namespace {

using ops::transposePerm;

using kir::ElementGen;
using kir::ExprId;
using kir::ExprOp;
using kir::KernelBuilder;
using ops::countMessage;
using ops::exprType;
using ops::kManyInputs;
using ops::listStr;
using ops::resolveAxis;
using ops::staticInt;
using ops::staticInts;
using ops::staticTensor;
using ops::tensorElement;
using Index = std::vector<ExprId>;

ExprId floorDiv(KernelBuilder& kb, ExprId a, int64_t b) { return kb.binary(ExprOp::FloorDiv, a, kb.i64(b)); }
ExprId floorMod(KernelBuilder& kb, ExprId a, int64_t b) { return kb.binary(ExprOp::FloorMod, a, kb.i64(b)); }

// ----------------------------------------------------------------------------------------------
// Reshape, Transpose, Expand, Tile

Expected<Shape> reshapeTarget(const Node& n, const Shape& in) {
  std::optional<std::vector<int64_t>> spec = staticInts(n, "shape", 1);
  if (!spec) return Status::error("'shape' is required (input 1)");
  bool allowZero = n.attrs().getInt("allowzero") != 0;
  std::vector<int64_t> dims = *spec;
  int inferAt = -1;
  bool hasZero = false;
  for (size_t i = 0; i < dims.size(); ++i) {
    int64_t d = dims[i];
    if (d == -1) {
      if (inferAt >= 0) return Status::error("shape " + listStr(*spec) + " has more than one -1");
      inferAt = static_cast<int>(i);
    } else if (d == 0) {
      hasZero = true;
      if (allowZero) continue;
      if (static_cast<int>(i) >= in.rank())
        return Status::error("shape " + listStr(*spec) + " copies dim " + std::to_string(i) + " (0) but the input " +
                             in.str() + " has rank " + std::to_string(in.rank()));
      dims[i] = in[static_cast<int>(i)];
    } else if (d < -1) {
      return Status::error("shape " + listStr(*spec) + " has invalid value " + std::to_string(d));
    }
  }
  if (allowZero && hasZero && inferAt >= 0)
    return Status::error("shape " + listStr(*spec) + " has both 0 and -1 with allowzero=1");
  int64_t inNumel = in.numel();
  if (inferAt >= 0) {
    int64_t known = 1;
    bool overflow = false;  // huge given dims (a fuzzer finding): the -1 cannot be inferred
    for (size_t i = 0; i < dims.size(); ++i)
      if (static_cast<int>(i) != inferAt) overflow |= __builtin_mul_overflow(known, dims[i], &known);
    if (overflow || known == 0 || inNumel % known != 0)
      return Status::error("cannot infer the -1 in shape " + listStr(*spec) + " for input " + in.str());
    dims[inferAt] = inNumel / known;
  }
  Shape out(dims);
  std::optional<int64_t> outNumel = out.checkedNumel();
  if (!outNumel || *outNumel != inNumel)
    return Status::error("cannot reshape " + in.str() + " (" + std::to_string(inNumel) + " elements) into shape " +
                         listStr(*spec));
  return out;
}

void defineReshape(OpRegistry& r) {
  OpDef d = ops::newDef(OpKind::Reshape);
  d.stridedView = true;
  d.keepsElementOrder = true;
  d.minInputs = 1, d.maxInputs = 2;
  d.attrs = {ops::optionalAttr("shape", AttrKind::Ints), ops::attrInt("allowzero", 0)};
  d.staticInputs = {{1, "shape", AttrKind::Ints}};
  d.infer = [](InferContext& ctx) -> Status {
    Expected<Shape> out = reshapeTarget(ctx.node(), ctx.inShape(0));
    if (!out) return ctx.error(out.status().message());
    ctx.setOutput(0, ctx.inType(0), *out);
    return Status::ok();
  };
  d.lowerElement = [](LowerContext& ctx) -> std::vector<ElementGen> {
    KernelBuilder* kb = &ctx.kb;
    Shape in = ctx.inShape(0), out = ctx.outShape(0);
    ElementGen x = ctx.inputs[0];
    return {[=](const Index& idx) { return x(kb->unflatten(kb->flatIndex(idx, out), in)); }};
  };
  r.define(std::move(d));
}

void defineTranspose(OpRegistry& r) {
  OpDef d = ops::newDef(OpKind::Transpose);
  d.stridedView = true;
  d.attrs = {ops::optionalAttr("perm", AttrKind::Ints)};
  d.infer = [](InferContext& ctx) -> Status {
    Expected<std::vector<int64_t>> perm = transposePerm(ctx.node(), ctx.inRank(0));
    if (!perm) return ctx.error(perm.status().message());
    Shape out;
    for (int64_t p : *perm) out.dims().push_back(ctx.inShape(0)[static_cast<int>(p)]);
    ctx.setOutput(0, ctx.inType(0), out);
    return Status::ok();
  };
  d.lowerElement = [](LowerContext& ctx) -> std::vector<ElementGen> {
    std::vector<int64_t> perm = transposePerm(ctx.node, ctx.inShape(0).rank()).value();
    ElementGen x = ctx.inputs[0];
    return {[=](const Index& idx) {
      Index in(idx.size());
      for (size_t i = 0; i < perm.size(); ++i) in[perm[i]] = idx[i];
      return x(in);
    }};
  };
  r.define(std::move(d));
}

void defineExpand(OpRegistry& r) {
  OpDef d = ops::newDef(OpKind::Expand);
  d.minInputs = 1, d.maxInputs = 2;
  d.attrs = {ops::optionalAttr("shape", AttrKind::Ints)};
  d.staticInputs = {{1, "shape", AttrKind::Ints}};
  d.infer = [](InferContext& ctx) -> Status {
    std::optional<std::vector<int64_t>> shape = staticInts(ctx.node(), "shape", 1);
    if (!shape) return ctx.error("'shape' is required (input 1)");
    for (int64_t s : *shape)
      if (s < 0) return ctx.error("shape " + listStr(*shape) + " has a negative dim");
    std::optional<Shape> out = broadcastShapes(ctx.inShape(0), Shape(*shape));
    if (!out) return ctx.error("cannot expand " + ctx.inShape(0).str() + " to shape " + listStr(*shape));
    ctx.setOutput(0, ctx.inType(0), *out);
    return Status::ok();
  };
  d.lowerElement = [](LowerContext& ctx) -> std::vector<ElementGen> {
    KernelBuilder* kb = &ctx.kb;
    Shape in = ctx.inShape(0);
    ElementGen x = ctx.inputs[0];
    return {[=](const Index& idx) { return x(ops::broadcastIndex(*kb, idx, in)); }};
  };
  r.define(std::move(d));
}

void defineTile(OpRegistry& r) {
  OpDef d = ops::newDef(OpKind::Tile);
  d.minInputs = 1, d.maxInputs = 2;
  d.attrs = {ops::optionalAttr("repeats", AttrKind::Ints)};
  d.staticInputs = {{1, "repeats", AttrKind::Ints}};
  d.infer = [](InferContext& ctx) -> Status {
    std::optional<std::vector<int64_t>> reps = staticInts(ctx.node(), "repeats", 1);
    if (!reps) return ctx.error("'repeats' is required (input 1)");
    if (static_cast<int>(reps->size()) != ctx.inRank(0))
      return ctx.error(countMessage("repeats", reps->size(), ctx.inRank(0)));
    Shape out = ctx.inShape(0);
    for (int i = 0; i < out.rank(); ++i) {
      if ((*reps)[i] < 0) return ctx.error("repeats " + listStr(*reps) + " has a negative value");
      // Checked: a repeat of INT64_MAX (a fuzzer finding) overflowed.
      if (__builtin_mul_overflow(out[i], (*reps)[i], &out[i]))
        return ctx.error("repeats " + listStr(*reps) + " make the output too large");
    }
    if (!out.checkedNumel()) return ctx.error("output " + out.str() + " is too large");
    ctx.setOutput(0, ctx.inType(0), out);
    return Status::ok();
  };
  d.lowerElement = [](LowerContext& ctx) -> std::vector<ElementGen> {
    KernelBuilder* kb = &ctx.kb;
    Shape in = ctx.inShape(0), out = ctx.outShape(0);
    ElementGen x = ctx.inputs[0];
    return {[=](const Index& idx) {
      Index src(idx);
      for (int i = 0; i < in.rank(); ++i)
        if (in[i] != out[i] && in[i] > 0) src[i] = floorMod(*kb, idx[i], in[i]);
      return x(src);
    }};
  };
  r.define(std::move(d));
}

// ----------------------------------------------------------------------------------------------
// Slice, Concat, Split, Pad

struct SlicePlan {
  std::vector<int64_t> start, step;  // per input dim (identity: 0, 1)
  Shape out;
};

Expected<SlicePlan> planSlice(const Node& n, const Shape& in) {
  std::optional<std::vector<int64_t>> starts = staticInts(n, "starts", 1), ends = staticInts(n, "ends", 2);
  if (!starts) return Status::error("'starts' is required (input 1)");
  if (!ends) return Status::error("'ends' is required (input 2)");
  size_t count = starts->size();
  if (ends->size() != count) return Status::error(countMessage("ends", ends->size(), count));
  std::vector<int64_t> axes, steps(count, 1);
  if (auto a = staticInts(n, "axes", 3)) {
    axes = *a;
    if (axes.size() != count) return Status::error(countMessage("axes", axes.size(), count));
  } else {
    if (static_cast<int>(count) > in.rank()) return Status::error(countMessage("starts", count, in.rank()));
    for (size_t i = 0; i < count; ++i) axes.push_back(static_cast<int64_t>(i));
  }
  if (auto s = staticInts(n, "steps", 4)) {
    steps = *s;
    if (steps.size() != count) return Status::error(countMessage("steps", steps.size(), count));
  }
  SlicePlan p;
  p.start.assign(in.rank(), 0);
  p.step.assign(in.rank(), 1);
  p.out = in;
  std::vector<bool> seen(in.rank(), false);
  for (size_t i = 0; i < count; ++i) {
    NNC_ASSIGN_OR_RETURN(int axis, resolveAxis(axes[i], in.rank()));
    if (seen[axis]) return Status::error("axis " + std::to_string(axes[i]) + " is repeated in axes");
    seen[axis] = true;
    int64_t step = steps[i], dim = in[axis];
    if (step == 0) return Status::error("steps value 0 at position " + std::to_string(i) + " must not be zero");
    // ONNX rules: negative positions count from the end, then clamp; a negative step clamps the
    // start into [0, dim-1] and the end into [-1, dim-1]. INT64_MIN/MAX ends saturate here.
    int64_t start = (*starts)[i], end = (*ends)[i];
    if (start < 0) start += dim;
    if (end < 0) end += dim;
    int64_t len = 0;
    // Lengths as (distance - 1) / |step| + 1, in uint64 for |step|: steps of INT64_MAX or INT64_MIN
    // must not overflow.
    if (step > 0) {
      start = std::clamp<int64_t>(start, 0, dim);
      end = std::clamp<int64_t>(end, 0, dim);
      if (end > start) len = (end - start - 1) / step + 1;
    } else {
      start = std::clamp<int64_t>(start, 0, dim - 1);
      end = std::clamp<int64_t>(end, -1, dim - 1);
      const uint64_t stride = 0 - static_cast<uint64_t>(step);
      if (start > end) len = static_cast<int64_t>(static_cast<uint64_t>(start - end - 1) / stride + 1);
    }
    if (dim == 0) len = 0, start = 0;
    p.start[axis] = start;
    p.step[axis] = step;
    p.out[axis] = len;
  }
  return p;
}

void defineSlice(OpRegistry& r) {
  OpDef d = ops::newDef(OpKind::Slice);
  d.stridedView = true;
  d.minInputs = 1, d.maxInputs = 5;
  d.attrs = {ops::optionalAttr("starts", AttrKind::Ints), ops::optionalAttr("ends", AttrKind::Ints),
             ops::optionalAttr("axes", AttrKind::Ints), ops::optionalAttr("steps", AttrKind::Ints)};
  d.staticInputs = {{1, "starts", AttrKind::Ints},
                    {2, "ends", AttrKind::Ints},
                    {3, "axes", AttrKind::Ints},
                    {4, "steps", AttrKind::Ints}};
  d.infer = [](InferContext& ctx) -> Status {
    Expected<SlicePlan> p = planSlice(ctx.node(), ctx.inShape(0));
    if (!p) return ctx.error(p.status().message());
    ctx.setOutput(0, ctx.inType(0), p->out);
    return Status::ok();
  };
  d.lowerElement = [](LowerContext& ctx) -> std::vector<ElementGen> {
    KernelBuilder* kb = &ctx.kb;
    SlicePlan p = planSlice(ctx.node, ctx.inShape(0)).value();
    ElementGen x = ctx.inputs[0];
    return {[=](const Index& idx) {
      Index src(idx.size());
      for (size_t i = 0; i < idx.size(); ++i)
        src[i] = kb->add(kb->i64(p.start[i]), kb->mul(idx[i], kb->i64(p.step[i])));
      return x(src);
    }};
  };
  r.define(std::move(d));
}

void defineConcat(OpRegistry& r) {
  OpDef d = ops::newDef(OpKind::Concat);
  d.minInputs = 1, d.maxInputs = kManyInputs;
  d.attrs = {ops::requiredAttr("axis", AttrKind::Int)};
  d.infer = [](InferContext& ctx) -> Status {
    for (int i = 0; i < ctx.numInputs(); ++i) NNC_RETURN_IF_ERROR(ops::requireInput(ctx, i, "a tensor to concatenate"));
    int rank = ctx.inRank(0);
    if (rank == 0) return ctx.error("cannot concatenate scalars");
    Expected<int> axis = resolveAxis(ctx.attrs().getInt("axis"), rank);
    if (!axis) return ctx.error(axis.status().message());
    Shape out = ctx.inShape(0);
    for (int i = 1; i < ctx.numInputs(); ++i) {
      const Shape& s = ctx.inShape(i);
      if (ctx.inType(i) != ctx.inType(0))
        return ctx.error("input " + std::to_string(i) + " has type " + std::string(dtypeName(ctx.inType(i))) +
                         ", expected " + std::string(dtypeName(ctx.inType(0))));
      bool same = s.rank() == rank;
      for (int k = 0; same && k < rank; ++k) same = k == *axis || s[k] == out[k];
      if (!same)
        return ctx.error("input " + std::to_string(i) + " has shape " + s.str() + ", incompatible with " +
                         ctx.inShape(0).str() + " along axis " + std::to_string(*axis));
      if (__builtin_add_overflow(out[*axis], s[*axis], &out[*axis]))
        return ctx.error("the inputs are too long together along axis " + std::to_string(*axis));
    }
    if (!out.checkedNumel()) return ctx.error("output " + out.str() + " is too large");
    ctx.setOutput(0, ctx.inType(0), out);
    return Status::ok();
  };
  d.lowerElement = [](LowerContext& ctx) -> std::vector<ElementGen> {
    KernelBuilder* kb = &ctx.kb;
    int axis = *normalizeAxis(ctx.attrs().getInt("axis"), ctx.inShape(0).rank());
    struct Part {
      ElementGen gen;
      int64_t begin, len;
    };
    std::vector<Part> parts;
    int64_t offset = 0;
    for (int i = 0; i < ctx.node.numInputs(); ++i) {
      int64_t len = ctx.inShape(i)[axis];
      if (len > 0) parts.push_back({ctx.inputs[i], offset, len});
      offset += len;
    }
    DType type = ctx.outType(0);
    return {[=](const Index& idx) {
      auto at = [&](const Part& p) {
        Index src(idx);
        src[axis] = kb->clamp(kb->sub(idx[axis], kb->i64(p.begin)), 0, p.len - 1);
        return p.gen(src);
      };
      if (parts.empty()) return kb->constant(exprType(type), 0);  // an empty output: never run
      int64_t known;
      if (kb->isConstInt(idx[axis], &known)) {
        for (const Part& p : parts)
          if (known < p.begin + p.len) return at(p);
      }
      ExprId v = at(parts.back());
      for (int k = static_cast<int>(parts.size()) - 2; k >= 0; --k)
        v = kb->select(kb->lt(idx[axis], kb->i64(parts[k].begin + parts[k].len)), at(parts[k]), v);
      return v;
    }};
  };
  r.define(std::move(d));
}

Expected<std::vector<int64_t>> splitSizes(const Node& n, const Shape& in, int axis) {
  int outputs = n.numOutputs();
  int64_t dim = in[axis];
  if (auto split = staticInts(n, "split", 1)) {
    if (static_cast<int>(split->size()) != outputs) return Status::error(countMessage("split", split->size(), outputs));
    int64_t sum = 0;
    bool overflow = false;  // sizes of INT64_MAX (a fuzzer finding): never the dim's size anyway
    for (int64_t s : *split) {
      if (s < 0) return Status::error("split " + listStr(*split) + " has a negative size");
      overflow |= __builtin_add_overflow(sum, s, &sum);
    }
    if (overflow || sum != dim)
      return Status::error("split " + listStr(*split) + " sums to " +
                           (overflow ? "more than 2^63" : std::to_string(sum)) + ", expected " + std::to_string(dim) +
                           " (the size of axis " + std::to_string(axis) + ")");
    return *split;
  }
  if (const AttrValue* v = n.attrs().find("num_outputs")) {
    if (std::get<int64_t>(*v) != outputs)
      return Status::error("num_outputs is " + std::to_string(std::get<int64_t>(*v)) + " but the node has " +
                           std::to_string(outputs) + " outputs");
  }
  // Equal chunks; when the dim does not divide evenly the last one is smaller (opset 18).
  int64_t chunk = (dim + outputs - 1) / outputs;
  int64_t last = dim - chunk * (outputs - 1);
  if (last < 0)
    return Status::error("cannot split axis " + std::to_string(axis) + " of size " + std::to_string(dim) + " into " +
                         std::to_string(outputs) + " outputs");
  std::vector<int64_t> sizes(outputs, chunk);
  sizes.back() = last;
  return sizes;
}

void defineSplit(OpRegistry& r) {
  OpDef d = ops::newDef(OpKind::Split);
  d.minInputs = 1, d.maxInputs = 2;
  d.minOutputs = 1, d.maxOutputs = kManyInputs;
  d.attrs = {ops::attrInt("axis", 0), ops::optionalAttr("split", AttrKind::Ints),
             ops::optionalAttr("num_outputs", AttrKind::Int)};
  d.staticInputs = {{1, "split", AttrKind::Ints}};
  d.infer = [](InferContext& ctx) -> Status {
    Expected<int> axis = resolveAxis(ctx.attrs().getInt("axis"), ctx.inRank(0));
    if (!axis) return ctx.error(axis.status().message());
    Expected<std::vector<int64_t>> sizes = splitSizes(ctx.node(), ctx.inShape(0), *axis);
    if (!sizes) return ctx.error(sizes.status().message());
    for (int i = 0; i < ctx.numOutputs(); ++i) {
      Shape out = ctx.inShape(0);
      out[*axis] = (*sizes)[i];
      ctx.setOutput(i, ctx.inType(0), out);
    }
    return Status::ok();
  };
  d.lowerElement = [](LowerContext& ctx) -> std::vector<ElementGen> {
    KernelBuilder* kb = &ctx.kb;
    int axis = *normalizeAxis(ctx.attrs().getInt("axis"), ctx.inShape(0).rank());
    std::vector<int64_t> sizes = splitSizes(ctx.node, ctx.inShape(0), axis).value();
    ElementGen x = ctx.inputs[0];
    std::vector<ElementGen> gens;
    int64_t offset = 0;
    for (int64_t size : sizes) {
      gens.push_back([=](const Index& idx) {
        Index src(idx);
        src[axis] = kb->add(idx[axis], kb->i64(offset));
        return x(src);
      });
      offset += size;
    }
    return gens;
  };
  r.define(std::move(d));
}

enum class PadMode { Constant, Reflect, Edge, Wrap };

struct PadPlan {
  PadMode mode;
  std::vector<int64_t> begin;  // per dim; negative crops
  Shape out;
  Tensor value;  // the constant (may be null: zero)
};

Expected<PadPlan> planPad(const Node& n, const Shape& in) {
  PadPlan p;
  const std::string& mode = n.attrs().getString("mode");
  if (mode == "constant")
    p.mode = PadMode::Constant;
  else if (mode == "reflect")
    p.mode = PadMode::Reflect;
  else if (mode == "edge")
    p.mode = PadMode::Edge;
  else if (mode == "wrap")
    p.mode = PadMode::Wrap;
  else
    return Status::error("mode '" + mode + "' is not one of constant, reflect, edge, wrap");
  std::optional<std::vector<int64_t>> pads = staticInts(n, "pads", 1);
  if (!pads) return Status::error("'pads' is required (input 1)");
  std::vector<int> axes;
  if (auto a = staticInts(n, "axes", 3)) {
    for (int64_t axis : *a) {
      NNC_ASSIGN_OR_RETURN(int ax, resolveAxis(axis, in.rank()));
      if (std::find(axes.begin(), axes.end(), ax) != axes.end())
        return Status::error("axis " + std::to_string(axis) + " is repeated in axes");
      axes.push_back(ax);
    }
  } else {
    for (int i = 0; i < in.rank(); ++i) axes.push_back(i);
  }
  size_t naxes = axes.size();
  if (pads->size() != 2 * naxes) return Status::error(countMessage("pads", pads->size(), 2 * naxes));
  p.begin.assign(in.rank(), 0);
  p.out = in;
  for (size_t i = 0; i < naxes; ++i) {
    int ax = axes[i];
    int64_t b = (*pads)[i], e = (*pads)[i + naxes];
    int64_t len = 0;
    if (__builtin_add_overflow(in[ax], b, &len) || __builtin_add_overflow(len, e, &len) || len > kMaxElements)
      return Status::error("pads " + listStr(*pads) + " make axis " + std::to_string(ax) + " too long");
    if (len < 0) return Status::error("pads " + listStr(*pads) + " crop axis " + std::to_string(ax) + " below zero");
    if (p.mode != PadMode::Constant && in[ax] == 0 && len > 0)
      return Status::error("cannot " + mode + "-pad axis " + std::to_string(ax) + ", which is empty");
    p.begin[ax] = b;
    p.out[ax] = len;
  }
  if (auto v = staticTensor(n, "constant_value", 2)) {
    if (v->numel() > 1) return Status::error("constant_value must be a scalar, got " + v->shape().str());
    if (v->numel() == 1 && v->dtype() != n.input(0)->dtype())
      return Status::error("constant_value has type " + std::string(dtypeName(v->dtype())) + ", expected " +
                           std::string(dtypeName(n.input(0)->dtype())) + " like the data");
    if (v->numel() == 1) p.value = *v;
  }
  return p;
}

void definePad(OpRegistry& r) {
  OpDef d = ops::newDef(OpKind::Pad);
  d.minInputs = 1, d.maxInputs = 4;
  d.attrs = {ops::attrString("mode", "constant"), ops::optionalAttr("pads", AttrKind::Ints),
             ops::optionalAttr("constant_value", AttrKind::Tensor), ops::optionalAttr("axes", AttrKind::Ints)};
  d.staticInputs = {{1, "pads", AttrKind::Ints}, {2, "constant_value", AttrKind::Tensor}, {3, "axes", AttrKind::Ints}};
  d.infer = [](InferContext& ctx) -> Status {
    Expected<PadPlan> p = planPad(ctx.node(), ctx.inShape(0));
    if (!p) return ctx.error(p.status().message());
    ctx.setOutput(0, ctx.inType(0), p->out);
    return Status::ok();
  };
  d.lowerElement = [](LowerContext& ctx) -> std::vector<ElementGen> {
    KernelBuilder* kb = &ctx.kb;
    PadPlan p = planPad(ctx.node, ctx.inShape(0)).value();
    Shape in = ctx.inShape(0);
    DType type = ctx.outType(0);
    ElementGen x = ctx.inputs[0];
    return {[=](const Index& idx) {
      ExprId fill = p.value.isNull() ? kb->constant(exprType(type), 0) : tensorElement(*kb, p.value, 0, type);
      if (in.numel() == 0) return fill;  // everything is padding
      ExprId inside = kir::kNoExpr;
      Index src(idx.size());
      for (int i = 0; i < in.rank(); ++i) {
        int64_t n = in[i];
        ExprId j = kb->sub(idx[i], kb->i64(p.begin[i]));
        if (p.begin[i] == 0 && p.out[i] <= n) {  // no padding on this dim, maybe cropped at the end
          src[i] = j;
          continue;
        }
        switch (p.mode) {
          case PadMode::Constant: {
            ExprId ok = kb->logicalAnd(kb->le(kb->i64(0), j), kb->lt(j, kb->i64(n)));
            inside = inside == kir::kNoExpr ? ok : kb->logicalAnd(inside, ok);
            src[i] = kb->clamp(j, 0, n - 1);
            break;
          }
          case PadMode::Edge: src[i] = kb->clamp(j, 0, n - 1); break;
          case PadMode::Wrap: src[i] = floorMod(*kb, j, n); break;
          case PadMode::Reflect: {
            if (n == 1) {
              src[i] = kb->i64(0);
              break;
            }
            // Reflection without repeating the edge is periodic with period 2(n-1).
            int64_t period = 2 * (n - 1);
            ExprId m = floorMod(*kb, j, period);
            src[i] = kb->select(kb->lt(m, kb->i64(n)), m, kb->sub(kb->i64(period), m));
            break;
          }
        }
      }
      ExprId v = x(src);
      return inside == kir::kNoExpr ? v : kb->select(inside, v, fill);
    }};
  };
  r.define(std::move(d));
}

// ----------------------------------------------------------------------------------------------
// DepthToSpace, SpaceToDepth, Trilu

Status checkBlocks(InferContext& ctx, bool toSpace, Shape* out) {
  const Shape& in = ctx.inShape(0);
  int64_t b = ctx.attrs().getInt("blocksize");
  if (in.rank() != 4) return ctx.error("expected a 4-D input, got " + in.str());
  if (b <= 0) return ctx.error("blocksize must be positive, got " + std::to_string(b));
  // b * b must stay within the element limit (it divides, or multiplies, a dim).
  if (b > (int64_t{1} << 20)) return ctx.error("blocksize " + std::to_string(b) + " is too large");
  if (toSpace) {
    if (in[1] % (b * b) != 0)
      return ctx.error("channels (" + std::to_string(in[1]) + ") are not divisible by blocksize^2 (" +
                       std::to_string(b * b) + ")");
    *out = Shape({in[0], in[1] / (b * b), saturatingProduct({in[2], b}), saturatingProduct({in[3], b})});
  } else {
    if (in[2] % b != 0 || in[3] % b != 0)
      return ctx.error("spatial dims of " + in.str() + " are not divisible by blocksize " + std::to_string(b));
    *out = Shape({in[0], saturatingProduct({in[1], b, b}), in[2] / b, in[3] / b});
  }
  // Saturating above: an empty input may have huge dims that the block factor pushes past int64;
  // inference's output check then refuses the dim.
  return Status::ok();
}

void defineDepthToSpace(OpRegistry& r) {
  OpDef d = ops::newDef(OpKind::DepthToSpace);
  d.attrs = {ops::requiredAttr("blocksize", AttrKind::Int), ops::attrString("mode", "DCR")};
  d.infer = [](InferContext& ctx) -> Status {
    const std::string& mode = ctx.attrs().getString("mode");
    if (mode != "DCR" && mode != "CRD") return ctx.error("mode '" + mode + "' is not one of DCR, CRD");
    Shape out;
    NNC_RETURN_IF_ERROR(checkBlocks(ctx, /*toSpace=*/true, &out));
    ctx.setOutput(0, ctx.inType(0), out);
    return Status::ok();
  };
  d.lowerElement = [](LowerContext& ctx) -> std::vector<ElementGen> {
    KernelBuilder* kb = &ctx.kb;
    int64_t b = ctx.attrs().getInt("blocksize");
    int64_t outC = ctx.outShape(0)[1];
    bool dcr = ctx.attrs().getString("mode") == "DCR";
    ElementGen x = ctx.inputs[0];
    return {[=](const Index& idx) {
      ExprId bh = floorMod(*kb, idx[2], b), bw = floorMod(*kb, idx[3], b);
      ExprId block = kb->add(kb->mul(bh, kb->i64(b)), bw);
      // DCR: depth is (block, channel); CRD: (channel, block).
      ExprId c = dcr ? kb->add(kb->mul(block, kb->i64(outC)), idx[1]) : kb->add(kb->mul(idx[1], kb->i64(b * b)), block);
      return x({idx[0], c, floorDiv(*kb, idx[2], b), floorDiv(*kb, idx[3], b)});
    }};
  };
  r.define(std::move(d));
}

void defineSpaceToDepth(OpRegistry& r) {
  OpDef d = ops::newDef(OpKind::SpaceToDepth);
  d.attrs = {ops::requiredAttr("blocksize", AttrKind::Int)};
  d.infer = [](InferContext& ctx) -> Status {
    Shape out;
    NNC_RETURN_IF_ERROR(checkBlocks(ctx, /*toSpace=*/false, &out));
    ctx.setOutput(0, ctx.inType(0), out);
    return Status::ok();
  };
  d.lowerElement = [](LowerContext& ctx) -> std::vector<ElementGen> {
    KernelBuilder* kb = &ctx.kb;
    int64_t b = ctx.attrs().getInt("blocksize");
    int64_t inC = ctx.inShape(0)[1];
    ElementGen x = ctx.inputs[0];
    return {[=](const Index& idx) {
      // Output channel = (bh * b + bw) * C + c.
      ExprId c = floorMod(*kb, idx[1], inC);
      ExprId block = floorDiv(*kb, idx[1], inC);
      ExprId bh = floorDiv(*kb, block, b), bw = floorMod(*kb, block, b);
      ExprId h = kb->add(kb->mul(idx[2], kb->i64(b)), bh), w = kb->add(kb->mul(idx[3], kb->i64(b)), bw);
      return x({idx[0], c, h, w});
    }};
  };
  r.define(std::move(d));
}

void defineTrilu(OpRegistry& r) {
  OpDef d = ops::newDef(OpKind::Trilu);
  d.minInputs = 1, d.maxInputs = 2;
  d.attrs = {ops::attrInt("upper", 1), ops::optionalAttr("k", AttrKind::Int)};
  d.staticInputs = {{1, "k", AttrKind::Int}};
  d.infer = [](InferContext& ctx) -> Status {
    if (ctx.inRank(0) < 2) return ctx.error("input must have rank >= 2, got " + ctx.inShape(0).str());
    ctx.setOutput(0, ctx.inType(0), ctx.inShape(0));
    return Status::ok();
  };
  d.lowerElement = [](LowerContext& ctx) -> std::vector<ElementGen> {
    KernelBuilder* kb = &ctx.kb;
    int64_t k = staticInt(ctx.node, "k", 1).value_or(0);
    bool upper = ctx.attrs().getInt("upper") != 0;
    DType type = ctx.outType(0);
    ElementGen x = ctx.inputs[0];
    return {[=](const Index& idx) {
      size_t r = idx.size();
      ExprId diag = kb->sub(idx[r - 1], idx[r - 2]);  // column - row
      ExprId keep = upper ? kb->le(kb->i64(k), diag) : kb->le(diag, kb->i64(k));
      return kb->select(keep, x(idx), kb->constant(exprType(type), 0));
    }};
  };
  r.define(std::move(d));
}

}  // namespace

void defineLayoutOps(OpRegistry& r) {
  defineReshape(r);
  defineTranspose(r);
  defineExpand(r);
  defineTile(r);
  defineSlice(r);
  defineConcat(r);
  defineSplit(r);
  definePad(r);
  defineDepthToSpace(r);
  defineSpaceToDepth(r);
  defineTrilu(r);
}

}  // namespace nnc
