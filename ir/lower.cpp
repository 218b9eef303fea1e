// Lowering a group of nodes to kernel IR by composing per-op element generators.
//
// Algorithm: every value read from memory gets a generator that loads it at a flattened index.
// Nodes are visited in order; an elementwise/injective node's generators are closures over its
// inputs' generators (so producers are inlined into their consumers, and the kernel builder's
// hash-consing shares repeated subexpressions). A Reduction-class anchor sets up the kernel's loops
// and yields values at a fixed index; the elementwise nodes after it (the epilogue) read the anchor's
// results at that index only, which the fusion policy guarantees (same shape, no broadcast).
// Finally each group output is stored at its domain index.
#include "ir/lower.h"

#include <algorithm>
#include <map>
#include <set>

#include "ir/check_result.h"
#include "ir/op_registry.h"
#include "kir/interpreter.h"

namespace nnc {

namespace {

// Where a value produced by an anchor (or an epilogue op) is computed.
struct Domain {
  std::vector<kir::ExprId> index;
  bool perInner = false;
};

bool inGroup(const KernelGroup& g, const Node* n) {
  return std::find(g.nodes.begin(), g.nodes.end(), n) != g.nodes.end();
}

// Adds a param per group input, with a generator that loads it.
void bindGroupInputs(const KernelGroup& group, kir::KernelBuilder& kb, LoweredKernel& lowered,
                     std::map<const Value*, kir::ElementGen>& gens,
                     const std::map<const Value*, InputLayout>& layouts = {}) {
  for (Value* v : group.inputs) {
    kir::KernelBuilder* kbp = &kb;
    auto layout = layouts.find(v);
    if (layout != layouts.end()) {
      const int slot =
          kb.addParam(v->name(), layout->second.dtype.value_or(v->dtype()), layout->second.numel, /*isOutput=*/false);
      lowered.params.push_back(v);
      auto flatIndex = layout->second.flatIndex;
      gens[v] = [kbp, slot, flatIndex](const std::vector<kir::ExprId>& idx) {
        return kbp->load(slot, flatIndex(*kbp, idx));
      };
      continue;
    }
    // A one-element constant (an exponent, epsilon, a scale) is an expression constant: the kernel
    // then folds it (pow(x, 2) -> x * x) and loads nothing.
    if (v->isConstant() && v->shape().numel() == 1 && (v->dtype() == DType::F32 || v->dtype() == DType::F64)) {
      const kir::ExprId c = kb.constant(v->dtype(), v->constant().getDouble(0));
      gens[v] = [c](const std::vector<kir::ExprId>&) { return c; };
      continue;
    }
    const int slot = kb.addParam(v->name(), v->dtype(), v->shape().numel(), /*isOutput=*/false);
    lowered.params.push_back(v);
    Shape shape = v->shape();
    gens[v] = [kbp, slot, shape](const std::vector<kir::ExprId>& idx) {
      return kbp->load(slot, kbp->flatIndex(idx, shape));
    };
  }
}

// A generator for `v` in a check kernel: a group input is loaded; a value made inside the group is
// recomputed from its (elementwise or injective) producers. Indices never come out of a reduction
// anchor inside the group: the fusion policy fuses no injective op after an anchor.
Status resolveGenerator(const KernelGroup& group, kir::KernelBuilder& kb, const Value* v,
                        std::map<const Value*, kir::ElementGen>& gens) {
  if (gens.count(v)) return Status::ok();
  const Node* producer = v->producer();
  NNC_CHECK(producer && inGroup(group, producer),
            "check kernel: value '" + v->name() + "' is neither read nor made in the group");
  const OpDef& def = opDef(producer->op());
  NNC_CHECK(def.lowerElement, producer->diagPrefix() + "a checked index is computed by a reduction in the same kernel");
  LowerContext ctx{kb, *producer, {}};
  for (Value* in : producer->inputs()) {
    if (in) NNC_RETURN_IF_ERROR(resolveGenerator(group, kb, in, gens));
    ctx.inputs.push_back(in ? gens.at(in) : kir::ElementGen{});
  }
  std::vector<kir::ElementGen> outs = def.lowerElement(ctx);
  for (int i = 0; i < producer->numOutputs(); ++i) gens[producer->output(i)] = outs[i];
  return Status::ok();
}

// The kernel that evaluates `check` of `node` over the whole checked input: one outer point, a
// count of violations and the first one's position (ArgMax finds the first maximum), its value.
// Its params are the group's inputs — or, for a constant checked input, that input alone.
Expected<LoweredKernel> lowerIndexCheck(const KernelGroup& group, const Node& node, const IndexCheck& check,
                                        const std::string& name) {
  kir::KernelBuilder kb(name);
  LoweredKernel lowered;
  std::map<const Value*, kir::ElementGen> gens;
  const Value* checked = node.input(check.input);
  if (checked->isConstant()) {
    KernelGroup alone;
    alone.inputs = {const_cast<Value*>(checked)};
    bindGroupInputs(alone, kb, lowered, gens);
  } else {
    bindGroupInputs(group, kb, lowered, gens);
  }
  const int resultSlot = kb.addParam("check_result", DType::I64, kCheckResultSize, /*isOutput=*/true);
  lowered.params.push_back(nullptr);
  NNC_RETURN_IF_ERROR(resolveGenerator(group, kb, checked, gens));
  const kir::ElementGen& gen = gens.at(checked);
  const Shape& shape = checked->shape();
  auto asI64 = [&](kir::ExprId e) { return kb.dtypeOf(e) == DType::I64 ? e : kb.cast(DType::I64, e); };
  auto violation = [&](const std::vector<kir::ExprId>& at) {
    return kb.select(check.violates(kb, asI64(gen(at)), at), kb.i64(1), kb.i64(0));
  };
  kb.setOuter({});
  std::vector<kir::ExprId> countVars = kb.reductionVars(shape.dims());
  kir::ExprId count = kb.reduce(kir::ReduceOp::Sum, countVars, violation(countVars));
  std::vector<kir::ExprId> firstVars = kb.reductionVars(shape.dims());
  kir::ExprId first = kb.reduce(kir::ReduceOp::ArgMax, firstVars, violation(firstVars));
  kir::ExprId firstValue =
      kb.select(kb.binary(kir::ExprOp::Gt, count, kb.i64(0)), asI64(gen(kb.unflatten(first, shape))), kb.i64(0));
  kb.addStore(resultSlot, kb.i64(kCheckViolations), count, /*perInner=*/false);
  kb.addStore(resultSlot, kb.i64(kCheckFirstPosition), first, /*perInner=*/false);
  kb.addStore(resultSlot, kb.i64(kCheckFirstValue), firstValue, /*perInner=*/false);
  lowered.kernel = kb.finish();
  lowered.check = node.diagPrefix() + "input " + std::to_string(check.input) + " ('" + checked->name() + "', " +
                  std::to_string(shape.numel()) + " elements) " + check.expectation;
  return lowered;
}

// Runs a check kernel whose only input is the constant `indices` (lowerIndexCheck's constant case).
Status runConstantCheck(const LoweredKernel& lk, Tensor indices) {
  Tensor result(DType::I64, Shape({kCheckResultSize}));
  NNC_RETURN_IF_ERROR(kir::interpret(lk.kernel, {&indices, &result}));
  const int64_t* r = result.dataAs<int64_t>();
  if (r[kCheckViolations] != 0) return Status::error(describeCheckFailure(lk.check, r));
  return Status::ok();
}

}  // namespace

void computeGroupBoundary(KernelGroup& group) {
  group.inputs.clear();
  group.outputs.clear();
  std::set<const Value*> produced;
  for (Node* n : group.nodes)
    for (Value* v : n->outputs()) produced.insert(v);
  std::set<const Value*> seenInputs;
  for (Node* n : group.nodes) {
    for (Value* v : n->inputs()) {
      if (!v || produced.count(v) || !seenInputs.insert(v).second) continue;
      group.inputs.push_back(v);
    }
  }
  for (Node* n : group.nodes) {
    for (Value* v : n->outputs()) {
      bool usedOutside = v->isGraphOutput();
      for (const Use& u : v->users()) usedOutside |= !inGroup(group, u.node);
      if (usedOutside) group.outputs.push_back(v);
    }
  }
}

std::vector<std::string> groupSources(const KernelGroup& group) {
  std::vector<std::string> sources;
  std::set<std::string> seen;
  for (const Node* n : group.nodes)
    for (const std::string& o : n->origins())
      if (seen.insert(o).second) sources.push_back(o);
  return sources;
}

Expected<std::vector<LoweredKernel>> lowerGroup(const KernelGroup& group, const std::string& kernelName,
                                                const std::map<const Value*, InputLayout>& layouts) {
  const Node* anchor = nullptr;
  for (const Node* n : group.nodes) {
    FusionClass fc = opFusionClass(n->op());
    if (fc == FusionClass::Opaque) return Status::error(n->diagPrefix() + "an opaque op cannot be lowered to a kernel");
    if (fc != FusionClass::Reduction) continue;
    if (anchor)
      return Status::error(n->diagPrefix() + "a kernel can hold one reduction anchor; '" + anchor->name() +
                           "' is already in this group");
    anchor = n;
  }

  // Partition outputs: with an anchor, all outputs go in one kernel; without one, by shape.
  std::vector<std::vector<Value*>> outputSets;
  if (anchor) {
    outputSets.push_back(group.outputs);
  } else {
    for (Value* v : group.outputs) {
      auto it = std::find_if(outputSets.begin(), outputSets.end(),
                             [&](const std::vector<Value*>& s) { return s.front()->shape() == v->shape(); });
      if (it == outputSets.end()) {
        outputSets.push_back({v});
      } else {
        it->push_back(v);
      }
    }
  }

  std::vector<LoweredKernel> result;
  for (const Node* n : group.nodes) {
    const OpDef& def = opDef(n->op());
    if (!def.indexChecks) continue;
    for (const IndexCheck& check : def.indexChecks(*n)) {
      const Value* checked = n->input(check.input);
      if (!checked || checked->shape().numel() == 0) continue;
      NNC_ASSIGN_OR_RETURN(LoweredKernel lk,
                           lowerIndexCheck(group, *n, check, kernelName + "_check" + std::to_string(result.size())));
      if (checked->isConstant()) {
        // Known now: a violation is a compile-time error, and a satisfied check costs no kernel.
        NNC_RETURN_IF_ERROR(runConstantCheck(lk, checked->constant()));
        continue;
      }
      result.push_back(std::move(lk));
    }
  }
  for (size_t k = 0; k < outputSets.size(); ++k) {
    const std::vector<Value*>& outputs = outputSets[k];
    std::string name = k == 0 ? kernelName : kernelName + "_" + std::to_string(k);
    kir::KernelBuilder kb(name);
    LoweredKernel lowered;
    std::map<const Value*, kir::ElementGen> gens;
    bindGroupInputs(group, kb, lowered, gens, layouts);
    std::vector<int> outputSlots;
    for (Value* v : outputs) {
      outputSlots.push_back(kb.addParam(v->name(), v->dtype(), v->shape().numel(), /*isOutput=*/true));
      lowered.params.push_back(v);
    }

    std::map<const Value*, Domain> domains;  // values computed at an anchor's index
    for (const Node* n : group.nodes) {
      const OpDef& def = opDef(n->op());
      LowerContext ctx{kb, *n, {}};
      for (Value* in : n->inputs()) {
        if (!in) {
          ctx.inputs.push_back(nullptr);
          continue;
        }
        auto it = gens.find(in);
        NNC_CHECK(it != gens.end(), "lowerGroup: input '" + in->name() + "' has no generator");
        ctx.inputs.push_back(it->second);
      }
      if (n == anchor) {
        if (!def.lowerAnchor) return Status::error(n->diagPrefix() + "no kernel lowering for this op");
        std::vector<AnchorOutput> outs = def.lowerAnchor(ctx);
        NNC_CHECK(static_cast<int>(outs.size()) >= n->numOutputs(), "anchor returned too few outputs");
        for (int i = 0; i < n->numOutputs(); ++i) {
          kir::ExprId value = outs[i].value;
          gens[n->output(i)] = [value](const std::vector<kir::ExprId>&) { return value; };
          domains[n->output(i)] = {outs[i].index, outs[i].perInner};
        }
        continue;
      }
      if (!def.lowerElement) return Status::error(n->diagPrefix() + "no kernel lowering for this op");
      std::vector<kir::ElementGen> outs = def.lowerElement(ctx);
      NNC_CHECK(static_cast<int>(outs.size()) >= n->numOutputs(), "lowering returned too few outputs");
      // An epilogue node computes at the domain of the anchored value it reads.
      const Domain* domain = nullptr;
      Domain reshaped;
      for (Value* in : n->inputs()) {
        auto it = in ? domains.find(in) : domains.end();
        if (it != domains.end()) {
          if (n->op() == OpKind::Reshape) {  // the same flat position, at the new shape's index
            reshaped = {kb.unflatten(kb.flatIndex(it->second.index, in->shape()), n->output(0)->shape()),
                        it->second.perInner};
            domain = &reshaped;
            break;
          }
          if (in->shape() != n->output(0)->shape())
            return Status::error(n->diagPrefix() + "reads a reduction result at another shape; cannot fuse");
          domain = &it->second;
          break;
        }
      }
      for (int i = 0; i < n->numOutputs(); ++i) {
        gens[n->output(i)] = outs[i];
        if (domain) domains[n->output(i)] = *domain;
      }
    }

    if (anchor) {
      for (size_t i = 0; i < outputs.size(); ++i) {
        Value* v = outputs[i];
        auto it = domains.find(v);
        if (it == domains.end())
          return Status::error("kernel '" + name + "': output '" + v->name() +
                               "' is not computed at the reduction's index; cannot fuse");
        const Domain& d = it->second;
        kb.addStore(outputSlots[i], kb.flatIndex(d.index, v->shape()), gens[v](d.index), d.perInner);
      }
    } else {
      const Shape shape = outputs.front()->shape();
      // The loop domain: the output's shape, or the shape its producer prefers to be walked in. A
      // group ending in Reshapes (same element order) walks the shape before them, the one its other
      // generators index in: no div/mod re-deriving it per element (Concat then a GEMM's Reshape).
      Shape walked = shape;
      const Node* producer = outputs.front()->producer();
      while (outputs.size() == 1 && producer && opDef(producer->op()).keepsElementOrder && producer->input(0) &&
             producer->input(0)->producer() &&
             std::find(group.nodes.begin(), group.nodes.end(), producer->input(0)->producer()) != group.nodes.end()) {
        walked = producer->input(0)->shape();
        producer = producer->input(0)->producer();
      }
      if (outputs.size() == 1 && producer && opDef(producer->op()).iterationShape) {
        Shape preferred = opDef(producer->op()).iterationShape(*producer);
        if (preferred.numel() == shape.numel()) walked = preferred;
      }
      std::vector<kir::ExprId> vars = kb.setOuter(walked.dims());
      const std::vector<kir::ExprId> index = walked == shape ? vars : kb.unflatten(kb.flatIndex(vars, walked), shape);
      for (size_t i = 0; i < outputs.size(); ++i)
        kb.addStore(outputSlots[i], kb.flatIndex(index, shape), gens[outputs[i]](index), /*perInner=*/false);
    }
    lowered.kernel = kb.finish();
    result.push_back(std::move(lowered));
  }
  return result;
}

}  // namespace nnc
