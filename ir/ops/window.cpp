// Sliding-window geometry and tap arithmetic (see window.h).
#include "ir/ops/window.h"

#include <algorithm>
#include <limits>

namespace nnc::ops {

using kir::ExprId;
using kir::ExprOp;
using kir::KernelBuilder;

Status readSpatialInts(const Attributes& attrs, const std::string& name, size_t count, int64_t fallback,
                       int64_t minValue, std::vector<int64_t>* out) {
  *out = attrs.getInts(name, std::vector<int64_t>(count, fallback));
  if (out->size() != count)
    return Status::error(name + " has " + std::to_string(out->size()) + " values, expected " + std::to_string(count));
  for (int64_t v : *out) {
    if (v < minValue)
      return Status::error(name + " must be " + (minValue == 0 ? "non-negative" : "positive") + ", got " +
                           listStr(*out));
    if (v > kMaxWindowValue) return Status::error(name + " " + listStr(*out) + " has a value above 2^31 - 1");
  }
  return Status::ok();
}

Status readAutoPad(const Attributes& attrs, std::string* autoPad) {
  *autoPad = attrs.getString("auto_pad");
  if (*autoPad == "NOTSET" || *autoPad == "SAME_UPPER" || *autoPad == "SAME_LOWER" || *autoPad == "VALID")
    return Status::ok();
  return Status::error("auto_pad '" + *autoPad + "' is not one of NOTSET, SAME_UPPER, SAME_LOWER, VALID");
}

int64_t floorDiv(int64_t a, int64_t b) {
  int64_t q = a / b;
  return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}
int64_t ceilDiv(int64_t a, int64_t b) { return -floorDiv(-a, b); }

std::vector<AttrSpec> windowAttrs() {
  return {attrString("auto_pad", "NOTSET"), optionalAttr("dilations", AttrKind::Ints),
          optionalAttr("pads", AttrKind::Ints), optionalAttr("strides", AttrKind::Ints)};
}

std::vector<AttrSpec> poolAttrs(std::vector<AttrSpec> extra) {
  std::vector<AttrSpec> a = windowAttrs();
  a.push_back(attrInt("ceil_mode", 0));
  a.push_back(requiredAttr("kernel_shape", AttrKind::Ints));
  a.insert(a.end(), extra.begin(), extra.end());
  return a;
}

Status computeWindow(const Attributes& attrs, std::vector<int64_t> in, std::vector<int64_t> kernel, Window* w) {
  const size_t n = in.size();
  w->in = std::move(in);
  w->kernel = std::move(kernel);
  NNC_RETURN_IF_ERROR(readSpatialInts(attrs, "strides", n, 1, 1, &w->strides));
  NNC_RETURN_IF_ERROR(readSpatialInts(attrs, "dilations", n, 1, 1, &w->dilations));
  std::vector<int64_t> pads;
  NNC_RETURN_IF_ERROR(readSpatialInts(attrs, "pads", 2 * n, 0, 0, &pads));
  std::string autoPad;
  NNC_RETURN_IF_ERROR(readAutoPad(attrs, &autoPad));
  const bool ceilMode = attrs.has("ceil_mode") && attrs.getInt("ceil_mode") != 0;
  if (autoPad != "NOTSET" && std::any_of(pads.begin(), pads.end(), [](int64_t p) { return p != 0; }))
    return Status::error("pads " + listStr(pads) + " cannot be combined with auto_pad " + autoPad);
  for (int64_t k : w->kernel) {
    if (k < 1) return Status::error("kernel size must be positive, got " + listStr(w->kernel));
    if (k > kMaxWindowValue) return Status::error("kernel size " + listStr(w->kernel) + " has a value above 2^31 - 1");
  }
  w->padBegin.assign(n, 0);
  w->padEnd.assign(n, 0);
  w->out.assign(n, 0);
  for (size_t i = 0; i < n; ++i) {
    const int ii = static_cast<int>(i);
    const int64_t in = w->in[i], s = w->strides[i], dk = w->extent(ii);

    if (autoPad == "SAME_UPPER" || autoPad == "SAME_LOWER") {
      w->out[i] = ceilDiv(in, s);
      const int64_t total = std::max<int64_t>(0, (w->out[i] - 1) * s + dk - in);
      // The odd extra pad goes at the end for SAME_UPPER, at the beginning for SAME_LOWER.
      w->padBegin[i] = autoPad == "SAME_UPPER" ? total / 2 : total - total / 2;
      w->padEnd[i] = total - w->padBegin[i];
      continue;
    }
    if (autoPad == "NOTSET") {
      w->padBegin[i] = pads[i];
      w->padEnd[i] = pads[n + i];
    }
    const int64_t padded = in + w->padBegin[i] + w->padEnd[i];
    if (dk > padded)
      return Status::error("kernel extent " + std::to_string(dk) + " on spatial axis " + std::to_string(i) +
                           " is larger than the padded input (" + std::to_string(padded) + ")");
    if (ceilMode) {
      w->out[i] = ceilDiv(padded - dk, s) + 1;
      // A window that would start in the end padding is dropped (as PyTorch and ONNX Runtime do).
      if ((w->out[i] - 1) * s >= in + w->padBegin[i]) --w->out[i];
    } else {
      w->out[i] = (padded - dk) / s + 1;
    }
  }
  return Status::ok();
}

std::vector<int64_t> spatialDims(const Shape& s) { return std::vector<int64_t>(s.dims().begin() + 2, s.dims().end()); }

Taps windowTaps(KernelBuilder& kb, const Window& w, const std::vector<ExprId>& o, const std::vector<ExprId>& k) {
  Taps taps;
  taps.valid = kb.boolean(true);
  for (int i = 0; i < w.rank(); ++i) {
    ExprId c =
        kb.add(kb.sub(kb.mul(o[i], kb.i64(w.strides[i])), kb.i64(w.padBegin[i])), kb.mul(k[i], kb.i64(w.dilations[i])));
    taps.coord.push_back(c);
    const int64_t lowest = -w.padBegin[i];
    const int64_t highest = (w.out[i] - 1) * w.strides[i] - w.padBegin[i] + (w.kernel[i] - 1) * w.dilations[i];
    if (lowest < 0) taps.valid = kb.logicalAnd(taps.valid, kb.le(kb.i64(0), c));
    if (highest >= w.in[i]) taps.valid = kb.logicalAnd(taps.valid, kb.lt(c, kb.i64(w.in[i])));
    taps.clamped.push_back(lowest < 0 || highest >= w.in[i] ? kb.clamp(c, 0, w.in[i] - 1) : c);
  }
  return taps;
}

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

ExprId tapCount(KernelBuilder& kb, const Window& w, int i, ExprId o, int64_t lo, int64_t hi) {
  const int64_t s = w.strides[i], d = w.dilations[i], pb = w.padBegin[i], kk = w.kernel[i];
  const int64_t lowest = -pb, highest = (w.out[i] - 1) * s - pb + (kk - 1) * d;
  if (lowest >= lo && highest < hi) return kb.i64(kk);
  ExprId base = kb.sub(kb.mul(o, kb.i64(s)), kb.i64(pb));
  // kmin = ceil((lo - base) / d) = -floor((base - lo) / d); kmax = floor((hi - 1 - base) / d).
  ExprId kmin =
      kb.max(kb.i64(0), kb.unary(ExprOp::Neg, kb.binary(ExprOp::FloorDiv, kb.sub(base, kb.i64(lo)), kb.i64(d))));
  ExprId kmax = kb.min(kb.i64(kk - 1), kb.binary(ExprOp::FloorDiv, kb.sub(kb.i64(hi - 1), base), kb.i64(d)));
  return kb.max(kb.i64(0), kb.add(kb.sub(kmax, kmin), kb.i64(1)));
}

Status kernelShapeWindow(const Node& node, Window* w, bool channelsLast) {
  const Shape& x = node.input(0)->shape();
  if (x.rank() < 3)
    return Status::error("input X has rank " + std::to_string(x.rank()) + ", expected >= 3 " +
                         (channelsLast ? "(N, spatial..., C)" : "(N, C, spatial...)"));
  const std::vector<int64_t>& kernel = node.attrs().getInts("kernel_shape");
  if (static_cast<int>(kernel.size()) != x.rank() - 2)
    return Status::error("kernel_shape has " + std::to_string(kernel.size()) + " values, expected " +
                         std::to_string(x.rank() - 2) + " for a " + std::to_string(x.rank()) + "-D input");
  const std::vector<int64_t> spatial =
      channelsLast ? std::vector<int64_t>(x.dims().begin() + 1, x.dims().end() - 1) : spatialDims(x);
  return computeWindow(node.attrs(), spatial, kernel, w);
}

bool isPointwiseConv(const Node& conv) {
  const Attributes& a = conv.attrs();
  const Shape& w = conv.input(1)->shape();
  for (int i = 2; i < w.rank(); ++i)
    if (w[i] != 1) return false;
  auto allEqual = [&](const char* name, int64_t value) {
    for (int64_t v : a.getInts(name, {})) {
      if (v != value) return false;
    }
    return true;
  };
  const std::string autoPad = a.has("auto_pad") ? a.getString("auto_pad") : "NOTSET";
  return allEqual("strides", 1) && allEqual("pads", 0) && (autoPad == "NOTSET" || autoPad == "VALID");
}

}  // namespace nnc::ops
