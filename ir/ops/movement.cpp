// Data-movement (Injective) op definitions: every output element reads input elements at indices
// computed from its own multi-index, so these ops lower to index arithmetic and never materialise.
//
// Generators must never load out of bounds, even in a select branch that is not taken (targets may
// evaluate both arms), so every computed index is clamped into its input's range.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "ir/op_registry.h"
#include "ir/ops/common.h"

namespace nnc {
namespace {

using kir::ElementGen;
using kir::ExprId;
using kir::ExprOp;
using kir::KernelBuilder;
using Index = std::vector<ExprId>;

constexpr int kManyInputs = 1 << 20;  // "variadic": Concat inputs, Split outputs

// ----------------------------------------------------------------------------------------------
// Small helpers

// Expressions of half-like tensors compute in f32.
DType exprType(DType storage) { return isHalfLike(storage) ? DType::F32 : storage; }

std::string intsStr(const std::vector<int64_t>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s + "]";
}

std::string countMessage(const std::string& what, size_t got, size_t expected) {
  return what + " has " + std::to_string(got) + " values, expected " + std::to_string(expected);
}

Status fail(const std::string& message) { return Status::error(message); }

Expected<int> axisFor(int64_t axis, int rank) {
  std::optional<int> a = normalizeAxis(axis, rank);
  if (!a) return fail("axis " + std::to_string(axis) + " is out of range for rank " + std::to_string(rank));
  return *a;
}

// Compile-time values of static inputs: the attribute the importer made, or a constant input.
std::optional<std::vector<int64_t>> staticInts(const Node& n, const std::string& name, int input) {
  if (const AttrValue* v = n.attrs().find(name)) return std::get<std::vector<int64_t>>(*v);
  const Value* in = n.input(input);
  if (in && in->isConstant()) return in->constant().toInt64s();
  return std::nullopt;
}
std::optional<int64_t> staticInt(const Node& n, const std::string& name, int input) {
  if (const AttrValue* v = n.attrs().find(name)) return std::get<int64_t>(*v);
  const Value* in = n.input(input);
  if (in && in->isConstant() && in->constant().numel() == 1) return in->constant().getInt(0);
  return std::nullopt;
}
std::optional<Tensor> staticTensor(const Node& n, const std::string& name, int input) {
  if (const AttrValue* v = n.attrs().find(name)) return std::get<Tensor>(*v);
  const Value* in = n.input(input);
  if (in && in->isConstant()) return in->constant();
  return std::nullopt;
}

// A constant expression for element `i` of `t`, typed for a value of storage type `storage`.
ExprId tensorElement(KernelBuilder& kb, const Tensor& t, int64_t i, DType storage) {
  DType et = exprType(storage);
  if (isFloat(et)) return kb.constant(et, t.getDouble(i));
  if (isFloat(t.dtype())) return kb.constant(et, std::trunc(t.getDouble(i)));
  return kb.constantInt(et, t.getInt(i));
}

ExprId toI64(KernelBuilder& kb, ExprId e) { return kb.dtypeOf(e) == DType::I64 ? e : kb.cast(DType::I64, e); }
ExprId floorDiv(KernelBuilder& kb, ExprId a, int64_t b) { return kb.binary(ExprOp::FloorDiv, a, kb.i64(b)); }
ExprId floorMod(KernelBuilder& kb, ExprId a, int64_t b) { return kb.binary(ExprOp::FloorMod, a, kb.i64(b)); }

// A data-dependent index: negative values count from the end, then clamped into [0, dim) so that
// an out-of-range index can never become an out-of-bounds load.
ExprId normalizeIndex(KernelBuilder& kb, ExprId raw, int64_t dim) {
  ExprId i = toI64(kb, raw);
  i = kb.select(kb.lt(i, kb.i64(0)), kb.add(i, kb.i64(dim)), i);
  return kb.clamp(i, 0, dim - 1);
}

OpDef newDef(OpKind kind) {
  OpDef d;
  d.kind = kind;
  return d;
}

// Wraps a definition so that a static input that is present but not constant is a clear error.
void define(OpRegistry& r, OpDef d) {
  std::vector<StaticInput> statics = d.staticInputs;
  auto inner = std::move(d.infer);
  d.infer = [statics, inner](InferContext& ctx) -> Status {
    for (const StaticInput& s : statics) {
      if (!ctx.hasInput(s.index) || ctx.attrs().has(s.attrName)) continue;
      if (!ctx.node().input(s.index)->isConstant())
        return ctx.error("input " + std::to_string(s.index) + " ('" + s.attrName +
                         "') must be a compile-time constant");
    }
    return inner(ctx);
  };
  r.define(std::move(d));
}

Status requireInput(InferContext& ctx, int i, const char* what) {
  if (ctx.hasInput(i)) return Status::ok();
  return ctx.error(std::string("missing input ") + std::to_string(i) + " (" + what + ")");
}

Status requireIndexType(InferContext& ctx, int i, const char* what) {
  DType t = ctx.inType(i);
  if (t == DType::I32 || t == DType::I64) return Status::ok();
  return ctx.error(std::string(what) + " must be i32 or i64, got " + std::string(dtypeName(t)));
}

// ----------------------------------------------------------------------------------------------
// Reshape, Transpose, Expand, Tile

Expected<Shape> reshapeTarget(const Node& n, const Shape& in) {
  std::optional<std::vector<int64_t>> spec = staticInts(n, "shape", 1);
  if (!spec) return fail("'shape' is required (input 1)");
  bool allowZero = n.attrs().getInt("allowzero") != 0;
  std::vector<int64_t> dims = *spec;
  int inferAt = -1;
  bool hasZero = false;
  for (size_t i = 0; i < dims.size(); ++i) {
    int64_t d = dims[i];
    if (d == -1) {
      if (inferAt >= 0) return fail("shape " + intsStr(*spec) + " has more than one -1");
      inferAt = static_cast<int>(i);
    } else if (d == 0) {
      hasZero = true;
      if (allowZero) continue;
      if (static_cast<int>(i) >= in.rank())
        return fail("shape " + intsStr(*spec) + " copies dim " + std::to_string(i) + " (0) but the input " + in.str() +
                    " has rank " + std::to_string(in.rank()));
      dims[i] = in[static_cast<int>(i)];
    } else if (d < -1) {
      return fail("shape " + intsStr(*spec) + " has invalid value " + std::to_string(d));
    }
  }
  if (allowZero && hasZero && inferAt >= 0)
    return fail("shape " + intsStr(*spec) + " has both 0 and -1 with allowzero=1");
  int64_t inNumel = in.numel();
  if (inferAt >= 0) {
    int64_t known = 1;
    bool overflow = false;  // huge given dims (a fuzzer finding): the -1 cannot be inferred
    for (size_t i = 0; i < dims.size(); ++i)
      if (static_cast<int>(i) != inferAt) overflow |= __builtin_mul_overflow(known, dims[i], &known);
    if (overflow || known == 0 || inNumel % known != 0)
      return fail("cannot infer the -1 in shape " + intsStr(*spec) + " for input " + in.str());
    dims[inferAt] = inNumel / known;
  }
  Shape out(dims);
  std::optional<int64_t> outNumel = out.checkedNumel();
  if (!outNumel || *outNumel != inNumel)
    return fail("cannot reshape " + in.str() + " (" + std::to_string(inNumel) + " elements) into shape " +
                intsStr(*spec));
  return out;
}

void defineReshape(OpRegistry& r) {
  OpDef d = newDef(OpKind::Reshape);
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
  define(r, std::move(d));
}

Expected<std::vector<int64_t>> transposePerm(const Node& n, int rank) {
  std::vector<int64_t> perm;
  if (const AttrValue* v = n.attrs().find("perm")) {
    perm = std::get<std::vector<int64_t>>(*v);
  } else {
    for (int i = rank - 1; i >= 0; --i) perm.push_back(i);
  }
  if (static_cast<int>(perm.size()) != rank) return fail(countMessage("perm", perm.size(), rank));
  std::vector<bool> seen(rank, false);
  for (int64_t p : perm) {
    if (p < 0 || p >= rank || seen[p])
      return fail("perm " + intsStr(perm) + " is not a permutation of 0.." + std::to_string(rank - 1));
    seen[p] = true;
  }
  return perm;
}

void defineTranspose(OpRegistry& r) {
  OpDef d = newDef(OpKind::Transpose);
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
  define(r, std::move(d));
}

// The index into `in` that feeds output index `idx` under numpy broadcasting.
Index broadcastInto(KernelBuilder& kb, const Index& idx, const Shape& in) {
  Index out(in.rank());
  size_t lead = idx.size() - in.rank();
  for (int i = 0; i < in.rank(); ++i) out[i] = in[i] == 1 ? kb.i64(0) : idx[lead + i];
  return out;
}

void defineExpand(OpRegistry& r) {
  OpDef d = newDef(OpKind::Expand);
  d.minInputs = 1, d.maxInputs = 2;
  d.attrs = {ops::optionalAttr("shape", AttrKind::Ints)};
  d.staticInputs = {{1, "shape", AttrKind::Ints}};
  d.infer = [](InferContext& ctx) -> Status {
    std::optional<std::vector<int64_t>> shape = staticInts(ctx.node(), "shape", 1);
    if (!shape) return ctx.error("'shape' is required (input 1)");
    for (int64_t s : *shape)
      if (s < 0) return ctx.error("shape " + intsStr(*shape) + " has a negative dim");
    std::optional<Shape> out = broadcastShapes(ctx.inShape(0), Shape(*shape));
    if (!out) return ctx.error("cannot expand " + ctx.inShape(0).str() + " to shape " + intsStr(*shape));
    ctx.setOutput(0, ctx.inType(0), *out);
    return Status::ok();
  };
  d.lowerElement = [](LowerContext& ctx) -> std::vector<ElementGen> {
    KernelBuilder* kb = &ctx.kb;
    Shape in = ctx.inShape(0);
    ElementGen x = ctx.inputs[0];
    return {[=](const Index& idx) { return x(broadcastInto(*kb, idx, in)); }};
  };
  define(r, std::move(d));
}

void defineTile(OpRegistry& r) {
  OpDef d = newDef(OpKind::Tile);
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
      if ((*reps)[i] < 0) return ctx.error("repeats " + intsStr(*reps) + " has a negative value");
      // Checked: a repeat of INT64_MAX (a fuzzer finding) overflowed.
      if (__builtin_mul_overflow(out[i], (*reps)[i], &out[i]))
        return ctx.error("repeats " + intsStr(*reps) + " make the output too large");
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
  define(r, std::move(d));
}

// ----------------------------------------------------------------------------------------------
// Slice, Concat, Split, Pad

struct SlicePlan {
  std::vector<int64_t> start, step;  // per input dim (identity: 0, 1)
  Shape out;
};

Expected<SlicePlan> planSlice(const Node& n, const Shape& in) {
  std::optional<std::vector<int64_t>> starts = staticInts(n, "starts", 1), ends = staticInts(n, "ends", 2);
  if (!starts) return fail("'starts' is required (input 1)");
  if (!ends) return fail("'ends' is required (input 2)");
  size_t count = starts->size();
  if (ends->size() != count) return fail(countMessage("ends", ends->size(), count));
  std::vector<int64_t> axes, steps(count, 1);
  if (auto a = staticInts(n, "axes", 3)) {
    axes = *a;
    if (axes.size() != count) return fail(countMessage("axes", axes.size(), count));
  } else {
    if (static_cast<int>(count) > in.rank()) return fail(countMessage("starts", count, in.rank()));
    for (size_t i = 0; i < count; ++i) axes.push_back(static_cast<int64_t>(i));
  }
  if (auto s = staticInts(n, "steps", 4)) {
    steps = *s;
    if (steps.size() != count) return fail(countMessage("steps", steps.size(), count));
  }
  SlicePlan p;
  p.start.assign(in.rank(), 0);
  p.step.assign(in.rank(), 1);
  p.out = in;
  std::vector<bool> seen(in.rank(), false);
  for (size_t i = 0; i < count; ++i) {
    NNC_ASSIGN_OR_RETURN(int axis, axisFor(axes[i], in.rank()));
    if (seen[axis]) return fail("axis " + std::to_string(axes[i]) + " is repeated in axes");
    seen[axis] = true;
    int64_t step = steps[i], dim = in[axis];
    if (step == 0) return fail("steps value 0 at position " + std::to_string(i) + " must not be zero");
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
  OpDef d = newDef(OpKind::Slice);
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
  define(r, std::move(d));
}

void defineConcat(OpRegistry& r) {
  OpDef d = newDef(OpKind::Concat);
  d.minInputs = 1, d.maxInputs = kManyInputs;
  d.attrs = {ops::requiredAttr("axis", AttrKind::Int)};
  d.infer = [](InferContext& ctx) -> Status {
    for (int i = 0; i < ctx.numInputs(); ++i) NNC_RETURN_IF_ERROR(requireInput(ctx, i, "a tensor to concatenate"));
    int rank = ctx.inRank(0);
    if (rank == 0) return ctx.error("cannot concatenate scalars");
    Expected<int> axis = axisFor(ctx.attrs().getInt("axis"), rank);
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
  define(r, std::move(d));
}

Expected<std::vector<int64_t>> splitSizes(const Node& n, const Shape& in, int axis) {
  int outputs = n.numOutputs();
  int64_t dim = in[axis];
  if (auto split = staticInts(n, "split", 1)) {
    if (static_cast<int>(split->size()) != outputs) return fail(countMessage("split", split->size(), outputs));
    int64_t sum = 0;
    bool overflow = false;  // sizes of INT64_MAX (a fuzzer finding): never the dim's size anyway
    for (int64_t s : *split) {
      if (s < 0) return fail("split " + intsStr(*split) + " has a negative size");
      overflow |= __builtin_add_overflow(sum, s, &sum);
    }
    if (overflow || sum != dim)
      return fail("split " + intsStr(*split) + " sums to " + (overflow ? "more than 2^63" : std::to_string(sum)) +
                  ", expected " + std::to_string(dim) + " (the size of axis " + std::to_string(axis) + ")");
    return *split;
  }
  if (const AttrValue* v = n.attrs().find("num_outputs")) {
    if (std::get<int64_t>(*v) != outputs)
      return fail("num_outputs is " + std::to_string(std::get<int64_t>(*v)) + " but the node has " +
                  std::to_string(outputs) + " outputs");
  }
  // Equal chunks; when the dim does not divide evenly the last one is smaller (opset 18).
  int64_t chunk = (dim + outputs - 1) / outputs;
  int64_t last = dim - chunk * (outputs - 1);
  if (last < 0)
    return fail("cannot split axis " + std::to_string(axis) + " of size " + std::to_string(dim) + " into " +
                std::to_string(outputs) + " outputs");
  std::vector<int64_t> sizes(outputs, chunk);
  sizes.back() = last;
  return sizes;
}

void defineSplit(OpRegistry& r) {
  OpDef d = newDef(OpKind::Split);
  d.minInputs = 1, d.maxInputs = 2;
  d.minOutputs = 1, d.maxOutputs = kManyInputs;
  d.attrs = {ops::attrInt("axis", 0), ops::optionalAttr("split", AttrKind::Ints),
             ops::optionalAttr("num_outputs", AttrKind::Int)};
  d.staticInputs = {{1, "split", AttrKind::Ints}};
  d.infer = [](InferContext& ctx) -> Status {
    Expected<int> axis = axisFor(ctx.attrs().getInt("axis"), ctx.inRank(0));
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
  define(r, std::move(d));
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
    return fail("mode '" + mode + "' is not one of constant, reflect, edge, wrap");
  std::optional<std::vector<int64_t>> pads = staticInts(n, "pads", 1);
  if (!pads) return fail("'pads' is required (input 1)");
  std::vector<int> axes;
  if (auto a = staticInts(n, "axes", 3)) {
    for (int64_t axis : *a) {
      NNC_ASSIGN_OR_RETURN(int ax, axisFor(axis, in.rank()));
      if (std::find(axes.begin(), axes.end(), ax) != axes.end())
        return fail("axis " + std::to_string(axis) + " is repeated in axes");
      axes.push_back(ax);
    }
  } else {
    for (int i = 0; i < in.rank(); ++i) axes.push_back(i);
  }
  size_t naxes = axes.size();
  if (pads->size() != 2 * naxes) return fail(countMessage("pads", pads->size(), 2 * naxes));
  p.begin.assign(in.rank(), 0);
  p.out = in;
  for (size_t i = 0; i < naxes; ++i) {
    int ax = axes[i];
    int64_t b = (*pads)[i], e = (*pads)[i + naxes];
    int64_t len = 0;
    if (__builtin_add_overflow(in[ax], b, &len) || __builtin_add_overflow(len, e, &len) || len > kMaxElements)
      return fail("pads " + intsStr(*pads) + " make axis " + std::to_string(ax) + " too long");
    if (len < 0) return fail("pads " + intsStr(*pads) + " crop axis " + std::to_string(ax) + " below zero");
    if (p.mode != PadMode::Constant && in[ax] == 0 && len > 0)
      return fail("cannot " + mode + "-pad axis " + std::to_string(ax) + ", which is empty");
    p.begin[ax] = b;
    p.out[ax] = len;
  }
  if (auto v = staticTensor(n, "constant_value", 2)) {
    if (v->numel() > 1) return fail("constant_value must be a scalar, got " + v->shape().str());
    if (v->numel() == 1 && v->dtype() != n.input(0)->dtype())
      return fail("constant_value has type " + std::string(dtypeName(v->dtype())) + ", expected " +
                  std::string(dtypeName(n.input(0)->dtype())) + " like the data");
    if (v->numel() == 1) p.value = *v;
  }
  return p;
}

void definePad(OpRegistry& r) {
  OpDef d = newDef(OpKind::Pad);
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
  define(r, std::move(d));
}
// ----------------------------------------------------------------------------------------------
// Gather, GatherElements, GatherND, ReverseSequence (data-dependent indices)

void defineGather(OpRegistry& r) {
  OpDef d = newDef(OpKind::Gather);
  d.minInputs = 2, d.maxInputs = 2;
  d.attrs = {ops::attrInt("axis", 0)};
  d.infer = [](InferContext& ctx) -> Status {
    NNC_RETURN_IF_ERROR(requireInput(ctx, 1, "indices"));
    NNC_RETURN_IF_ERROR(requireIndexType(ctx, 1, "indices"));
    const Shape& data = ctx.inShape(0);
    if (data.rank() == 0) return ctx.error("data must have rank >= 1");
    Expected<int> axis = axisFor(ctx.attrs().getInt("axis"), data.rank());
    if (!axis) return ctx.error(axis.status().message());
    if (data[*axis] == 0 && ctx.inShape(1).numel() > 0)
      return ctx.error("cannot gather from axis " + std::to_string(*axis) + " of " + data.str() + ", which is empty");
    Shape out;
    for (int i = 0; i < *axis; ++i) out.dims().push_back(data[i]);
    for (int64_t s : ctx.inShape(1).dims()) out.dims().push_back(s);
    for (int i = *axis + 1; i < data.rank(); ++i) out.dims().push_back(data[i]);
    ctx.setOutput(0, ctx.inType(0), out);
    return Status::ok();
  };
  d.lowerElement = [](LowerContext& ctx) -> std::vector<ElementGen> {
    KernelBuilder* kb = &ctx.kb;
    Shape data = ctx.inShape(0);
    int axis = *normalizeAxis(ctx.attrs().getInt("axis"), data.rank());
    int q = ctx.inShape(1).rank();
    ElementGen x = ctx.inputs[0], indices = ctx.inputs[1];
    return {[=](const Index& idx) {
      Index at(idx.begin() + axis, idx.begin() + axis + q);
      Index src(idx.begin(), idx.begin() + axis);
      src.push_back(normalizeIndex(*kb, indices(at), data[axis]));
      src.insert(src.end(), idx.begin() + axis + q, idx.end());
      return x(src);
    }};
  };
  d.indexChecks = [](const Node& n) -> std::vector<IndexCheck> {
    const Shape& data = n.input(0)->shape();
    return {ops::axisIndexCheck(1, data[*normalizeAxis(n.attrs().getInt("axis"), data.rank())])};
  };
  define(r, std::move(d));
}

void defineGatherElements(OpRegistry& r) {
  OpDef d = newDef(OpKind::GatherElements);
  d.minInputs = 2, d.maxInputs = 2;
  d.attrs = {ops::attrInt("axis", 0)};
  d.infer = [](InferContext& ctx) -> Status {
    NNC_RETURN_IF_ERROR(requireInput(ctx, 1, "indices"));
    NNC_RETURN_IF_ERROR(requireIndexType(ctx, 1, "indices"));
    const Shape &data = ctx.inShape(0), &ind = ctx.inShape(1);
    if (data.rank() == 0) return ctx.error("data must have rank >= 1");
    if (ind.rank() != data.rank())
      return ctx.error("indices " + ind.str() + " must have the rank of data " + data.str());
    Expected<int> axis = axisFor(ctx.attrs().getInt("axis"), data.rank());
    if (!axis) return ctx.error(axis.status().message());
    for (int i = 0; i < data.rank(); ++i) {
      if (i != *axis && ind[i] > data[i])
        return ctx.error("indices " + ind.str() + " exceed data " + data.str() + " in dim " + std::to_string(i));
    }
    if (data[*axis] == 0 && ind.numel() > 0) return ctx.error("cannot gather from an empty axis");
    ctx.setOutput(0, ctx.inType(0), ind);
    return Status::ok();
  };
  d.lowerElement = [](LowerContext& ctx) -> std::vector<ElementGen> {
    KernelBuilder* kb = &ctx.kb;
    Shape data = ctx.inShape(0);
    int axis = *normalizeAxis(ctx.attrs().getInt("axis"), data.rank());
    ElementGen x = ctx.inputs[0], indices = ctx.inputs[1];
    return {[=](const Index& idx) {
      Index src(idx);
      src[axis] = normalizeIndex(*kb, indices(idx), data[axis]);
      return x(src);
    }};
  };
  d.indexChecks = [](const Node& n) -> std::vector<IndexCheck> {
    const Shape& data = n.input(0)->shape();
    return {ops::axisIndexCheck(1, data[*normalizeAxis(n.attrs().getInt("axis"), data.rank())])};
  };
  define(r, std::move(d));
}

void defineGatherND(OpRegistry& r) {
  OpDef d = newDef(OpKind::GatherND);
  d.minInputs = 2, d.maxInputs = 2;
  d.attrs = {ops::attrInt("batch_dims", 0)};
  d.infer = [](InferContext& ctx) -> Status {
    NNC_RETURN_IF_ERROR(requireInput(ctx, 1, "indices"));
    NNC_RETURN_IF_ERROR(requireIndexType(ctx, 1, "indices"));
    const Shape &data = ctx.inShape(0), &ind = ctx.inShape(1);
    int64_t b = ctx.attrs().getInt("batch_dims");
    int r = data.rank(), q = ind.rank();
    if (r < 1 || q < 1) return ctx.error("data and indices must have rank >= 1");
    if (b < 0 || b >= std::min(r, q))
      return ctx.error("batch_dims " + std::to_string(b) + " must be less than the ranks of data (" +
                       std::to_string(r) + ") and indices (" + std::to_string(q) + ")");
    for (int i = 0; i < b; ++i) {
      if (data[i] != ind[i])
        return ctx.error("batch dim " + std::to_string(i) + " differs: data " + data.str() + ", indices " + ind.str());
    }
    int64_t k = ind[q - 1];
    if (k < 1 || k > r - b)
      return ctx.error("indices " + ind.str() + " index " + std::to_string(k) + " dims, expected 1.." +
                       std::to_string(r - b));
    for (int64_t j = 0; j < k; ++j) {
      if (data[static_cast<int>(b + j)] == 0 && ind.numel() > 0) return ctx.error("cannot gather from an empty dim");
    }
    Shape out;
    for (int i = 0; i < q - 1; ++i) out.dims().push_back(ind[i]);
    for (int i = static_cast<int>(b + k); i < r; ++i) out.dims().push_back(data[i]);
    ctx.setOutput(0, ctx.inType(0), out);
    return Status::ok();
  };
  d.lowerElement = [](LowerContext& ctx) -> std::vector<ElementGen> {
    KernelBuilder* kb = &ctx.kb;
    Shape data = ctx.inShape(0);
    int q = ctx.inShape(1).rank();
    int b = static_cast<int>(ctx.attrs().getInt("batch_dims"));
    int k = static_cast<int>(ctx.inShape(1)[q - 1]);
    ElementGen x = ctx.inputs[0], indices = ctx.inputs[1];
    return {[=](const Index& idx) {
      Index src(idx.begin(), idx.begin() + b);
      Index at(idx.begin(), idx.begin() + (q - 1));
      at.push_back(kir::kNoExpr);
      for (int j = 0; j < k; ++j) {
        at.back() = kb->i64(j);
        src.push_back(normalizeIndex(*kb, indices(at), data[b + j]));
      }
      src.insert(src.end(), idx.begin() + (q - 1), idx.end());
      return x(src);
    }};
  };
  d.indexChecks = [](const Node& n) -> std::vector<IndexCheck> {
    const Shape &data = n.input(0)->shape(), &ind = n.input(1)->shape();
    const int64_t b = n.attrs().getInt("batch_dims");
    std::vector<int64_t> extents(data.dims().begin() + b, data.dims().begin() + b + ind[ind.rank() - 1]);
    return {ops::tupleIndexCheck(1, std::move(extents))};
  };
  define(r, std::move(d));
}

void defineReverseSequence(OpRegistry& r) {
  OpDef d = newDef(OpKind::ReverseSequence);
  d.minInputs = 2, d.maxInputs = 2;
  d.attrs = {ops::attrInt("batch_axis", 1), ops::attrInt("time_axis", 0)};
  d.infer = [](InferContext& ctx) -> Status {
    NNC_RETURN_IF_ERROR(requireInput(ctx, 1, "sequence_lens"));
    NNC_RETURN_IF_ERROR(requireIndexType(ctx, 1, "sequence_lens"));
    int64_t batch = ctx.attrs().getInt("batch_axis"), time = ctx.attrs().getInt("time_axis");
    if (ctx.inRank(0) < 2) return ctx.error("input must have rank >= 2, got " + ctx.inShape(0).str());
    if (!((batch == 0 && time == 1) || (batch == 1 && time == 0)))
      return ctx.error("batch_axis and time_axis must be 0 and 1 in some order, got " + std::to_string(batch) +
                       " and " + std::to_string(time));
    Shape lens({ctx.inShape(0)[static_cast<int>(batch)]});
    if (ctx.inShape(1) != lens)
      return ctx.error("sequence_lens has shape " + ctx.inShape(1).str() + ", expected " + lens.str());
    ctx.setOutput(0, ctx.inType(0), ctx.inShape(0));
    return Status::ok();
  };
  d.lowerElement = [](LowerContext& ctx) -> std::vector<ElementGen> {
    KernelBuilder* kb = &ctx.kb;
    int batch = static_cast<int>(ctx.attrs().getInt("batch_axis"));
    int time = static_cast<int>(ctx.attrs().getInt("time_axis"));
    int64_t steps = ctx.inShape(0)[time];
    ElementGen x = ctx.inputs[0], lens = ctx.inputs[1];
    return {[=](const Index& idx) {
      ExprId len = toI64(*kb, lens({idx[batch]}));
      ExprId t = idx[time];
      // The first len steps are reversed, the rest copied.
      ExprId reversed = kb->sub(kb->sub(len, kb->i64(1)), t);
      Index src(idx);
      src[time] = kb->clamp(kb->select(kb->lt(t, len), reversed, t), 0, steps - 1);
      return x(src);
    }};
  };
  d.indexChecks = [](const Node& n) -> std::vector<IndexCheck> {
    const int64_t steps = n.input(0)->shape()[static_cast<int>(n.attrs().getInt("time_axis"))];
    return {{1, "must be in [0, " + std::to_string(steps) + "]", [steps](KernelBuilder& kb, ExprId len, const Index&) {
               return kb.binary(ExprOp::Or, kb.lt(len, kb.i64(0)), kb.binary(ExprOp::Gt, len, kb.i64(steps)));
             }}};
  };
  define(r, std::move(d));
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
  OpDef d = newDef(OpKind::DepthToSpace);
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
  define(r, std::move(d));
}

void defineSpaceToDepth(OpRegistry& r) {
  OpDef d = newDef(OpKind::SpaceToDepth);
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
  define(r, std::move(d));
}

void defineTrilu(OpRegistry& r) {
  OpDef d = newDef(OpKind::Trilu);
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
  define(r, std::move(d));
}

// ----------------------------------------------------------------------------------------------
// Generators: OneHot, Range, ConstantOfShape, EyeLike, Shape, Size

// ONNX allows any numeric type for depth (its own tests use f32), so it is a Float attribute.
std::optional<int64_t> oneHotDepth(const Node& n) {
  // Saturating: a depth of -inf, NaN or 1e300 (fuzzer findings) is then refused as a depth, not UB.
  if (const AttrValue* v = n.attrs().find("depth")) return saturatingToInt64(std::get<double>(*v));
  const Value* in = n.input(1);
  if (in && in->isConstant() && in->constant().numel() == 1) return saturatingToInt64(in->constant().getDouble(0));
  return std::nullopt;
}

void defineOneHot(OpRegistry& r) {
  OpDef d = newDef(OpKind::OneHot);
  d.minInputs = 1, d.maxInputs = 3;  // input 1 (depth) becomes an attribute
  d.attrs = {ops::attrInt("axis", -1), ops::optionalAttr("depth", AttrKind::Float)};
  d.staticInputs = {{1, "depth", AttrKind::Float}};
  d.infer = [](InferContext& ctx) -> Status {
    NNC_RETURN_IF_ERROR(requireInput(ctx, 2, "values"));
    std::optional<int64_t> depth = oneHotDepth(ctx.node());
    if (!depth) return ctx.error("'depth' is required (input 1)");
    if (*depth <= 0) return ctx.error("depth must be positive, got " + std::to_string(*depth));
    if (ctx.inShape(2) != Shape({2}))
      return ctx.error("values must have shape [2] (off, on), got " + ctx.inShape(2).str());
    if (isHalfLike(ctx.inType(0)) || ctx.inType(0) == DType::Bool)
      return ctx.error("indices of type " + std::string(dtypeName(ctx.inType(0))) + " are not supported");
    const Shape& ind = ctx.inShape(0);
    Expected<int> axis = axisFor(ctx.attrs().getInt("axis"), ind.rank() + 1);
    if (!axis) return ctx.error(axis.status().message());
    Shape out = ind;
    out.dims().insert(out.dims().begin() + *axis, *depth);
    if (!out.checkedNumel()) return ctx.error("output " + out.str() + " is too large");
    ctx.setOutput(0, ctx.inType(2), out);
    return Status::ok();
  };
  d.lowerElement = [](LowerContext& ctx) -> std::vector<ElementGen> {
    KernelBuilder* kb = &ctx.kb;
    int64_t depth = *oneHotDepth(ctx.node);
    int axis = *normalizeAxis(ctx.attrs().getInt("axis"), ctx.inShape(0).rank() + 1);
    ElementGen indices = ctx.inputs[0], values = ctx.inputs[2];
    return {[=](const Index& idx) {
      Index at(idx);
      at.erase(at.begin() + axis);
      ExprId i = toI64(*kb, indices(at));
      i = kb->select(kb->lt(i, kb->i64(0)), kb->add(i, kb->i64(depth)), i);
      return kb->select(kb->eq(i, idx[axis]), values({kb->i64(1)}), values({kb->i64(0)}));
    }};
  };
  define(r, std::move(d));
}

// Range's element count: ceil((limit - start) / delta) computed in the tensors' own type.
Expected<int64_t> rangeCount(const Tensor& start, const Tensor& limit, const Tensor& delta) {
  DType t = start.dtype();
  double count;
  if (isFloat(t)) {
    double s = start.getDouble(0), l = limit.getDouble(0), d = delta.getDouble(0);
    if (d == 0) return fail("delta must not be zero");
    if (t == DType::F64)
      count = std::ceil((l - s) / d);
    else
      count = std::ceil(static_cast<float>(static_cast<float>(l) - static_cast<float>(s)) / static_cast<float>(d));
    if (std::isnan(count)) return fail("start, limit and delta must be finite");
  } else {
    // In 128 bits: limit - start overflows int64 for far-apart ends.
    const __int128 s = start.getInt(0), l = limit.getInt(0), d = delta.getInt(0);
    if (d == 0) return fail("delta must not be zero");
    __int128 diff = l - s, q = diff / d;
    if (diff % d != 0 && ((diff < 0) == (d < 0))) ++q;
    count = static_cast<double>(q);
  }
  // A count of -inf (a limit of -inf) is an empty range; converting it to an integer would be UB.
  if (count <= 0) return 0;
  if (count > static_cast<double>(kMaxElements)) return fail("range has too many elements");
  return static_cast<int64_t>(count);
}

void defineRange(OpRegistry& r) {
  OpDef d = newDef(OpKind::Range);
  d.minInputs = 0, d.maxInputs = 3;
  d.attrs = {ops::optionalAttr("start", AttrKind::Tensor), ops::optionalAttr("limit", AttrKind::Tensor),
             ops::optionalAttr("delta", AttrKind::Tensor)};
  d.staticInputs = {{0, "start", AttrKind::Tensor}, {1, "limit", AttrKind::Tensor}, {2, "delta", AttrKind::Tensor}};
  d.infer = [](InferContext& ctx) -> Status {
    const char* names[] = {"start", "limit", "delta"};
    std::vector<Tensor> t;
    for (int i = 0; i < 3; ++i) {
      std::optional<Tensor> v = staticTensor(ctx.node(), names[i], i);
      if (!v) return ctx.error(std::string("'") + names[i] + "' is required (input " + std::to_string(i) + ")");
      if (v->numel() != 1) return ctx.error(std::string(names[i]) + " must be a scalar, got " + v->shape().str());
      if (v->dtype() != (t.empty() ? v->dtype() : t[0].dtype()))
        return ctx.error(std::string(names[i]) + " has type " + std::string(dtypeName(v->dtype())) + ", expected " +
                         std::string(dtypeName(t[0].dtype())));
      t.push_back(*v);
    }
    if (t[0].dtype() == DType::Bool) return ctx.error("range of bool is not supported");
    Expected<int64_t> n = rangeCount(t[0], t[1], t[2]);
    if (!n) return ctx.error(n.status().message());
    ctx.setOutput(0, t[0].dtype(), Shape({*n}));
    return Status::ok();
  };
  d.lowerElement = [](LowerContext& ctx) -> std::vector<ElementGen> {
    KernelBuilder* kb = &ctx.kb;
    Tensor start = *staticTensor(ctx.node, "start", 0), delta = *staticTensor(ctx.node, "delta", 2);
    DType type = ctx.outType(0), et = exprType(type);
    return {[=](const Index& idx) {
      // output[i] = start + i * delta, in the output's type.
      return kb->add(tensorElement(*kb, start, 0, type),
                     kb->mul(kb->cast(et, idx[0]), tensorElement(*kb, delta, 0, type)));
    }};
  };
  define(r, std::move(d));
}

void defineConstantOfShape(OpRegistry& r) {
  OpDef d = newDef(OpKind::ConstantOfShape);
  d.minInputs = 0, d.maxInputs = 1;
  d.attrs = {ops::optionalAttr("shape", AttrKind::Ints),
             {"value", AttrKind::Tensor, AttrValue(Tensor(DType::F32, Shape({1}))), false}};
  d.staticInputs = {{0, "shape", AttrKind::Ints}};
  d.infer = [](InferContext& ctx) -> Status {
    std::optional<std::vector<int64_t>> shape = staticInts(ctx.node(), "shape", 0);
    if (!shape) return ctx.error("'shape' is required (input 0)");
    const Tensor& value = ctx.attrs().getTensor("value");
    if (value.numel() != 1) return ctx.error("value must have exactly one element, got " + value.shape().str());
    Shape out(*shape);
    if (!out.checkedNumel()) return ctx.error("shape " + intsStr(*shape) + " is invalid");
    ctx.setOutput(0, value.dtype(), out);
    return Status::ok();
  };
  d.lowerElement = [](LowerContext& ctx) -> std::vector<ElementGen> {
    KernelBuilder* kb = &ctx.kb;
    Tensor value = ctx.attrs().getTensor("value");
    DType type = ctx.outType(0);
    return {[=](const Index&) { return tensorElement(*kb, value, 0, type); }};
  };
  define(r, std::move(d));
}

void defineEyeLike(OpRegistry& r) {
  OpDef d = newDef(OpKind::EyeLike);
  d.attrs = {ops::optionalAttr("dtype", AttrKind::Int), ops::attrInt("k", 0)};
  d.dependsOnlyOnShapes = true;
  d.infer = [](InferContext& ctx) -> Status {
    if (ctx.inRank(0) != 2) return ctx.error("expected a 2-D input, got " + ctx.inShape(0).str());
    DType type = ctx.inType(0);
    if (const AttrValue* v = ctx.attrs().find("dtype")) {
      std::optional<DType> t = dtypeFromOnnx(static_cast<int>(std::get<int64_t>(*v)));
      if (!t) return ctx.error("dtype " + std::to_string(std::get<int64_t>(*v)) + " is not supported");
      type = *t;
    }
    ctx.setOutput(0, type, ctx.inShape(0));
    return Status::ok();
  };
  d.lowerElement = [](LowerContext& ctx) -> std::vector<ElementGen> {
    KernelBuilder* kb = &ctx.kb;
    int64_t k = ctx.attrs().getInt("k");
    DType et = exprType(ctx.outType(0));
    return {[=](const Index& idx) {
      ExprId onDiagonal = kb->eq(kb->sub(idx[1], idx[0]), kb->i64(k));
      return kb->select(onDiagonal, kb->constant(et, 1), kb->constant(et, 0));
    }};
  };
  define(r, std::move(d));
}

// Shape's [start, end) window: negative values count from the end, then clamp into [0, rank].
std::vector<int64_t> shapeWindow(const Node& n, const Shape& in) {
  int64_t rank = in.rank();
  auto norm = [&](int64_t v) { return std::clamp<int64_t>(v < 0 ? v + rank : v, 0, rank); };
  int64_t start = norm(n.attrs().getInt("start")), end = norm(n.attrs().getInt("end", rank));
  std::vector<int64_t> dims;
  for (int64_t i = start; i < end; ++i) dims.push_back(in[static_cast<int>(i)]);
  return dims;
}

void defineShape(OpRegistry& r) {
  OpDef d = newDef(OpKind::Shape);
  d.attrs = {ops::attrInt("start", 0), ops::optionalAttr("end", AttrKind::Int)};
  d.dependsOnlyOnShapes = true;
  d.infer = [](InferContext& ctx) -> Status {
    int64_t n = static_cast<int64_t>(shapeWindow(ctx.node(), ctx.inShape(0)).size());
    ctx.setOutput(0, DType::I64, Shape({n}));
    return Status::ok();
  };
  d.lowerElement = [](LowerContext& ctx) -> std::vector<ElementGen> {
    KernelBuilder* kb = &ctx.kb;
    std::vector<int64_t> dims = shapeWindow(ctx.node, ctx.inShape(0));
    return {[=](const Index& idx) {
      if (dims.empty()) return kb->i64(0);  // an empty output: never run
      int64_t known;
      if (kb->isConstInt(idx[0], &known)) return kb->i64(dims[std::clamp<int64_t>(known, 0, dims.size() - 1)]);
      ExprId v = kb->i64(dims.back());
      for (int i = static_cast<int>(dims.size()) - 2; i >= 0; --i)
        v = kb->select(kb->eq(idx[0], kb->i64(i)), kb->i64(dims[i]), v);
      return v;
    }};
  };
  define(r, std::move(d));
}

void defineSize(OpRegistry& r) {
  OpDef d = newDef(OpKind::Size);
  d.dependsOnlyOnShapes = true;
  d.infer = [](InferContext& ctx) -> Status {
    ctx.setOutput(0, DType::I64, Shape());
    return Status::ok();
  };
  d.lowerElement = [](LowerContext& ctx) -> std::vector<ElementGen> {
    KernelBuilder* kb = &ctx.kb;
    int64_t n = ctx.inShape(0).numel();
    return {[=](const Index&) { return kb->i64(n); }};
  };
  define(r, std::move(d));
}

}  // namespace

namespace ops {
void defineResize(OpRegistry& r);  // ir/ops/resize.cpp
}  // namespace ops

void defineMovementOps(OpRegistry& r) {
  defineReshape(r);
  defineTranspose(r);
  defineExpand(r);
  defineTile(r);
  defineSlice(r);
  defineConcat(r);
  defineSplit(r);
  definePad(r);
  defineGather(r);
  defineGatherElements(r);
  defineGatherND(r);
  defineReverseSequence(r);
  defineDepthToSpace(r);
  defineSpaceToDepth(r);
  defineTrilu(r);
  defineOneHot(r);
  defineRange(r);
  defineConstantOfShape(r);
  defineEyeLike(r);
  defineShape(r);
  defineSize(r);
  ops::defineResize(r);
}

}  // namespace nnc
