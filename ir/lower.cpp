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

#include "ir/op_registry.h"

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

Expected<std::vector<LoweredKernel>> lowerGroup(const KernelGroup& group, const std::string& kernelName) {
  const Node* anchor = nullptr;
  for (const Node* n : group.nodes) {
    FusionClass fc = opFusionClass(n->op());
    if (fc == FusionClass::Opaque)
      return Status::error(n->diagPrefix() + "an opaque op cannot be lowered to a kernel");
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
  for (size_t k = 0; k < outputSets.size(); ++k) {
    const std::vector<Value*>& outputs = outputSets[k];
    std::string name = k == 0 ? kernelName : kernelName + "_" + std::to_string(k);
    kir::KernelBuilder kb(name);
    LoweredKernel lowered;
    std::map<const Value*, kir::ElementGen> gens;
    for (Value* v : group.inputs) {
      const int slot = kb.addParam(v->name(), v->dtype(), v->shape().numel(), /*isOutput=*/false);
      lowered.params.push_back(v);
      Shape shape = v->shape();
      kir::KernelBuilder* kbp = &kb;
      gens[v] = [kbp, slot, shape](const std::vector<kir::ExprId>& idx) {
        return kbp->load(slot, kbp->flatIndex(idx, shape));
      };
    }
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
      for (Value* in : n->inputs()) {
        auto it = in ? domains.find(in) : domains.end();
        if (it != domains.end()) {
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
      std::vector<kir::ExprId> vars = kb.setOuter(shape.dims());
      for (size_t i = 0; i < outputs.size(); ++i)
        kb.addStore(outputSlots[i], kb.flatIndex(vars, shape), gens[outputs[i]](vars), /*perInner=*/false);
    }
    lowered.kernel = kb.finish();
    result.push_back(std::move(lowered));
  }
  return result;
}

}  // namespace nnc
