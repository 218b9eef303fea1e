// The reference evaluator: one node lowered alone to kernel IR and interpreted, or an opaque op's
// host kernel.
#include "ir/reference.h"

#include <algorithm>
#include <map>
#include <optional>

#include "builtins/builtins.h"
#include "ir/check_result.h"
#include "ir/lower.h"
#include "ir/op_registry.h"
#include "kir/interpreter.h"

namespace nnc {

namespace {

Status checkInputs(const Node& node, const std::vector<Tensor>& inputs) {
  if (static_cast<int>(inputs.size()) != node.numInputs())
    return Status::error(node.diagPrefix() + "reference evaluation given " + std::to_string(inputs.size()) +
                         " inputs, expected " + std::to_string(node.numInputs()));
  for (int i = 0; i < node.numInputs(); ++i) {
    const Value* v = node.input(i);
    if (!v) continue;
    if (inputs[i].isNull() || inputs[i].dtype() != v->dtype() || inputs[i].shape() != v->shape())
      return Status::error(node.diagPrefix() + "reference evaluation: input " + std::to_string(i) + " does not match " +
                           std::string(dtypeName(v->dtype())) + v->shape().str());
  }
  return Status::ok();
}

Expected<std::vector<Tensor>> evaluateOpaque(const Node& node, const std::vector<Tensor>& inputs,
                                             std::vector<Tensor> outputs) {
  const OpDef& def = opDef(node.op());
  rt::BuiltinFn fn = rt::findBuiltin(def.opaque.symbol);
  if (!fn) return Status::error(node.diagPrefix() + "no host kernel '" + def.opaque.symbol + "'");
  std::vector<int64_t> params = def.opaque.encode(node);
  std::vector<void*> buffers;
  for (const Tensor& t : inputs) buffers.push_back(const_cast<std::byte*>(t.data()));
  for (Tensor& t : outputs) buffers.push_back(t.mutableData());
  if (int rc = fn(params.data(), buffers.data()); rc != 0)
    return Status::error(node.diagPrefix() + "host kernel failed (code " + std::to_string(rc) + ")");
  return outputs;
}

// The node as a group of its own, lowered to kernel IR.
Expected<std::vector<LoweredKernel>> lowerAlone(const Node& node) {
  KernelGroup group;
  group.nodes = {const_cast<Node*>(&node)};
  for (Value* v : node.inputs())
    if (v && std::find(group.inputs.begin(), group.inputs.end(), v) == group.inputs.end()) group.inputs.push_back(v);
  group.outputs = node.outputs();
  return lowerGroup(group, "ref_" + node.name());
}

int64_t work(const std::vector<LoweredKernel>& kernels) {
  int64_t total = 0;
  for (const LoweredKernel& lk : kernels)
    if (__builtin_add_overflow(total, lk.kernel.work(), &total)) total = INT64_MAX;
  return total;
}

}  // namespace

Expected<int64_t> loopPoints(const Node& node) {
  if (opFusionClass(node.op()) == FusionClass::Opaque) return int64_t{0};
  NNC_ASSIGN_OR_RETURN(std::vector<LoweredKernel> kernels, lowerAlone(node));
  return work(kernels);
}

Expected<std::vector<Tensor>> evaluateNode(const Node& node, const std::vector<Tensor>& inputs) {
  NNC_ASSIGN_OR_RETURN(std::optional<std::vector<Tensor>> outputs, evaluateNodeWithin(node, inputs, INT64_MAX));
  NNC_CHECK(outputs.has_value(), node.diagPrefix() + "unbounded evaluation stopped by its budget");
  return std::move(*outputs);
}

Expected<std::optional<std::vector<Tensor>>> evaluateNodeWithin(const Node& node, const std::vector<Tensor>& inputs,
                                                                int64_t maxWork) {
  NNC_RETURN_IF_ERROR(checkInputs(node, inputs));
  std::vector<Tensor> outputs;
  for (const Value* v : node.outputs()) outputs.emplace_back(v->dtype(), v->shape());
  if (opFusionClass(node.op()) == FusionClass::Opaque) {  // host kernels are fast (TopK sorts)
    NNC_ASSIGN_OR_RETURN(outputs, evaluateOpaque(node, inputs, std::move(outputs)));
    return std::optional(std::move(outputs));
  }

  NNC_ASSIGN_OR_RETURN(std::vector<LoweredKernel> kernels, lowerAlone(node));
  if (work(kernels) > maxWork) return std::optional<std::vector<Tensor>>();

  std::map<const Value*, Tensor*> bound;
  std::vector<Tensor> inputCopies = inputs;  // the interpreter takes non-const pointers
  for (int i = 0; i < node.numInputs(); ++i)
    if (node.input(i) && !bound.count(node.input(i))) bound[node.input(i)] = &inputCopies[i];
  for (int i = 0; i < node.numOutputs(); ++i) bound[node.output(i)] = &outputs[i];
  for (LoweredKernel& lk : kernels) {
    std::vector<Tensor*> buffers;
    Tensor checkResult(DType::I64, Shape({kCheckResultSize}));
    for (Value* v : lk.params) buffers.push_back(v ? bound.at(v) : &checkResult);
    Status s = kir::interpret(lk.kernel, buffers);
    if (!s) return s.withContext(node.diagPrefix());
    if (!lk.check.empty()) {
      const int64_t* result = checkResult.dataAs<int64_t>();
      if (result[kCheckViolations] != 0) return Status::error(describeCheckFailure(lk.check, result));
    }
  }
  return std::optional(std::move(outputs));
}

Expected<std::vector<Tensor>> evaluateGraph(const Graph& graph, const std::vector<Tensor>& inputs, int64_t maxWork) {
  if (inputs.size() != graph.inputs().size())
    return Status::error("graph has " + std::to_string(graph.inputs().size()) + " inputs, given " +
                         std::to_string(inputs.size()));
  std::map<const Value*, Tensor> values;
  for (size_t i = 0; i < inputs.size(); ++i) values[graph.inputs()[i]] = inputs[i];
  auto lookup = [&](const Value* v) -> Tensor {
    if (v->isConstant()) return v->constant();
    auto it = values.find(v);
    return it == values.end() ? Tensor() : it->second;
  };
  for (const Node* n : graph.nodes()) {
    std::vector<Tensor> args;
    for (const Value* v : n->inputs()) args.push_back(v ? lookup(v) : Tensor());
    NNC_ASSIGN_OR_RETURN(std::optional<std::vector<Tensor>> outs, evaluateNodeWithin(*n, args, maxWork));
    if (!outs)
      return Status::error(n->diagPrefix() + "evaluation needs more than " + std::to_string(maxWork) + " loop points");
    for (int i = 0; i < n->numOutputs(); ++i) values[n->output(i)] = std::move((*outs)[i]);
  }
  std::vector<Tensor> result;
  for (const Value* v : graph.outputs()) result.push_back(lookup(v));
  return result;
}

}  // namespace nnc
