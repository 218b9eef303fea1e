// GraphBuilder (create, infer and fold nodes with sticky errors) and inferNode.
#include "ir/builder.h"

#include <cstdio>

#include "ir/reference.h"

namespace nnc {

namespace {

// Inputs that are not constants are passed to the evaluator of a dependsOnlyOnShapes op as zero
// tensors up to this size (its kernel never reads them); larger ones as null tensors.
constexpr int64_t kMaxShapeOnlyPlaceholder = int64_t{1} << 24;

std::string plural(int n, const char* word) { return std::to_string(n) + " " + word + (n == 1 ? "" : "s"); }

std::string arityText(int lo, int hi, const char* word) {
  if (lo == hi) return plural(lo, word);
  if (hi >= (1 << 20)) return "at least " + plural(lo, word);
  return std::to_string(lo) + " to " + std::to_string(hi) + " " + word + "s";
}

Status checkArity(const Node& node, const OpDef& def) {
  int n = node.numInputs();
  if (n < def.minInputs || n > def.maxInputs)
    return Status::error(node.diagPrefix() + "expects " + arityText(def.minInputs, def.maxInputs, "input") + ", got " +
                         std::to_string(n));
  int m = node.numOutputs();
  if (m < def.minOutputs || m > def.maxOutputs)
    return Status::error(node.diagPrefix() + "expects " + arityText(def.minOutputs, def.maxOutputs, "output") +
                         ", got " + std::to_string(m));
  // Variadic inputs (Sum, Max, Concat, ...) are never optional: lowering reads each of them.
  int required = def.maxInputs >= (1 << 20) ? n : def.minInputs;
  for (int i = 0; i < required; ++i)
    if (!node.input(i)) return Status::error(node.diagPrefix() + "input " + std::to_string(i) + " is required");
  return Status::ok();
}

Status checkOutputShape(const Node& node, int i, const Shape& shape) {
  for (int64_t d : shape.dims())
    if (d < 0)
      return Status::error(node.diagPrefix() + "output " + std::to_string(i) + " has a negative dimension in " +
                           shape.str());
  if (shape.checkedNumel()) return Status::ok();
  // An empty shape may still have a dim past the limit (index arithmetic uses every dim).
  for (int64_t d : shape.dims())
    if (d > kMaxElements)
      return Status::error(node.diagPrefix() + "output " + std::to_string(i) + " has dim " + std::to_string(d) +
                           " in " + shape.str() + ", more than nnc supports (2^40)");
  long double n = 1;
  for (int64_t d : shape.dims()) n *= static_cast<long double>(d);
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.0Lf", n);
  return Status::error(node.diagPrefix() + "output " + std::to_string(i) + " has " + buf +
                       " elements, more than nnc supports (2^40)");
}

}  // namespace

Status inferNode(Node& node) {
  const OpDef& def = opDef(node.op());
  if (!def.infer) return Status::error(node.diagPrefix() + "unsupported operator " + std::string(opName(node.op())));
  NNC_RETURN_IF_ERROR(checkArity(node, def));
  NNC_RETURN_IF_ERROR(validateAttributes(def.attrs, node.attrs()).withContext(node.diagPrefix()));
  // A sentinel shape catches an infer function that forgets an output.
  const Shape unset{-7777777};
  std::vector<OutputType> outs(node.numOutputs(), OutputType{DType::F32, unset});
  InferContext ctx(node, outs);
  NNC_RETURN_IF_ERROR(checkDeclaredInputs(def, ctx));
  NNC_RETURN_IF_ERROR(def.infer(ctx));
  for (int i = 0; i < node.numOutputs(); ++i) {
    NNC_CHECK(outs[i].shape != unset, node.diagPrefix() + "inference did not set output " + std::to_string(i));
    NNC_RETURN_IF_ERROR(checkOutputShape(node, i, outs[i].shape));
  }
  for (int i = 0; i < node.numOutputs(); ++i) node.output(i)->setType(outs[i].dtype, std::move(outs[i].shape));
  return Status::ok();
}

Value* GraphBuilder::input(const std::string& name, DType dtype, Shape shape) {
  if (!shape.checkedNumel()) {
    if (status_) status_ = Status::error("input '" + name + "' has an unsupported shape " + shape.str());
    return nullptr;
  }
  for (const Value* v : graph_.inputs()) {
    if (v->name() == name) {
      if (status_) status_ = Status::error("duplicate graph input name '" + name + "'");
      return nullptr;
    }
  }
  return graph_.addInput(name, dtype, std::move(shape));
}

Value* GraphBuilder::constant(Tensor value, const std::string& name) {
  NNC_CHECK(!value.isNull(), "GraphBuilder::constant with a null tensor");
  return graph_.addConstant(graph_.uniqueName(name.empty() ? "const" : name), std::move(value));
}

std::vector<Value*> GraphBuilder::opMulti(OpKind op, std::vector<Value*> inputs, Attributes attrs, int numOutputs,
                                          const std::string& name) {
  const OpDef& def = opDef(op);
  if (numOutputs < 0) numOutputs = def.minOutputs;
  std::vector<Value*> nulls(std::max(numOutputs, 1), nullptr);
  auto fail = [&](Status s) {
    if (status_) status_ = std::move(s);
    return nulls;
  };

  std::string nodeName = graph_.uniqueName(name.empty() ? std::string(opName(op)) : name);
  for (int i = 0; i < def.minInputs && i < static_cast<int>(inputs.size()); ++i) {
    if (inputs[i]) continue;
    // A null required input after an earlier failure is that failure's consequence: stay quiet.
    if (!status_) return nulls;
    return fail(Status::error("node '" + nodeName + "' (" + std::string(opName(op)) + "): input " + std::to_string(i) +
                              " is required"));
  }

  Node* node = graph_.addNode(op, nodeName, std::move(inputs), numOutputs, std::move(attrs));
  if (Status s = inferNode(*node); !s) {
    graph_.eraseNode(node);
    return fail(std::move(s));
  }

  bool foldable = folding_;
  for (Value* in : node->inputs())
    if (in && !in->isConstant() && !def.dependsOnlyOnShapes) foldable = false;
  for (Value* out : node->outputs())
    if (out->shape().numel() > foldLimit_) foldable = false;
  if (foldable) {
    std::vector<Tensor> args;
    for (Value* in : node->inputs()) {
      if (!in) {
        args.emplace_back();
      } else if (in->isConstant()) {
        args.push_back(in->constant());
      } else if (in->shape().numel() <= kMaxShapeOnlyPlaceholder) {
        args.emplace_back(in->dtype(), in->shape());
      } else {
        args.emplace_back();
      }
    }
    // An evaluation failure keeps the node: it will be compiled, and any real problem reported then.
    // So does a node too costly to fold.
    auto folded = evaluateNodeWithin(*node, args, kMaxFoldWork);
    if (folded && folded.value()) {
      std::vector<Tensor>& tensors = *folded.value();
      NNC_CHECK(static_cast<int>(tensors.size()) == node->numOutputs(),
                node->diagPrefix() + "folding returned the wrong number of outputs");
      std::vector<std::string> names;
      for (int i = 0; i < node->numOutputs(); ++i) {
        const Value* out = node->output(i);
        NNC_CHECK(tensors[i].dtype() == out->dtype() && tensors[i].shape() == out->shape(),
                  node->diagPrefix() + "folded output " + std::to_string(i) + " is " + tensors[i].summary() +
                      ", inference said " + std::string(dtypeName(out->dtype())) + out->shape().str());
        names.push_back(out->name());
      }
      graph_.eraseNode(node);
      std::vector<Value*> consts;
      for (size_t i = 0; i < tensors.size(); ++i) consts.push_back(graph_.addConstant(names[i], std::move(tensors[i])));
      return consts;
    }
  }
  if (!origin_.empty()) node->addOrigins({origin_});
  ++nodesKept_;
  return node->outputs();
}

Value* GraphBuilder::op(OpKind op, std::vector<Value*> inputs, Attributes attrs, const std::string& name) {
  std::vector<Value*> outs = opMulti(op, std::move(inputs), std::move(attrs), -1, name);
  return outs.empty() ? nullptr : outs[0];
}

void GraphBuilder::output(Value* v) {
  if (!v) {
    if (status_) status_ = Status::error("graph output is null (an earlier builder call failed?)");
    return;
  }
  graph_.addOutput(v);
}

}  // namespace nnc
