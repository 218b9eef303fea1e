// The graph verifier (invariants listed in ir/verifier.h).
#include "ir/verifier.h"

#include <algorithm>
#include <unordered_map>
#include <unordered_set>

#include "ir/op_registry.h"

namespace nnc {

namespace {

std::string typeStr(DType t, const Shape& s) { return std::string(dtypeName(t)) + s.str(); }

std::string valueDesc(const Value* v) { return "'" + v->name() + "'"; }

Status verifyNodeTypes(const Node& node) {
  const OpDef& def = opDef(node.op());
  const std::string p = node.diagPrefix();
  if (!def.infer) return Status::error(p + "unsupported operator " + std::string(opName(node.op())));
  if (node.numInputs() < def.minInputs || node.numInputs() > def.maxInputs)
    return Status::error(p + "has " + std::to_string(node.numInputs()) + " inputs, outside the op's arity");
  if (node.numOutputs() < def.minOutputs || node.numOutputs() > def.maxOutputs)
    return Status::error(p + "has " + std::to_string(node.numOutputs()) + " outputs, outside the op's arity");
  for (int i = 0; i < def.minInputs; ++i)
    if (!node.input(i)) return Status::error(p + "required input " + std::to_string(i) + " is missing");
  // Attributes must already be validated: validation of a copy may not change anything.
  Attributes copy = node.attrs();
  NNC_RETURN_IF_ERROR(validateAttributes(def.attrs, copy).withContext(p));
  for (const auto& [name, value] : copy.all())
    if (!node.attrs().has(name))
      return Status::error(p + "attribute '" + name + "' is missing (defaults not filled; run inferNode)");
  std::vector<OutputType> outs(node.numOutputs(), OutputType{DType::F32, Shape{}});
  InferContext ctx(node, outs);
  NNC_RETURN_IF_ERROR(checkDeclaredInputs(def, ctx));
  NNC_RETURN_IF_ERROR(def.infer(ctx));
  for (int i = 0; i < node.numOutputs(); ++i) {
    const Value* out = node.output(i);
    if (out->dtype() != outs[i].dtype || out->shape() != outs[i].shape)
      return Status::error(p + "output " + std::to_string(i) + " " + valueDesc(out) + " has type " +
                           typeStr(out->dtype(), out->shape()) + " but inference gives " +
                           typeStr(outs[i].dtype, outs[i].shape));
  }
  return Status::ok();
}

}  // namespace

Status verifyGraph(const Graph& graph) {
  std::vector<Value*> values = graph.values();
  std::unordered_set<const Value*> owned(values.begin(), values.end());
  std::vector<Node*> nodes = graph.nodes();
  std::unordered_set<const Node*> ownedNodes(nodes.begin(), nodes.end());

  std::unordered_map<std::string, const Value*> byName;
  for (const Value* v : values) {
    auto [it, inserted] = byName.emplace(v->name(), v);
    if (!inserted) return Status::error("value name '" + v->name() + "' is used by two values");
  }

  std::unordered_set<const Value*> defined;
  for (const Value* v : graph.inputs()) {
    if (!owned.count(v)) return Status::error("graph input is not a value of the graph");
    if (!v->isGraphInput() || v->producer() || v->isConstant())
      return Status::error("graph input " + valueDesc(v) + " is not marked as an unproduced graph input");
    defined.insert(v);
  }
  for (const Value* v : values) {
    if (v->isGraphInput() && std::find(graph.inputs().begin(), graph.inputs().end(), v) == graph.inputs().end())
      return Status::error("value " + valueDesc(v) + " is marked as a graph input but is not one");
    if (!v->isConstant()) continue;
    if (v->producer()) return Status::error("constant " + valueDesc(v) + " has a producer");
    if (v->constant().dtype() != v->dtype() || v->constant().shape() != v->shape())
      return Status::error("constant " + valueDesc(v) + " holds " + v->constant().summary() + " but is typed " +
                           typeStr(v->dtype(), v->shape()));
    defined.insert(v);
  }

  for (const Node* node : nodes) {
    const std::string p = node->diagPrefix();
    for (int i = 0; i < node->numInputs(); ++i) {
      const Value* in = node->input(i);
      if (!in) continue;
      if (!owned.count(in)) return Status::error(p + "input " + std::to_string(i) + " is not a value of the graph");
      if (!defined.count(in))
        return Status::error(p + "input " + std::to_string(i) + " " + valueDesc(in) +
                             " is used before it is defined (nodes out of topological order?)");
      auto n = std::count(in->users().begin(), in->users().end(), Use{const_cast<Node*>(node), i});
      if (n != 1)
        return Status::error(p + "input " + std::to_string(i) + " " + valueDesc(in) + " lists this use " +
                             std::to_string(n) + " times, expected once");
    }
    for (int i = 0; i < node->numOutputs(); ++i) {
      const Value* out = node->output(i);
      if (!out || !owned.count(out))
        return Status::error(p + "output " + std::to_string(i) + " is not a value of the graph");
      if (out->producer() != node || out->producerOutput() != i)
        return Status::error(p + "output " + std::to_string(i) + " " + valueDesc(out) +
                             " does not name this node as its producer");
      if (out->isConstant() || out->isGraphInput())
        return Status::error(p + "output " + std::to_string(i) + " " + valueDesc(out) +
                             " is also a constant or graph input");
      if (!defined.insert(out).second)
        return Status::error(p + "output " + std::to_string(i) + " " + valueDesc(out) + " is defined twice");
    }
    NNC_RETURN_IF_ERROR(verifyNodeTypes(*node));
  }

  for (const Value* v : values) {
    if (v->producer() && !ownedNodes.count(v->producer()))
      return Status::error("value " + valueDesc(v) + " is produced by a node that is not in the graph");
    for (const Use& use : v->users()) {
      if (!ownedNodes.count(use.node))
        return Status::error("value " + valueDesc(v) + " lists a user that is not a node of the graph");
      if (use.node->input(use.inputIndex) != v)
        return Status::error("value " + valueDesc(v) + " lists a use by " +
                             use.node->diagPrefix().substr(0, use.node->diagPrefix().size() - 2) + " input " +
                             std::to_string(use.inputIndex) + ", which reads another value");
    }
  }

  for (size_t i = 0; i < graph.outputs().size(); ++i) {
    const Value* v = graph.outputs()[i];
    if (!v || !owned.count(v))
      return Status::error("graph output " + std::to_string(i) + " is not a value of the graph");
    if (!defined.count(v))
      return Status::error("graph output " + std::to_string(i) + " " + valueDesc(v) + " is never defined");
  }
  return Status::ok();
}

}  // namespace nnc
