// NodeContext (typed attribute reads, sticky errors, op creation with static inputs folded into
// attributes), ONNX attribute conversion, the generic translation and the handler table.
#include "frontend/onnx/node_context.h"

#include <set>

#include "frontend/onnx/importer.h"

namespace nnc::onnx {

namespace {

using ::onnx::AttributeProto;

AttributeProto::AttributeType inferAttributeType(const AttributeProto& a) {
  if (a.has_i()) return AttributeProto::INT;
  if (a.has_f()) return AttributeProto::FLOAT;
  if (a.has_s()) return AttributeProto::STRING;
  if (a.has_t()) return AttributeProto::TENSOR;
  if (a.has_g()) return AttributeProto::GRAPH;
  if (a.ints_size() > 0) return AttributeProto::INTS;
  if (a.floats_size() > 0) return AttributeProto::FLOATS;
  if (a.strings_size() > 0) return AttributeProto::STRINGS;
  return AttributeProto::UNDEFINED;
}

// The graph inputs a value depends on (for the --bind hint), in first-found order.
std::vector<std::string> upstreamGraphInputs(Value* v) {
  std::vector<std::string> found;
  std::set<Value*> seen;
  std::vector<Value*> stack{v};
  while (!stack.empty()) {
    Value* cur = stack.back();
    stack.pop_back();
    if (!cur || !seen.insert(cur).second) continue;
    if (cur->isGraphInput()) found.push_back(cur->name());
    if (Node* p = cur->producer())
      for (Value* in : p->inputs()) stack.push_back(in);
  }
  return found;
}

Expected<AttrValue> staticInputAttr(const StaticInput& si, const Tensor& t) {
  switch (si.kind) {
    case AttrKind::Ints:
      if (!isInteger(t.dtype())) return Status::error("must hold integers, got " + std::string(dtypeName(t.dtype())));
      return AttrValue(t.toInt64s());
    case AttrKind::Floats: return AttrValue(t.toDoubles());
    case AttrKind::Int:
      if (!isInteger(t.dtype())) return Status::error("must hold an integer, got " + std::string(dtypeName(t.dtype())));
      if (t.numel() != 1) return Status::error("must hold one value, got " + std::to_string(t.numel()));
      return AttrValue(t.getInt(0));
    case AttrKind::Float:
      if (t.numel() != 1) return Status::error("must hold one value, got " + std::to_string(t.numel()));
      return AttrValue(t.getDouble(0));
    case AttrKind::Tensor: return AttrValue(t);
    default: break;
  }
  NNC_CHECK(false, "static input '" + si.attrName + "' has an attribute kind the importer cannot produce");
  return Status::error("unreachable");
}

}  // namespace

Expected<AttrValue> convertAttribute(const AttributeProto& a, const std::string& baseDir) {
  std::string label = "attribute '" + a.name() + "'";
  if (!a.ref_attr_name().empty()) return Status::error(label + " refers to a function attribute, which is unsupported");
  AttributeProto::AttributeType type = a.type();
  if (type == AttributeProto::UNDEFINED) type = inferAttributeType(a);
  switch (type) {
    case AttributeProto::INT: return AttrValue(static_cast<int64_t>(a.i()));
    case AttributeProto::FLOAT: return AttrValue(static_cast<double>(a.f()));
    case AttributeProto::STRING: return AttrValue(a.s());
    case AttributeProto::INTS: return AttrValue(std::vector<int64_t>(a.ints().begin(), a.ints().end()));
    case AttributeProto::FLOATS: return AttrValue(std::vector<double>(a.floats().begin(), a.floats().end()));
    case AttributeProto::STRINGS: return AttrValue(std::vector<std::string>(a.strings().begin(), a.strings().end()));
    case AttributeProto::TENSOR: {
      auto t = tensorFromProto(a.t(), baseDir);
      if (!t) return t.status().withContext(label + ": ");
      return AttrValue(std::move(t).value());
    }
    case AttributeProto::GRAPH:
    case AttributeProto::GRAPHS:
      return Status::error(label + " is a graph; subgraphs (If, Loop, Scan) are unsupported");
    case AttributeProto::UNDEFINED: return Status::error(label + " has no value");
    default: return Status::error(label + " has unsupported type " + AttributeProto::AttributeType_Name(type));
  }
}

std::string sourceName(const ::onnx::NodeProto& node) {
  if (node.name().empty() && node.output_size() > 0) return node.output(0);
  return node.name();
}

NodeContext::NodeContext(const ::onnx::NodeProto& proto, int64_t opset, GraphBuilder& builder,
                         std::vector<Value*> inputs, Attributes attrs)
    : proto_(proto), opset_(opset), builder_(builder), inputs_(std::move(inputs)), attrs_(std::move(attrs)) {
  name_ = sourceName(proto);
  numOutputs_ = proto.output_size();
  while (numOutputs_ > 0 && proto.output(numOutputs_ - 1).empty()) --numOutputs_;
}

std::string NodeContext::prefix() const { return "node '" + name_ + "' (" + opType() + "): "; }

void NodeContext::fail(const std::string& message) {
  if (failed()) return;
  status_ = Status::error(message.rfind("node '", 0) == 0 ? message : prefix() + message);
}

bool NodeContext::checkKind(const std::string& name, const AttrValue* v, AttrKind kind) {
  if (attrKindOf(*v) == kind) return true;
  fail("attribute '" + name + "' has type " + attrKindName(attrKindOf(*v)) + ", expected " + attrKindName(kind));
  return false;
}

int64_t NodeContext::attrInt(const std::string& name, int64_t fallback) {
  const AttrValue* v = attrs_.find(name);
  if (!v || !checkKind(name, v, AttrKind::Int)) return fallback;
  return std::get<int64_t>(*v);
}

// Float reads accept ints, as validateAttributes does (exporters write alpha=1 as an INT).
double NodeContext::attrFloat(const std::string& name, double fallback) {
  const AttrValue* v = attrs_.find(name);
  if (!v) return fallback;
  if (attrKindOf(*v) == AttrKind::Int) return static_cast<double>(std::get<int64_t>(*v));
  if (!checkKind(name, v, AttrKind::Float)) return fallback;
  return std::get<double>(*v);
}

std::string NodeContext::attrString(const std::string& name, const std::string& fallback) {
  const AttrValue* v = attrs_.find(name);
  if (!v || !checkKind(name, v, AttrKind::String)) return fallback;
  return std::get<std::string>(*v);
}

std::vector<int64_t> NodeContext::attrInts(const std::string& name, std::vector<int64_t> fallback) {
  const AttrValue* v = attrs_.find(name);
  if (!v || !checkKind(name, v, AttrKind::Ints)) return fallback;
  return std::get<std::vector<int64_t>>(*v);
}

std::vector<double> NodeContext::attrFloats(const std::string& name, std::vector<double> fallback) {
  const AttrValue* v = attrs_.find(name);
  if (!v) return fallback;
  if (attrKindOf(*v) == AttrKind::Ints) {
    const auto& ints = std::get<std::vector<int64_t>>(*v);
    return std::vector<double>(ints.begin(), ints.end());
  }
  if (!checkKind(name, v, AttrKind::Floats)) return fallback;
  return std::get<std::vector<double>>(*v);
}

std::optional<std::vector<int64_t>> NodeContext::requireInts(const std::string& name) {
  const AttrValue* v = attrs_.find(name);
  if (!v) {
    fail("missing required attribute '" + name + "'");
    return std::nullopt;
  }
  if (!checkKind(name, v, AttrKind::Ints)) return std::nullopt;
  return std::get<std::vector<int64_t>>(*v);
}

const Tensor* NodeContext::constantInput(int i, const std::string& what) {
  Value* v = input(i);
  if (failed()) return nullptr;
  if (!v) {
    fail("missing input '" + what + "'");
    return nullptr;
  }
  if (!v->isConstant()) {
    failNotConstant(what, v);
    return nullptr;
  }
  return &v->constant();
}

// "input 'shape' of node 'r' (Reshape) must be a compile-time constant; bind it with --bind x=FILE.pb",
// naming a graph input the value depends on (binding it makes the value foldable).
void NodeContext::failNotConstant(const std::string& what, Value* v) {
  if (failed()) return;
  std::vector<std::string> roots = upstreamGraphInputs(v);
  if (!roots.empty()) neededBinding_ = roots.front();
  std::string bindName = roots.empty() ? "NAME" : roots.front();
  status_ = Status::error("input '" + what + "' of node '" + name_ + "' (" + opType() +
                          ") must be a compile-time constant; bind it with --bind " + bindName + "=FILE.pb");
}

Value* NodeContext::constant(Tensor t) {
  if (failed() || !builder_.status()) return nullptr;
  return builder_.constant(std::move(t));
}

Value* NodeContext::constInts(const std::vector<int64_t>& values) { return constant(Tensor::fromInt64s(values)); }

Value* NodeContext::scalar(DType dtype, double value) { return constant(Tensor::scalar(dtype, value)); }

std::string NodeContext::subNodeName(OpKind kind) {
  ++opsCreated_;
  return name_ + "/" + std::string(opName(kind)) + "_" + std::to_string(opsCreated_);
}

Value* NodeContext::op(OpKind kind, std::vector<Value*> inputs, Attributes attrs) {
  std::vector<Value*> outs = opMulti(kind, std::move(inputs), std::move(attrs), 1);
  return outs.empty() ? nullptr : outs[0];
}

std::vector<Value*> NodeContext::opMulti(OpKind kind, std::vector<Value*> inputs, Attributes attrs, int numOutputs) {
  return createOp(kind, std::move(inputs), std::move(attrs), numOutputs, subNodeName(kind));
}

std::vector<Value*> NodeContext::createOp(OpKind kind, std::vector<Value*> inputs, Attributes attrs, int numOutputs,
                                          const std::string& nodeName) {
  if (failed() || !builder_.status()) return {};
  if (!OpRegistry::instance().isDefined(kind)) {
    std::string op(opName(kind));
    fail("unsupported operator " + op + (op == opType() ? "" : " (needed to import " + opType() + ")"));
    return {};
  }
  const OpDef& def = opDef(kind);
  for (const StaticInput& si : def.staticInputs) {
    if (si.index >= static_cast<int>(inputs.size()) || !inputs[si.index]) continue;
    Value* v = inputs[si.index];
    if (!v->isConstant()) {
      failNotConstant(si.attrName, v);
      return {};
    }
    auto value = staticInputAttr(si, v->constant());
    if (!value) {
      fail("input '" + si.attrName + "' " + value.status().message());
      return {};
    }
    attrs.set(si.attrName, std::move(value).value());
    inputs[si.index] = nullptr;
  }
  while (!inputs.empty() && !inputs.back()) inputs.pop_back();
  int count = std::max(numOutputs, def.minOutputs);
  std::vector<Value*> outs = builder_.opMulti(kind, std::move(inputs), std::move(attrs), count, nodeName);
  if (!builder_.status()) return {};
  outs.resize(std::min<size_t>(outs.size(), static_cast<size_t>(std::max(numOutputs, 1))));
  return outs;
}

Value* NodeContext::reshape(Value* x, const std::vector<int64_t>& dims) {
  if (!x) return nullptr;
  if (x->shape().dims() == dims) return x;
  return op(OpKind::Reshape, {x, constInts(dims)});
}

Value* NodeContext::reduce(OpKind kind, Value* x, const std::vector<int64_t>& axes, bool keepdims) {
  Attributes a;
  a.set("keepdims", int64_t{keepdims ? 1 : 0});
  return op(kind, {x, constInts(axes)}, a);
}

Value* NodeContext::cast(Value* x, DType to) {
  if (!x) return nullptr;
  if (x->dtype() == to) return x;
  Attributes a;
  a.set("to", int64_t{dtypeToOnnx(to)});
  return op(OpKind::Cast, {x}, a);
}

std::vector<Value*> translateAs(NodeContext& n, OpKind kind, std::vector<Value*> inputs, Attributes attrs) {
  // Dropped from every op in opset 6; never meaningful for inference.
  attrs.erase("consumed_inputs");
  return n.createOp(kind, std::move(inputs), std::move(attrs), n.numOutputs(), n.name());
}

std::vector<Value*> translateGeneric(NodeContext& n) {
  std::optional<OpKind> kind = opFromName(n.opType());
  if (!kind) {
    n.fail("unsupported operator " + n.opType());
    return {};
  }
  return translateAs(n, *kind, n.inputs(), n.attrs());
}

const OpHandler* findHandler(const std::string& opType) {
  static const HandlerTable table = [] {
    HandlerTable t;
    registerCoreHandlers(t);
    registerOpsetHandlers(t);
    registerLossHandlers(t);
    registerExtraHandlers(t);
    registerRnnHandlers(t);
    return t;
  }();
  auto it = table.find(opType);
  return it == table.end() ? nullptr : &it->second;
}

}  // namespace nnc::onnx
