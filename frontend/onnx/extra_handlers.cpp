// Handlers for newer ONNX ops that are compositions of nnc ops: CastLike, GroupNormalization,
// CenterCropPad, AffineGrid, MaxUnpool and Col2Im. One short function each; the semantics follow
// the ONNX reference implementation (onnx/reference/ops), which generated the backend test data.
#include <algorithm>
#include <numeric>

#include "frontend/onnx/node_context.h"

namespace nnc::onnx {

namespace {

using Outs = std::vector<Value*>;

bool requireInputs(NodeContext& n, int count) {
  for (int i = 0; i < count; ++i) {
    if (!n.input(i)) {
      n.fail("missing input " + std::to_string(i));
      return false;
    }
  }
  return true;
}

std::string listStr(const std::vector<int64_t>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s + "]";
}

// A spatial attribute with `count` values (default `fallback` each), or nullopt after an error.
constexpr int64_t kMaxSpatialValue = INT32_MAX;

std::optional<std::vector<int64_t>> spatialInts(NodeContext& n, const std::string& name, size_t count, int64_t fallback,
                                                int64_t minValue) {
  std::vector<int64_t> v = n.attrInts(name, std::vector<int64_t>(count, fallback));
  if (n.failed()) return std::nullopt;
  if (v.size() != count) {
    n.fail("attribute '" + name + "' has " + std::to_string(v.size()) + " values, expected " + std::to_string(count));
    return std::nullopt;
  }
  for (int64_t x : v) {
    if (x < minValue) {
      n.fail("attribute '" + name + "' must be " + (minValue == 0 ? "non-negative" : "positive") + ", got " +
             listStr(v));
      return std::nullopt;
    }
    // As for the IR's windows: no real model comes near, and products with dims stay in range.
    if (x > kMaxSpatialValue) {
      n.fail("attribute '" + name + "' " + listStr(v) + " has a value above 2^31 - 1");
      return std::nullopt;
    }
  }
  return v;
}

Tensor filled(DType t, Shape shape, double value) {
  Tensor f(DType::F64, shape);
  for (int64_t i = 0; i < f.numel(); ++i) f.setDouble(i, value);
  return f.castTo(t);
}

// CastLike(x, like): Cast to like's dtype. `saturate` only matters for float8 types, which nnc lacks.
Outs castLikeOp(NodeContext& n) {
  if (!requireInputs(n, 2)) return {};
  Attributes a;
  a.set("to", int64_t{dtypeToOnnx(n.input(1)->dtype())});
  return translateAs(n, OpKind::Cast, {n.input(0)}, a);
}

// GroupNormalization: x [N, C, ...] viewed as [N, G, C/G * ...] is normalised per (n, g) (an
// InstanceNormalization with unit scale), then scaled per channel. Opset 18 gives scale and bias per
// group, opset 21 per channel.
Outs groupNormOp(NodeContext& n) {
  if (!requireInputs(n, 3)) return {};
  Value* x = n.input(0);
  const std::vector<int64_t>& dims = x->shape().dims();
  if (dims.size() < 2) {
    n.fail("input X must have rank >= 2 (N x C x ...), got " + x->shape().str());
    return {};
  }
  if (!isFloat(x->dtype())) {
    n.fail(std::string("input X has type ") + std::string(dtypeName(x->dtype())) + ", expected a float type");
    return {};
  }
  if (!n.hasAttr("num_groups")) {
    n.fail("missing required attribute 'num_groups'");
    return {};
  }
  const int64_t channels = dims[1], groups = n.attrInt("num_groups", 0);
  if (n.failed()) return {};
  if (groups < 1 || channels % groups != 0) {
    n.fail("num_groups " + std::to_string(groups) + " must be positive and divide the " + std::to_string(channels) +
           " channels");
    return {};
  }
  const int64_t paramSize = n.opset() < 21 ? groups : channels;
  for (int i = 1; i <= 2; ++i) {
    if (n.input(i)->shape() != Shape{paramSize}) {
      n.fail(std::string(i == 1 ? "scale" : "bias") + " has shape " + n.input(i)->shape().str() + ", expected [" +
             std::to_string(paramSize) + "] (opset " + std::to_string(n.opset()) + ")");
      return {};
    }
  }
  // Half types are normalised in f32 (stash_type 1, the default, and what the kernel computes in).
  const DType t = x->dtype();
  const DType ct = t == DType::F16 || t == DType::BF16 ? DType::F32 : t;
  Attributes a;
  a.set("epsilon", n.attrFloat("epsilon", 1e-5));
  Value* grouped = n.reshape(n.cast(x, ct), {dims[0], groups, saturatingProduct(dims, 1, dims.size()) / groups});
  Value* normed =
      n.op(OpKind::InstanceNormalization,
           {grouped, n.constant(filled(ct, Shape{groups}, 1.0)), n.constant(filled(ct, Shape{groups}, 0.0))}, a);
  std::vector<int64_t> paramDims(dims.size() - 1, 1);
  paramDims[0] = channels;
  Value* scale = n.cast(n.input(1), ct);
  Value* bias = n.cast(n.input(2), ct);
  if (paramSize != channels) {
    // Per-group parameters repeat over the group's channels.
    Value* perChannel = n.constInts({groups, channels / groups});
    scale = n.op(OpKind::Expand, {n.reshape(scale, {groups, 1}), perChannel});
    bias = n.op(OpKind::Expand, {n.reshape(bias, {groups, 1}), perChannel});
  }
  Value* y = n.reshape(normed, dims);
  y = n.op(OpKind::Add, {n.op(OpKind::Mul, {y, n.reshape(scale, paramDims)}), n.reshape(bias, paramDims)});
  return {n.cast(y, t)};
}

// CenterCropPad(x, shape): per listed axis, a centred Slice when the target is smaller and a
// centred zero Pad when it is larger (the odd element goes to the end in both cases).
Outs centerCropPadOp(NodeContext& n) {
  if (!requireInputs(n, 2)) return {};
  Value* x = n.input(0);
  const int rank = x->shape().rank();
  const Tensor* shapeT = n.constantInput(1, "shape");
  if (!shapeT) return {};
  std::vector<int64_t> target = shapeT->toInt64s();
  std::vector<int64_t> all(rank);
  std::iota(all.begin(), all.end(), 0);
  std::vector<int64_t> axes = n.attrInts("axes", all);
  if (n.failed()) return {};
  if (axes.size() != target.size()) {
    n.fail("input 'shape' has " + std::to_string(target.size()) + " values, expected one per axis (" +
           std::to_string(axes.size()) + ")");
    return {};
  }
  std::vector<int64_t> starts, ends, sliceAxes, pads(2 * rank, 0);
  std::vector<bool> seen(rank, false);
  bool padded = false;
  for (size_t i = 0; i < axes.size(); ++i) {
    std::optional<int> ax = normalizeAxis(axes[i], rank);
    if (!ax || seen[*ax]) {
      n.fail("axis " + std::to_string(axes[i]) +
             (ax ? " is repeated" : " is out of range for rank " + std::to_string(rank)));
      return {};
    }
    seen[*ax] = true;
    const int64_t dim = x->shape()[*ax], want = target[i];
    if (want < 0) {
      n.fail("target size " + std::to_string(want) + " for axis " + std::to_string(axes[i]) + " is negative");
      return {};
    }
    if (want < dim) {
      const int64_t start = (dim - want) / 2;
      starts.push_back(start);
      ends.push_back(start + want);
      sliceAxes.push_back(*ax);
    } else if (want > dim) {
      pads[*ax] = (want - dim) / 2;
      pads[rank + *ax] = want - dim - pads[*ax];
      padded = true;
    }
  }
  Value* y = x;
  if (!starts.empty()) {
    Attributes a;
    a.set("starts", starts);
    a.set("ends", ends);
    a.set("axes", sliceAxes);
    y = n.op(OpKind::Slice, {y}, a);
  }
  if (padded) {
    Attributes a;
    a.set("pads", pads);
    y = n.op(OpKind::Pad, {y}, a);
  }
  return {y};
}

// The normalised coordinate of sample i of `size` along one axis of an AffineGrid base grid.
double gridCoordinate(int64_t i, int64_t size, bool alignCorners) {
  if (size == 1) return 0.0;
  const double di = static_cast<double>(i), ds = static_cast<double>(size);
  return alignCorners ? -1.0 + 2.0 * di / (ds - 1.0) : -1.0 + (2.0 * di + 1.0) / ds;
}

// AffineGrid(theta [N, nd, nd+1], size [N, C, spatial...]): the homogeneous base grid
// [prod(spatial), nd+1] (columns x, y[, z], 1 with x along the last axis) is a host constant, and
// grid = base @ theta^T reshaped to [N, spatial..., nd].
Outs affineGridOp(NodeContext& n) {
  if (!requireInputs(n, 2)) return {};
  Value* theta = n.input(0);
  const Tensor* sizeT = n.constantInput(1, "size");
  if (!sizeT) return {};
  std::vector<int64_t> size = sizeT->toInt64s();
  if (size.size() != 4 && size.size() != 5) {
    n.fail("input 'size' has " + std::to_string(size.size()) + " values, expected 4 (2-D) or 5 (3-D)");
    return {};
  }
  const int64_t nd = static_cast<int64_t>(size.size()) - 2;
  if (!isFloat(theta->dtype()) || theta->shape() != Shape{size[0], nd, nd + 1}) {
    n.fail("theta has type " + std::string(dtypeName(theta->dtype())) + theta->shape().str() + ", expected a float [" +
           std::to_string(size[0]) + ", " + std::to_string(nd) + ", " + std::to_string(nd + 1) + "]");
    return {};
  }
  std::vector<int64_t> spatial(size.begin() + 2, size.end());
  for (int64_t d : spatial) {
    if (d < 1) {
      n.fail("input 'size' " + listStr(size) + " has a non-positive spatial dim");
      return {};
    }
  }
  const bool align = n.attrInt("align_corners", 0) != 0;
  const int64_t points = saturatingProduct(spatial);
  Tensor base(DType::F64, Shape{points, nd + 1});
  for (int64_t p = 0; p < points; ++p) {
    int64_t rest = p;
    for (int64_t axis = nd - 1; axis >= 0; --axis) {
      // Column 0 is x, the last spatial axis.
      base.setDouble(p * (nd + 1) + (nd - 1 - axis), gridCoordinate(rest % spatial[axis], spatial[axis], align));
      rest /= spatial[axis];
    }
    base.setDouble(p * (nd + 1) + nd, 1.0);
  }
  Attributes swap;
  swap.set("perm", std::vector<int64_t>{0, 2, 1});
  Value* grid = n.op(OpKind::MatMul, {n.constant(base.castTo(theta->dtype())), n.op(OpKind::Transpose, {theta}, swap)});
  std::vector<int64_t> outDims = {size[0]};
  outDims.insert(outDims.end(), spatial.begin(), spatial.end());
  outDims.push_back(nd);
  return {n.reshape(grid, outDims)};
}

// MaxUnpool(X, I[, output_shape]): each (n, c) plane is a ScatterElements of X into zeros at I,
// which MaxPool computes as indices into the whole tensor (hence minus the plane's offset). As in
// the ONNX reference, I indexes the inferred shape; a given output_shape pads or crops its end.
Outs maxUnpoolOp(NodeContext& n) {
  if (!requireInputs(n, 2)) return {};
  Value* x = n.input(0);
  const std::vector<int64_t>& dims = x->shape().dims();
  if (dims.size() < 3 || n.input(1)->shape() != x->shape()) {
    n.fail("X " + x->shape().str() + " must have rank >= 3 and the shape of I " + n.input(1)->shape().str());
    return {};
  }
  const size_t nd = dims.size() - 2;
  if (!n.requireInts("kernel_shape")) return {};
  auto kernel = spatialInts(n, "kernel_shape", nd, 1, 1);
  auto strides = spatialInts(n, "strides", nd, 1, 1);
  auto pads = spatialInts(n, "pads", 2 * nd, 0, 0);
  if (!kernel || !strides || !pads) return {};
  std::vector<int64_t> inferred = {dims[0], dims[1]};
  for (size_t i = 0; i < nd; ++i) {
    // In 128 bits: a dim of up to 2^40 (of an empty input) times a stride of up to 2^31.
    const __int128 d =
        static_cast<__int128>(dims[i + 2] - 1) * (*strides)[i] + (*kernel)[i] - (*pads)[i] - (*pads)[nd + i];
    if (d < 1 || d > kMaxElements) {
      n.fail("inferred output size on spatial axis " + std::to_string(i) + " is " +
             (d < 1 ? std::to_string(static_cast<int64_t>(d)) + ", not positive" : std::string("too large")));
      return {};
    }
    inferred.push_back(static_cast<int64_t>(d));
  }
  std::vector<int64_t> outShape = inferred;
  if (n.input(2)) {
    const Tensor* t = n.constantInput(2, "output_shape");
    if (!t) return {};
    outShape = t->toInt64s();
    if (outShape.size() != dims.size() || outShape[0] != dims[0] || outShape[1] != dims[1]) {
      n.fail("output_shape " + listStr(outShape) + " does not match the input " + x->shape().str() +
             " in rank, batch or channels");
      return {};
    }
    if (!Shape(outShape).checkedNumel()) {
      n.fail("output_shape " + listStr(outShape) + " is not a valid shape");
      return {};
    }
  }
  const int64_t planes = saturatingProduct(dims, 0, 2), planeSize = saturatingProduct(inferred, 2, inferred.size()),
                perPlane = saturatingProduct(dims, 2, dims.size());
  if (saturatingProduct({planes, planeSize}) > kMaxElements) {
    n.fail("the unpooled output " + Shape(inferred).str() + " has more than 2^40 elements");
    return {};
  }
  Value* idx = n.reshape(n.cast(n.input(1), DType::I64), {planes, perPlane});
  if (planes > 1) {
    std::vector<int64_t> offsets(planes);
    for (int64_t p = 0; p < planes; ++p) offsets[p] = p * planeSize;
    idx = n.op(OpKind::Sub, {idx, n.constant(Tensor::fromInt64s(offsets, Shape{planes, 1}))});
  }
  Value* zeros = n.op(OpKind::Expand, {n.scalar(x->dtype(), 0), n.constInts({planes, planeSize})});
  Attributes a;
  a.set("axis", int64_t{1});
  Value* y = n.reshape(n.op(OpKind::ScatterElements, {zeros, idx, n.reshape(x, {planes, perPlane})}, a), inferred);
  std::vector<int64_t> starts, ends, axes, padding(2 * dims.size(), 0);
  bool padded = false;
  for (size_t i = 2; i < dims.size(); ++i) {
    if (outShape[i] < inferred[i]) {
      starts.push_back(0);
      ends.push_back(outShape[i]);
      axes.push_back(static_cast<int64_t>(i));
    } else if (outShape[i] > inferred[i]) {
      padding[dims.size() + i] = outShape[i] - inferred[i];
      padded = true;
    }
  }
  if (!starts.empty()) {
    Attributes s;
    s.set("starts", starts);
    s.set("ends", ends);
    s.set("axes", axes);
    y = n.op(OpKind::Slice, {y}, s);
  }
  if (padded) {
    Attributes p;
    p.set("pads", padding);
    y = n.op(OpKind::Pad, {y}, p);
  }
  return {y};
}

// Col2Im(x [N, C*K, L], image_shape, block_shape): a ConvTranspose with group C over x viewed as
// [N, C*K, blocks...] and one-hot weights (input channel c*K + j feeds kernel tap j of channel c).
// output_padding takes up the remainder of the block count's floor division, so the output has
// exactly image_shape.
Outs col2ImOp(NodeContext& n) {
  if (!requireInputs(n, 3)) return {};
  Value* x = n.input(0);
  const Tensor* imageT = n.constantInput(1, "image_shape");
  const Tensor* blockT = n.constantInput(2, "block_shape");
  if (!imageT || !blockT) return {};
  std::vector<int64_t> image = imageT->toInt64s(), block = blockT->toInt64s();
  const size_t nd = image.size();
  if (nd == 0 || block.size() != nd) {
    n.fail("image_shape " + listStr(image) + " and block_shape " + listStr(block) +
           " must be non-empty and of equal length");
    return {};
  }
  if (!isFloat(x->dtype()) || x->shape().rank() != 3) {
    n.fail("input has type " + std::string(dtypeName(x->dtype())) + x->shape().str() +
           ", expected a float [N, C*K, L]");
    return {};
  }
  auto dilations = spatialInts(n, "dilations", nd, 1, 1);
  auto pads = spatialInts(n, "pads", 2 * nd, 0, 0);
  auto strides = spatialInts(n, "strides", nd, 1, 1);
  if (!dilations || !pads || !strides) return {};
  const int64_t k = saturatingProduct(block);
  if (k < 1 || x->shape()[1] % k != 0) {
    n.fail("input channels " + std::to_string(x->shape()[1]) + " are not a multiple of the block size " +
           listStr(block));
    return {};
  }
  const int64_t channels = x->shape()[1] / k;
  std::vector<int64_t> blocks, outputPadding;
  for (size_t i = 0; i < nd; ++i) {
    const int64_t span = image[i] + (*pads)[i] + (*pads)[nd + i] - (*dilations)[i] * (block[i] - 1) - 1;
    if (block[i] < 1 || span < 0) {
      n.fail("block_shape " + listStr(block) + " does not fit image_shape " + listStr(image) + " with the pads");
      return {};
    }
    blocks.push_back(span / (*strides)[i] + 1);
    outputPadding.push_back(span % (*strides)[i]);
  }
  if (saturatingProduct(blocks) != x->shape()[2]) {
    n.fail("input has " + std::to_string(x->shape()[2]) + " blocks, expected " +
           std::to_string(saturatingProduct(blocks)) + " " + listStr(blocks));
    return {};
  }
  std::vector<int64_t> inDims = {x->shape()[0], channels * k};
  inDims.insert(inDims.end(), blocks.begin(), blocks.end());
  std::vector<int64_t> wDims = {channels * k, 1};
  wDims.insert(wDims.end(), block.begin(), block.end());
  Tensor w(DType::F64, Shape(wDims));
  for (int64_t c = 0; c < channels; ++c)
    for (int64_t j = 0; j < k; ++j) w.setDouble((c * k + j) * k + j, 1.0);
  Attributes a;
  a.set("group", channels);
  a.set("kernel_shape", block);
  a.set("strides", *strides);
  a.set("dilations", *dilations);
  a.set("pads", *pads);
  a.set("output_padding", outputPadding);
  return translateAs(n, OpKind::ConvTranspose, {n.reshape(x, inDims), n.constant(w.castTo(x->dtype()))}, a);
}

}  // namespace

void registerExtraHandlers(HandlerTable& table) {
  table["CastLike"] = castLikeOp;
  table["GroupNormalization"] = groupNormOp;
  table["CenterCropPad"] = centerCropPadOp;
  table["AffineGrid"] = affineGridOp;
  table["MaxUnpool"] = maxUnpoolOp;
  table["Col2Im"] = col2ImOp;
}

}  // namespace nnc::onnx
