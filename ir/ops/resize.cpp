// The Resize op definition (Injective): nearest, linear and cubic interpolation over any number of
// axes, as a weighted sum of loads at computed indices.
//
// Semantics follow the ONNX reference implementation (onnx/reference/ops/op_resize.py): per axis the
// output coordinate maps to x_original (coordinate_transformation_mode), the taps are the nearest
// input positions with edge clamping, and an N-D resize is the tensor product of the 1-D ones.
// Coordinates and weights are computed in f64 as the reference does.
#include <algorithm>
#include <cmath>
#include <optional>
#include <string>
#include <vector>

#include "ir/op_registry.h"
#include "ir/ops/common.h"

namespace nnc::ops {
namespace {

using kir::ElementGen;
using kir::ExprId;
using kir::ExprOp;
using kir::KernelBuilder;
using Index = std::vector<ExprId>;

enum class Coord { HalfPixel, HalfPixelSymmetric, PytorchHalfPixel, AlignCorners, Asymmetric, TfCropAndResize };
enum class Mode { Nearest, Linear, Cubic };
enum class Nearest { RoundPreferFloor, RoundPreferCeil, Floor, Ceil };

struct Axis {
  int64_t inLen = 0, outLen = 0;
  double scale = 1, roiStart = 0, roiEnd = 1;
  bool identity = true;  // output index == input index: no taps needed
};

struct Plan {
  Coord coord;
  Mode mode;
  Nearest nearest;
  double cubicA, extrapolation;
  bool excludeOutside;
  std::vector<Axis> axes;  // one per dim
  Shape out;
};

Status fail(const std::string& message) { return Status::error(message); }

// A static input: the attribute the importer made, or a constant input; empty means absent (ONNX
// passes "" or an empty tensor for an omitted roi/scales/sizes).
template <class T>
std::optional<std::vector<T>> staticList(const Node& n, const std::string& name, int input) {
  std::vector<T> v;
  if (const AttrValue* a = n.attrs().find(name)) {
    v = std::get<std::vector<T>>(*a);
  } else if (const Value* in = n.input(input); in && in->isConstant()) {
    if constexpr (std::is_same_v<T, double>)
      v = in->constant().toDoubles();
    else
      v = in->constant().toInt64s();
  }
  if (v.empty()) return std::nullopt;
  return v;
}

template <class E>
std::optional<E> pick(const std::string& s, std::initializer_list<std::pair<const char*, E>> table) {
  for (const auto& [name, e] : table)
    if (s == name) return e;
  return std::nullopt;
}

Expected<Plan> planResize(const Node& n, const Shape& in) {
  const Attributes& a = n.attrs();
  Plan p;
  if (a.getInt("antialias") != 0)
    return fail("antialias=" + std::to_string(a.getInt("antialias")) + " is an unsupported Resize mode");
  const std::string& coordName = a.getString("coordinate_transformation_mode");
  auto coord = pick<Coord>(coordName, {{"half_pixel", Coord::HalfPixel},
                                       {"half_pixel_symmetric", Coord::HalfPixelSymmetric},
                                       {"pytorch_half_pixel", Coord::PytorchHalfPixel},
                                       {"align_corners", Coord::AlignCorners},
                                       {"asymmetric", Coord::Asymmetric},
                                       {"tf_crop_and_resize", Coord::TfCropAndResize}});
  if (!coord) return fail("coordinate_transformation_mode '" + coordName + "' is not supported");
  auto mode =
      pick<Mode>(a.getString("mode"), {{"nearest", Mode::Nearest}, {"linear", Mode::Linear}, {"cubic", Mode::Cubic}});
  if (!mode) return fail("mode '" + a.getString("mode") + "' is not one of nearest, linear, cubic");
  auto nearest = pick<Nearest>(a.getString("nearest_mode"), {{"round_prefer_floor", Nearest::RoundPreferFloor},
                                                             {"round_prefer_ceil", Nearest::RoundPreferCeil},
                                                             {"floor", Nearest::Floor},
                                                             {"ceil", Nearest::Ceil}});
  if (!nearest) return fail("nearest_mode '" + a.getString("nearest_mode") + "' is not supported");
  const std::string& policy = a.getString("keep_aspect_ratio_policy");
  if (policy != "stretch" && policy != "not_larger" && policy != "not_smaller")
    return fail("keep_aspect_ratio_policy '" + policy + "' is not one of stretch, not_larger, not_smaller");
  p.coord = *coord, p.mode = *mode, p.nearest = *nearest;
  p.cubicA = a.getFloat("cubic_coeff_a");
  p.extrapolation = a.getFloat("extrapolation_value");
  p.excludeOutside = a.getInt("exclude_outside") != 0;

  std::vector<int> axes;
  for (int64_t axis : a.getInts("axes", {})) {
    std::optional<int> ax = normalizeAxis(axis, in.rank());
    if (!ax) return fail("axis " + std::to_string(axis) + " is out of range for rank " + std::to_string(in.rank()));
    if (std::find(axes.begin(), axes.end(), *ax) != axes.end())
      return fail("axis " + std::to_string(axis) + " is repeated in axes");
    axes.push_back(*ax);
  }
  if (!a.has("axes"))
    for (int i = 0; i < in.rank(); ++i) axes.push_back(i);
  size_t count = axes.size();

  auto roi = staticList<double>(n, "roi", 1);
  auto scales = staticList<double>(n, "scales", 2);
  auto sizes = staticList<int64_t>(n, "sizes", 3);
  if (scales && sizes) return fail("only one of scales and sizes may be given");
  if (!scales && !sizes) return fail("one of scales and sizes is required");
  if (roi && roi->size() != 2 * count) return fail(countMessage("roi", roi->size(), 2 * count));
  if (p.coord == Coord::TfCropAndResize && !roi) return fail("roi is required by tf_crop_and_resize");

  p.axes.resize(in.rank());
  p.out = in;
  for (int i = 0; i < in.rank(); ++i) p.axes[i].inLen = p.axes[i].outLen = in[i];
  if (scales) {
    if (scales->size() != count) return fail(countMessage("scales", scales->size(), count));
    for (size_t i = 0; i < count; ++i) {
      double s = (*scales)[i];
      if (!(s > 0))
        return fail("scales value " + std::to_string(s) + " at position " + std::to_string(i) + " must be positive");
      Axis& ax = p.axes[axes[i]];
      ax.scale = s;
      double extent = p.coord == Coord::TfCropAndResize ? (*roi)[i + count] - (*roi)[i] : 1.0;
      // Saturating: a huge or infinite scale (or roi) gives a size the shape check refuses, not UB.
      ax.outLen = saturatingToInt64(std::floor(static_cast<double>(ax.inLen) * extent * s));
    }
  } else {
    if (sizes->size() != count) return fail(countMessage("sizes", sizes->size(), count));
    for (size_t i = 0; i < count; ++i) {
      if ((*sizes)[i] < 0) return fail("sizes " + listStr(*sizes) + " has a negative value");
      if (in[axes[i]] == 0) return fail("cannot resize axis " + std::to_string(axes[i]) + ", which is empty");
    }
    if (policy == "stretch") {
      for (size_t i = 0; i < count; ++i) {
        Axis& ax = p.axes[axes[i]];
        ax.outLen = (*sizes)[i];
        ax.scale = static_cast<double>(ax.outLen) / static_cast<double>(ax.inLen);
      }
    } else {
      // One scale for all axes, the largest that fits (not_larger) or the smallest that covers.
      double s = policy == "not_larger" ? INFINITY : 0;
      for (size_t i = 0; i < count; ++i) {
        double si = static_cast<double>((*sizes)[i]) / static_cast<double>(in[axes[i]]);
        s = policy == "not_larger" ? std::min(s, si) : std::max(s, si);
      }
      for (size_t i = 0; i < count; ++i) {
        Axis& ax = p.axes[axes[i]];
        ax.scale = s;
        ax.outLen = saturatingToInt64(std::floor(s * static_cast<double>(ax.inLen) + 0.5));
      }
    }
  }
  for (size_t i = 0; i < count; ++i) {
    Axis& ax = p.axes[axes[i]];
    if (roi) ax.roiStart = (*roi)[i], ax.roiEnd = (*roi)[i + count];
    if (ax.inLen == 0 && ax.outLen > 0)
      return fail("cannot resize axis " + std::to_string(axes[i]) + ", which is empty");
    bool fullRoi = p.coord != Coord::TfCropAndResize || (ax.roiStart == 0 && ax.roiEnd == 1);
    ax.identity = (ax.inLen == ax.outLen && ax.scale == 1.0 && fullRoi) || ax.outLen == 0;
    p.out[axes[i]] = ax.outLen;
  }
  if (!p.out.checkedNumel()) return fail("output " + p.out.str() + " is too large");
  return p;
}

// x_original for output coordinate `i` along one axis, in f64 (the reference's formulas, in its order).
ExprId sourceCoord(KernelBuilder& kb, const Plan& p, const Axis& ax, ExprId i) {
  auto c = [&](double v) { return kb.constant(DType::F64, v); };
  ExprId x = kb.cast(DType::F64, i);
  double inLen = static_cast<double>(ax.inLen), outLen = static_cast<double>(ax.outLen);
  double outWidth = ax.scale * inLen;  // the reference uses the unrounded output width here
  auto halfPixel = [&] { return kb.sub(kb.div(kb.add(x, c(0.5)), c(ax.scale)), c(0.5)); };
  switch (p.coord) {
    case Coord::HalfPixel: return halfPixel();
    case Coord::Asymmetric: return kb.div(x, c(ax.scale));
    case Coord::AlignCorners:
      if (outWidth == 1) return c(0);
      return kb.div(kb.mul(x, c(inLen - 1)), c(outWidth - 1));
    case Coord::PytorchHalfPixel: return outWidth == 1 ? c(-0.5) : halfPixel();
    case Coord::HalfPixelSymmetric: {
      double adjustment = outLen / outWidth;
      double offset = inLen / 2 * (1 - adjustment);
      return kb.sub(kb.add(c(offset), kb.div(kb.add(x, c(0.5)), c(ax.scale))), c(0.5));
    }
    case Coord::TfCropAndResize: {
      if (ax.outLen <= 1) return c(0.5 * (ax.roiStart + ax.roiEnd) * (inLen - 1));
      ExprId scaled = kb.mul(kb.mul(x, c(ax.roiEnd - ax.roiStart)), c(inLen - 1));
      return kb.add(c(ax.roiStart * (inLen - 1)), kb.div(scaled, c(outLen - 1)));
    }
  }
  return x;
}

struct Tap {
  ExprId index;   // i64, clamped into the axis
  ExprId weight;  // f64, kNoExpr for weight 1
};

// Cubic convolution weights for the taps at floor(x) - 1 .. floor(x) + 2, given r = x - floor(x).
std::vector<ExprId> cubicWeights(KernelBuilder& kb, ExprId r, double a) {
  auto c = [&](double v) { return kb.constant(DType::F64, v); };
  // Near taps (|t| <= 1): ((A+2)t - (A+3)) t^2 + 1; far taps (1 < |t| < 2): ((At - 5A)t + 8A)t - 4A.
  auto near = [&](ExprId t) { return kb.add(kb.mul(kb.mul(kb.sub(kb.mul(c(a + 2), t), c(a + 3)), t), t), c(1)); };
  auto far = [&](ExprId t) {
    return kb.sub(kb.mul(kb.add(kb.mul(kb.sub(kb.mul(c(a), t), c(5 * a)), t), c(8 * a)), t), c(4 * a));
  };
  ExprId oneMinusR = kb.sub(c(1), r);
  return {far(kb.add(r, c(1))), near(r), near(oneMinusR), far(kb.add(oneMinusR, c(1)))};
}

std::vector<Tap> axisTaps(KernelBuilder& kb, const Plan& p, const Axis& ax, ExprId x) {
  auto c = [&](double v) { return kb.constant(DType::F64, v); };
  int64_t last = ax.inLen - 1;
  ExprId base = kb.unary(ExprOp::Floor, x);
  ExprId r = kb.sub(x, base);
  ExprId i0 = kb.cast(DType::I64, base);
  if (p.mode == Mode::Nearest) {
    ExprId up = kb.boolean(false);  // whether the nearest position is floor(x) + 1
    switch (p.nearest) {
      case Nearest::RoundPreferFloor: up = kb.lt(c(0.5), r); break;
      case Nearest::RoundPreferCeil: up = kb.le(c(0.5), r); break;
      case Nearest::Floor: up = kb.boolean(false); break;
      case Nearest::Ceil: up = kb.lt(c(0), r); break;
    }
    ExprId index = kb.add(i0, kb.select(up, kb.i64(1), kb.i64(0)));
    return {{kb.clamp(index, 0, last), kir::kNoExpr}};
  }
  std::vector<ExprId> weights;
  int64_t first;
  if (p.mode == Mode::Linear) {
    weights = {kb.sub(c(1), r), r};
    first = 0;
  } else {
    weights = cubicWeights(kb, r, p.cubicA);
    first = -1;
  }
  std::vector<Tap> taps;
  std::vector<ExprId> positions;
  for (size_t k = 0; k < weights.size(); ++k) positions.push_back(kb.add(i0, kb.i64(first + static_cast<int64_t>(k))));
  if (p.excludeOutside) {
    // Taps outside the input get weight 0; the rest are renormalised to sum to 1.
    ExprId sum = c(0);
    for (size_t k = 0; k < weights.size(); ++k) {
      ExprId inside = kb.logicalAnd(kb.le(kb.i64(0), positions[k]), kb.le(positions[k], kb.i64(last)));
      weights[k] = kb.select(inside, weights[k], c(0));
      sum = kb.add(sum, weights[k]);
    }
    for (ExprId& w : weights) w = kb.div(w, sum);
  }
  for (size_t k = 0; k < weights.size(); ++k) taps.push_back({kb.clamp(positions[k], 0, last), weights[k]});
  return taps;
}

ExprId lowerAt(KernelBuilder& kb, const Plan& p, const ElementGen& x, DType outType, const Index& idx) {
  DType et = isHalfLike(outType) ? DType::F32 : outType;
  std::vector<std::vector<Tap>> taps(idx.size());
  ExprId outside = kir::kNoExpr;  // tf_crop_and_resize: a source coordinate outside the input
  for (size_t d = 0; d < idx.size(); ++d) {
    const Axis& ax = p.axes[d];
    if (ax.identity) {
      taps[d] = {{idx[d], kir::kNoExpr}};
      continue;
    }
    ExprId xo = sourceCoord(kb, p, ax, idx[d]);
    if (p.coord == Coord::TfCropAndResize) {
      ExprId out = kb.binary(ExprOp::Or, kb.lt(xo, kb.constant(DType::F64, 0)),
                             kb.lt(kb.constant(DType::F64, static_cast<double>(ax.inLen - 1)), xo));
      outside = outside == kir::kNoExpr ? out : kb.binary(ExprOp::Or, outside, out);
    }
    taps[d] = axisTaps(kb, p, ax, xo);
  }
  // Sum over the tensor product of the per-axis taps.
  ExprId value = kir::kNoExpr;
  std::vector<size_t> pos(idx.size(), 0);
  while (true) {
    Index src(idx.size());
    ExprId weight = kir::kNoExpr;
    for (size_t d = 0; d < idx.size(); ++d) {
      const Tap& t = taps[d][pos[d]];
      src[d] = t.index;
      if (t.weight != kir::kNoExpr) weight = weight == kir::kNoExpr ? t.weight : kb.mul(weight, t.weight);
    }
    ExprId term = x(src);
    if (weight != kir::kNoExpr)
      term = kb.mul(weight, kb.cast(DType::F64, term));
    else if (p.mode != Mode::Nearest)
      term = kb.cast(DType::F64, term);
    value = value == kir::kNoExpr ? term : kb.add(value, term);
    size_t d = 0;
    while (d < idx.size() && ++pos[d] == taps[d].size()) pos[d++] = 0;
    if (d == idx.size()) break;
  }
  if (p.mode != Mode::Nearest) value = kb.cast(et, value);
  if (outside != kir::kNoExpr) value = kb.select(outside, kb.constant(et, p.extrapolation), value);
  return value;
}

OpDef resizeDef() {
  OpDef d;
  d.kind = OpKind::Resize;
  d.minInputs = 1, d.maxInputs = 4;
  d.attrs = {optionalAttr("roi", AttrKind::Floats), optionalAttr("scales", AttrKind::Floats),
             optionalAttr("sizes", AttrKind::Ints), attrInt("antialias", 0),
             optionalAttr("axes", AttrKind::Ints),  attrString("coordinate_transformation_mode", "half_pixel"),
             attrFloat("cubic_coeff_a", -0.75),     attrInt("exclude_outside", 0),
             attrFloat("extrapolation_value", 0.0), attrString("keep_aspect_ratio_policy", "stretch"),
             attrString("mode", "nearest"),         attrString("nearest_mode", "round_prefer_floor")};
  d.staticInputs = {{1, "roi", AttrKind::Floats}, {2, "scales", AttrKind::Floats}, {3, "sizes", AttrKind::Ints}};
  d.infer = [](InferContext& ctx) -> Status {
    if (ctx.attrs().getString("mode") != "nearest" && !isFloat(ctx.inType(0)) && !isInteger(ctx.inType(0)))
      return ctx.error("cannot interpolate values of type " + std::string(dtypeName(ctx.inType(0))));
    Expected<Plan> p = planResize(ctx.node(), ctx.inShape(0));
    if (!p) return ctx.error(p.status().message());
    ctx.setOutput(0, ctx.inType(0), p->out);
    return Status::ok();
  };
  d.lowerElement = [](LowerContext& ctx) -> std::vector<ElementGen> {
    KernelBuilder* kb = &ctx.kb;
    Plan p = planResize(ctx.node, ctx.inShape(0)).value();
    ElementGen x = ctx.inputs[0];
    DType type = ctx.outType(0);
    return {[=](const Index& idx) { return lowerAt(*kb, p, x, type, idx); }};
  };
  return d;
}

}  // namespace
}  // namespace nnc::ops

namespace nnc {

void defineResizeOps(OpRegistry& r) { r.define(ops::resizeDef()); }

}  // namespace nnc
