// Handlers for ONNX ops that are compositions of nnc ops (Gemm, BatchNormalization, Flatten,
// Squeeze, Unsqueeze), or need no op at all (Constant, Identity, Dropout). One short function each.
#include <cmath>
#include <set>

#include "frontend/onnx/node_context.h"

namespace nnc::onnx {

namespace {

using Outs = std::vector<Value*>;

// The first `count` inputs, or null after recording which one is missing.
bool requireInputs(NodeContext& n, int count) {
  for (int i = 0; i < count; ++i) {
    if (!n.input(i)) {
      n.fail("missing input " + std::to_string(i));
      return false;
    }
  }
  return true;
}

Outs constantOp(NodeContext& n) {
  Attributes& a = n.attrs();
  if (a.has("value_string") || a.has("value_strings")) {
    n.fail("string constants are unsupported");
    return {};
  }
  if (const AttrValue* v = a.find("value")) {
    if (attrKindOf(*v) != AttrKind::Tensor) {
      n.fail(std::string("attribute 'value' has type ") + attrKindName(attrKindOf(*v)) + ", expected TENSOR");
      return {};
    }
    return {n.constant(std::get<Tensor>(*v))};
  }
  if (a.has("value_float")) {
    float f = static_cast<float>(n.attrFloat("value_float", 0));
    return {n.constant(Tensor::fromFloats({f}, Shape{}))};
  }
  if (a.has("value_floats")) {
    std::vector<double> d = n.attrFloats("value_floats", {});
    std::vector<float> f(d.begin(), d.end());
    return {n.constant(Tensor::fromFloats(f, Shape{static_cast<int64_t>(f.size())}))};
  }
  if (a.has("value_int")) return {n.constant(Tensor::fromInt64s({n.attrInt("value_int", 0)}, Shape{}))};
  if (a.has("value_ints")) return {n.constInts(n.attrInts("value_ints", {}))};
  n.fail("missing required attribute 'value'");
  return {};
}

Outs identityOp(NodeContext& n) {
  if (!requireInputs(n, 1)) return {};
  return {n.input(0)};
}

// Inference-time Dropout is the identity; its mask (when asked for) is all ones.
Outs dropoutOp(NodeContext& n) {
  if (!requireInputs(n, 1)) return {};
  if (n.opset() >= 12 && n.input(2)) {
    const Tensor* training = n.constantInput(2, "training_mode");
    if (!training) return {};
    if (training->numel() > 0 && training->getInt(0) != 0) {
      // Training mode with ratio 0 keeps every element: still the identity.
      const Tensor* ratio = n.input(1) ? n.constantInput(1, "ratio") : nullptr;
      if (n.failed()) return {};
      if (!ratio || ratio->numel() != 1 || ratio->getDouble(0) != 0.0) {
        n.fail("training mode is unsupported");
        return {};
      }
    }
  }
  Value* x = n.input(0);
  Outs outs{x};
  if (n.wantsOutput(1)) {
    DType maskType = n.opset() >= 10 ? DType::Bool : x->dtype();
    outs.push_back(n.op(OpKind::Expand, {n.scalar(maskType, 1), n.constInts(x->shape().dims())}));
  }
  return outs;
}

// Y = alpha * op(A) @ op(B) + beta * C
Outs gemmOp(NodeContext& n) {
  if (!requireInputs(n, 2)) return {};
  Value* a = n.input(0);
  Value* b = n.input(1);
  Value* c = n.input(2);
  int64_t transA = n.attrInt("transA", 0), transB = n.attrInt("transB", 0);
  double alpha = n.attrFloat("alpha", 1.0), beta = n.attrFloat("beta", 1.0);
  if (a->shape().rank() != 2 || b->shape().rank() != 2) {
    n.fail("inputs A and B must be 2-D, got " + a->shape().str() + " and " + b->shape().str());
    return {};
  }
  Attributes swap;
  swap.set("perm", std::vector<int64_t>{1, 0});
  if (transA) a = n.op(OpKind::Transpose, {a}, swap);
  if (transB) b = n.op(OpKind::Transpose, {b}, swap);
  Value* y = n.op(OpKind::MatMul, {a, b});
  if (alpha != 1.0 && y) y = n.op(OpKind::Mul, {y, n.scalar(y->dtype(), alpha)});
  if (c && beta != 0.0) {
    if (beta != 1.0) c = n.op(OpKind::Mul, {c, n.scalar(c->dtype(), beta)});
    y = n.op(OpKind::Add, {y, c});
  }
  return {y};
}

// Inference form: y = x * s + t with s = scale / sqrt(var + eps), t = bias - mean * s, broadcast
// over the channel axis 1. Computed on the host when the parameters are constants (the usual case).
Outs batchNormOp(NodeContext& n) {
  if (!requireInputs(n, 5)) return {};
  double eps = n.attrFloat("epsilon", 1e-5);
  if (n.opset() < 9 && n.attrInt("spatial", 1) == 0) {
    n.fail("spatial=0 is unsupported");
    return {};
  }
  if (n.attrInt("training_mode", 0) != 0 || n.numOutputs() > 1) {
    n.fail("training mode (running statistics outputs) is unsupported");
    return {};
  }
  Value* x = n.input(0);
  if (x->shape().rank() < 2) {
    n.fail("input X must have rank >= 2, got " + x->shape().str());
    return {};
  }
  int64_t channels = x->shape()[1];
  std::vector<int64_t> paramDims(x->shape().rank() - 1, 1);
  paramDims[0] = channels;
  static const char* kParamNames[] = {"scale", "B", "input_mean", "input_var"};
  bool allConstant = true;
  for (int i = 1; i <= 4; ++i) {
    if (n.input(i)->shape().checkedNumel() != channels) {
      n.fail(std::string("input '") + kParamNames[i - 1] + "' has shape " + n.input(i)->shape().str() + ", expected [" +
             std::to_string(channels) + "]");
      return {};
    }
    allConstant = allConstant && n.input(i)->isConstant();
  }
  Value *s, *t;
  if (allConstant) {
    std::vector<double> scale = n.input(1)->constant().toDoubles(), bias = n.input(2)->constant().toDoubles(),
                        mean = n.input(3)->constant().toDoubles(), var = n.input(4)->constant().toDoubles();
    Tensor sT(DType::F64, Shape(paramDims)), tT(DType::F64, Shape(paramDims));
    for (int64_t c = 0; c < channels; ++c) {
      double sc = scale[c] / std::sqrt(var[c] + eps);
      sT.setDouble(c, sc);
      tT.setDouble(c, bias[c] - mean[c] * sc);
    }
    s = n.constant(sT.castTo(x->dtype()));
    t = n.constant(tT.castTo(x->dtype()));
  } else {
    Value* var = n.input(4);
    Value* denom = n.op(OpKind::Sqrt, {n.op(OpKind::Add, {var, n.scalar(var->dtype(), eps)})});
    s = n.cast(n.op(OpKind::Div, {n.input(1), denom}), x->dtype());
    t = n.cast(n.op(OpKind::Sub, {n.input(2), n.op(OpKind::Mul, {n.input(3), s})}), x->dtype());
    s = n.reshape(s, paramDims);
    t = n.reshape(t, paramDims);
  }
  return {n.op(OpKind::Add, {n.op(OpKind::Mul, {x, s}), t})};
}

Outs flattenOp(NodeContext& n) {
  if (!requireInputs(n, 1)) return {};
  Value* x = n.input(0);
  const std::vector<int64_t>& dims = x->shape().dims();
  int rank = x->shape().rank();
  int64_t axis = n.attrInt("axis", 1);
  if (axis < -rank || axis > rank) {
    n.fail("axis " + std::to_string(axis) + " is out of range for rank " + std::to_string(rank));
    return {};
  }
  if (axis < 0) axis += rank;
  return {n.reshape(x, {saturatingProduct(dims, 0, axis), saturatingProduct(dims, axis, dims.size())})};
}

// Squeeze/Unsqueeze axes: an attribute before opset 13, an (optional) constant input after.
std::optional<std::vector<int64_t>> squeezeAxes(NodeContext& n) {
  if (n.opset() < 13) {
    if (!n.hasAttr("axes")) return std::nullopt;
    return n.attrInts("axes", {});
  }
  if (!n.input(1)) return std::nullopt;
  const Tensor* t = n.constantInput(1, "axes");
  if (!t) return std::vector<int64_t>{};
  return t->toInt64s();
}

Outs squeezeOp(NodeContext& n) {
  if (!requireInputs(n, 1)) return {};
  Value* x = n.input(0);
  int rank = x->shape().rank();
  std::optional<std::vector<int64_t>> axes = squeezeAxes(n);
  if (n.failed()) return {};
  std::vector<bool> drop(rank, false);
  if (!axes) {
    for (int i = 0; i < rank; ++i) drop[i] = x->shape()[i] == 1;
  } else {
    for (int64_t a : *axes) {
      std::optional<int> ax = normalizeAxis(a, rank);
      if (!ax) {
        n.fail("axis " + std::to_string(a) + " is out of range for rank " + std::to_string(rank));
        return {};
      }
      if (x->shape()[*ax] != 1) {
        n.fail("cannot squeeze axis " + std::to_string(a) + " of size " + std::to_string(x->shape()[*ax]));
        return {};
      }
      drop[*ax] = true;
    }
  }
  std::vector<int64_t> dims;
  for (int i = 0; i < rank; ++i)
    if (!drop[i]) dims.push_back(x->shape()[i]);
  return {n.reshape(x, dims)};
}

Outs unsqueezeOp(NodeContext& n) {
  if (!requireInputs(n, 1)) return {};
  Value* x = n.input(0);
  std::vector<int64_t> axes;
  if (n.opset() < 13) {
    std::optional<std::vector<int64_t>> a = n.requireInts("axes");
    if (!a) return {};
    axes = *a;
  } else {
    const Tensor* t = n.constantInput(1, "axes");
    if (!t) return {};
    axes = t->toInt64s();
  }
  int outRank = x->shape().rank() + static_cast<int>(axes.size());
  std::vector<bool> inserted(outRank, false);
  for (int64_t a : axes) {
    std::optional<int> ax = normalizeAxis(a, outRank);
    if (!ax) {
      n.fail("axis " + std::to_string(a) + " is out of range for output rank " + std::to_string(outRank));
      return {};
    }
    if (inserted[*ax]) {
      n.fail("axis " + std::to_string(a) + " is repeated");
      return {};
    }
    inserted[*ax] = true;
  }
  std::vector<int64_t> dims;
  int next = 0;
  for (int i = 0; i < outRank; ++i) dims.push_back(inserted[i] ? 1 : x->shape()[next++]);
  return {n.reshape(x, dims)};
}

// Scatter (opset 9-10) was renamed ScatterElements with the same semantics.
Outs scatterOp(NodeContext& n) { return translateAs(n, OpKind::ScatterElements, n.inputs(), n.attrs()); }

}  // namespace

void registerCoreHandlers(HandlerTable& table) {
  table["Constant"] = constantOp;
  table["Identity"] = identityOp;
  table["Dropout"] = dropoutOp;
  table["Gemm"] = gemmOp;
  table["BatchNormalization"] = batchNormOp;
  table["Flatten"] = flattenOp;
  table["Squeeze"] = squeezeOp;
  table["Unsqueeze"] = unsqueezeOp;
  table["Scatter"] = scatterOp;
}

}  // namespace nnc::onnx
