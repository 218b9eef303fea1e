// Older-opset forms rewritten into the newest one, so the IR has one form per op: attributes that
// later became inputs (Reduce* axes, Split split, Pad-2, Slice-1, Clip-6, TopK-1, Reshape-1), the
// legacy broadcast attributes of opset < 7, Softmax's 2-D coercion before opset 13, and
// Upsample / Resize-10 as Resize. Each rewrite ends in the generic translation.
#include "frontend/onnx/node_context.h"

namespace nnc::onnx {

namespace {

using Outs = std::vector<Value*>;

// Moves attribute `name` (ints) into input slot `index` as a constant i64 tensor.
void intsAttrToInput(NodeContext& n, std::vector<Value*>& inputs, Attributes& attrs, const std::string& name,
                     int index) {
  if (!attrs.has(name)) return;
  std::vector<int64_t> values = n.attrInts(name, {});
  attrs.erase(name);
  if (static_cast<int>(inputs.size()) <= index) inputs.resize(index + 1, nullptr);
  inputs[index] = n.constInts(values);
}

OpKind kindOf(NodeContext& n) {
  std::optional<OpKind> kind = opFromName(n.opType());
  NNC_CHECK(kind.has_value(), "opset handler registered for an op nnc does not define: " + n.opType());
  return *kind;
}

// Before opset 7, binary ops broadcast only with broadcast=1, aligning B at `axis` of A (or at
// the end, which numpy broadcasting already does).
Outs legacyBroadcastOp(NodeContext& n) {
  if (n.opset() >= 7) return translateGeneric(n);
  Attributes attrs = n.attrs();
  bool broadcast = n.attrInt("broadcast", 0) != 0;
  bool hasAxis = attrs.has("axis");
  int64_t axis = n.attrInt("axis", 0);
  attrs.erase("broadcast");
  attrs.erase("axis");
  std::vector<Value*> inputs = n.inputs();
  if (broadcast && hasAxis && n.input(0) && n.input(1)) {
    int ra = n.input(0)->shape().rank(), rb = n.input(1)->shape().rank();
    std::optional<int> ax = normalizeAxis(axis, ra);
    if (!ax || *ax + rb > ra) {
      n.fail("broadcast axis " + std::to_string(axis) + " does not fit B " + n.input(1)->shape().str() + " into A " +
             n.input(0)->shape().str());
      return {};
    }
    std::vector<int64_t> dims = n.input(1)->shape().dims();
    dims.resize(ra - *ax, 1);
    inputs[1] = n.reshape(n.input(1), dims);
  }
  return translateAs(n, kindOf(n), inputs, attrs);
}

// PRelu before opset 7: a 1-D slope of size C applies per channel (axis 1).
Outs legacyPReluOp(NodeContext& n) {
  Value* x = n.input(0);
  Value* slope = n.input(1);
  if (n.opset() >= 7 || !x || !slope || slope->shape().rank() != 1 || x->shape().rank() < 3 || slope->shape()[0] == 1 ||
      slope->shape()[0] != x->shape()[1])
    return translateGeneric(n);
  std::vector<int64_t> dims(x->shape().rank() - 1, 1);
  dims[0] = slope->shape()[0];
  return translateAs(n, OpKind::PRelu, {x, n.reshape(slope, dims)}, n.attrs());
}

// Before opset 13 these ops flatten dims [axis:] into one row (2-D coercion) and work on rows.
Outs legacySoftmaxOp(NodeContext& n) {
  if (n.opset() >= 13 || !n.input(0)) return translateGeneric(n);
  Value* x = n.input(0);
  int rank = x->shape().rank();
  int64_t axis = n.attrInt("axis", 1);
  std::optional<int> ax = normalizeAxis(axis, rank);
  if (!ax) {
    n.fail("axis " + std::to_string(axis) + " is out of range for rank " + std::to_string(rank));
    return {};
  }
  Attributes attrs = n.attrs();
  attrs.set("axis", int64_t{-1});
  if (*ax == rank - 1) return translateAs(n, kindOf(n), {x}, attrs);
  const std::vector<int64_t>& dims = x->shape().dims();
  const int64_t rows = saturatingProduct(dims, 0, static_cast<size_t>(*ax));
  const int64_t cols = saturatingProduct(dims, static_cast<size_t>(*ax), dims.size());
  Value* flat = n.reshape(x, {rows, cols});
  std::vector<Value*> y = n.createOp(kindOf(n), {flat}, attrs, 1, n.name());
  if (y.empty()) return {};
  return {n.reshape(y[0], dims)};
}

// Upsample (7-9) and Resize-10 are Resize with asymmetric coordinates and floor rounding (as ONNX's
// version converter maps them).
Outs resizeFromScales(NodeContext& n, Value* scales) {
  std::string mode = n.attrString("mode", "nearest");
  if (mode == "bilinear") mode = "linear";
  Attributes attrs;
  attrs.set("mode", mode);
  attrs.set("coordinate_transformation_mode", std::string("asymmetric"));
  if (mode == "nearest") attrs.set("nearest_mode", std::string("floor"));
  return translateAs(n, OpKind::Resize, {n.input(0), nullptr, scales}, attrs);
}

Outs upsampleOp(NodeContext& n) {
  if (n.opset() >= 9) return resizeFromScales(n, n.input(1));
  if (!n.hasAttr("scales")) {
    n.fail("missing required attribute 'scales'");
    return {};
  }
  std::vector<double> d = n.attrFloats("scales", {});
  std::vector<float> f(d.begin(), d.end());
  return resizeFromScales(n, n.constant(Tensor::fromFloats(f, Shape{static_cast<int64_t>(f.size())})));
}

Outs resizeOp(NodeContext& n) {
  if (n.opset() >= 11) return translateGeneric(n);
  return resizeFromScales(n, n.input(1));
}

Outs topKOp(NodeContext& n) {
  if (n.opset() >= 10) return translateGeneric(n);
  Attributes attrs = n.attrs();
  if (!attrs.has("k")) {
    n.fail("missing required attribute 'k'");
    return {};
  }
  int64_t k = n.attrInt("k", 0);
  attrs.erase("k");
  return translateAs(n, OpKind::TopK, {n.input(0), n.constInts({k})}, attrs);
}

Outs clipOp(NodeContext& n) {
  if (n.opset() >= 11 || !n.input(0)) return translateGeneric(n);
  Attributes attrs = n.attrs();
  DType t = n.input(0)->dtype();
  std::vector<Value*> inputs{n.input(0), nullptr, nullptr};
  if (attrs.has("min")) inputs[1] = n.scalar(t, n.attrFloat("min", 0));
  if (attrs.has("max")) inputs[2] = n.scalar(t, n.attrFloat("max", 0));
  attrs.erase("min");
  attrs.erase("max");
  return translateAs(n, OpKind::Clip, inputs, attrs);
}

Outs padOp(NodeContext& n) {
  if (n.opset() >= 11 || !n.input(0)) return translateGeneric(n);
  Attributes attrs = n.attrs();
  std::vector<Value*> inputs{n.input(0)};
  // Pad-1 called the attribute "paddings".
  if (attrs.has("paddings") && !attrs.has("pads")) {
    attrs.set("pads", *attrs.find("paddings"));
    attrs.erase("paddings");
  }
  if (!attrs.has("pads")) {
    n.fail("missing required attribute 'pads'");
    return {};
  }
  intsAttrToInput(n, inputs, attrs, "pads", 1);
  if (attrs.has("value")) {
    inputs.push_back(n.scalar(n.input(0)->dtype(), n.attrFloat("value", 0)));
    attrs.erase("value");
  }
  return translateAs(n, OpKind::Pad, inputs, attrs);
}

Outs sliceOp(NodeContext& n) {
  if (n.opset() >= 10) return translateGeneric(n);
  Attributes attrs = n.attrs();
  std::vector<Value*> inputs{n.input(0)};
  for (const char* required : {"starts", "ends"})
    if (!attrs.has(required)) {
      n.fail(std::string("missing required attribute '") + required + "'");
      return {};
    }
  intsAttrToInput(n, inputs, attrs, "starts", 1);
  intsAttrToInput(n, inputs, attrs, "ends", 2);
  intsAttrToInput(n, inputs, attrs, "axes", 3);
  return translateAs(n, OpKind::Slice, inputs, attrs);
}

// Reduce* took `axes` as an attribute before opset 18 (ReduceSum before 13).
Outs reduceOp(NodeContext& n) {
  int64_t inputSince = n.opType() == "ReduceSum" ? 13 : 18;
  if (n.opset() >= inputSince) return translateGeneric(n);
  Attributes attrs = n.attrs();
  std::vector<Value*> inputs{n.input(0)};
  intsAttrToInput(n, inputs, attrs, "axes", 1);
  return translateAs(n, kindOf(n), inputs, attrs);
}

Outs splitOp(NodeContext& n) {
  if (n.opset() >= 13) return translateGeneric(n);
  Attributes attrs = n.attrs();
  std::vector<Value*> inputs = n.inputs();
  intsAttrToInput(n, inputs, attrs, "split", 1);
  return translateAs(n, OpKind::Split, inputs, attrs);
}

Outs reshapeOp(NodeContext& n) {
  if (n.opset() >= 5) return translateGeneric(n);
  Attributes attrs = n.attrs();
  std::vector<Value*> inputs{n.input(0)};
  intsAttrToInput(n, inputs, attrs, "shape", 1);
  return translateAs(n, OpKind::Reshape, inputs, attrs);
}

// Cast before opset 6 named the target type as a string ("FLOAT").
Outs castOp(NodeContext& n) {
  const AttrValue* to = n.attrs().find("to");
  if (n.opset() >= 6 || !to || attrKindOf(*to) != AttrKind::String) return translateGeneric(n);
  ::onnx::TensorProto_DataType type;
  if (!::onnx::TensorProto_DataType_Parse(std::get<std::string>(*to), &type)) {
    n.fail("attribute 'to' names an unknown type '" + std::get<std::string>(*to) + "'");
    return {};
  }
  Attributes attrs = n.attrs();
  attrs.set("to", int64_t{type});
  return translateAs(n, OpKind::Cast, n.inputs(), attrs);
}

// Concat's axis defaulted to 1 before opset 4.
Outs concatOp(NodeContext& n) {
  Attributes attrs = n.attrs();
  if (n.opset() < 4 && !attrs.has("axis")) attrs.set("axis", int64_t{1});
  return translateAs(n, OpKind::Concat, n.inputs(), attrs);
}

}  // namespace

void registerOpsetHandlers(HandlerTable& table) {
  for (const char* op : {"Add", "Sub", "Mul", "Div", "Pow", "And", "Or", "Xor", "Equal", "Greater", "Less"})
    table[op] = legacyBroadcastOp;
  table["PRelu"] = legacyPReluOp;
  for (const char* op : {"Softmax", "LogSoftmax", "Hardmax"}) table[op] = legacySoftmaxOp;
  table["Upsample"] = upsampleOp;
  table["Resize"] = resizeOp;
  table["TopK"] = topKOp;
  table["Clip"] = clipOp;
  table["Pad"] = padOp;
  table["Slice"] = sliceOp;
  for (const char* op : {"ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1", "ReduceL2",
                         "ReduceLogSum", "ReduceLogSumExp", "ReduceSumSquare"})
    table[op] = reduceOp;
  table["Split"] = splitOp;
  table["Reshape"] = reshapeOp;
  table["Cast"] = castOp;
  table["Concat"] = concatOp;
}

}  // namespace nnc::onnx
