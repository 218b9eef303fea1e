// Lowering an optimised graph to a runtime plan: groups -> kernels/builtins -> steps, constants ->
// one aligned weights blob, intermediates -> arena offsets from their lifetimes (in group order).
#include "driver/plan_builder.h"

#include <algorithm>
#include <cctype>
#include <cstring>
#include <map>
#include <utility>

#include "ir/check_result.h"
#include "ir/op_registry.h"
#include "passes/fusion.h"
#include "passes/memory_plan.h"
#include "targets/target.h"

namespace nnc {

namespace {

// Each weight in the blob and each buffer in the arena starts on a cache line, as the blob does
// (WeightsBlob): kernels read them with 64-byte vectors.
constexpr uint64_t kAlignment = kCacheLineBytes;

uint64_t alignUp(uint64_t x) { return (x + kAlignment - 1) / kAlignment * kAlignment; }

rt::TensorDesc describe(const Value* v, const std::string& name) {
  return {name, dtypeToOnnx(v->dtype()), v->shape().dims(), v->byteSize()};
}

// A C identifier for kernel number `i` built from its first op: "nnc_k12_conv".
std::string kernelName(size_t i, const KernelGroup& g) {
  std::string op(opName(g.nodes.front()->op()));
  for (char& c : op) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return "nnc_k" + std::to_string(i) + "_" + op;
}

std::string originOf(const KernelGroup& g) {
  std::string s;
  for (const Node* n : g.nodes) s += (s.empty() ? "" : ", ") + n->name();
  return s;
}

// Test-only fault injection (LoweringOptions::faultNode): the loop kernels of the group holding that
// node add 1 to every floating-point value they store, so that the tests of `nnc bisect` can check
// that it names the right group.
void injectFault(const std::string& faulty, const KernelGroup& group, kir::Kernel& k) {
  if (faulty.empty() || !k.isLoopNest()) return;
  if (std::none_of(group.nodes.begin(), group.nodes.end(), [&](const Node* n) { return n->name() == faulty; })) return;
  for (kir::Store& s : k.stores) {
    const DType t = k.exprs[s.value].dtype;
    if (!isFloat(t)) continue;
    kir::ExprNode one{kir::ExprOp::Const, t};
    one.fval = 1;
    k.exprs.push_back(one);
    k.exprs.push_back(kir::ExprNode{kir::ExprOp::Add, t, s.value, static_cast<kir::ExprId>(k.exprs.size() - 1)});
    s.value = static_cast<kir::ExprId>(k.exprs.size() - 1);
  }
}

class PlanBuilder {
 public:
  PlanBuilder(const Graph& graph, LoweredProgram& out, const Target& target, const LoweringOptions& options)
      : graph_(graph), out_(out), target_(target), options_(options) {}

  Status build(const std::vector<std::string>& outputNames) {
    rt::Plan& plan = out_.plan;
    for (size_t i = 0; i < graph_.inputs().size(); ++i) {
      const Value* v = graph_.inputs()[i];
      plan.inputs.push_back(describe(v, v->name()));
      bufferOf_[v] = addBuffer({rt::BufferKind::Input, i, v->byteSize()});
    }
    for (size_t i = 0; i < graph_.outputs().size(); ++i) {
      const Value* v = graph_.outputs()[i];
      NNC_CHECK(!v->isGraphInput() && !v->isConstant() && !bufferOf_.count(v),
                "output '" + v->name() + "' is not materialized");
      plan.outputs.push_back(describe(v, i < outputNames.size() ? outputNames[i] : v->name()));
      bufferOf_[v] = addBuffer({rt::BufferKind::Output, i, v->byteSize()});
    }
    findSlices();
    // Arena buffers: every group result that is not a graph output. A slice of an in-place
    // concatenation lives inside the concatenation's bytes, which are live from the first slice's
    // producer on.
    std::map<const Value*, int> sliceProducer;
    for (size_t g = 0; g < out_.groups.size(); ++g) {
      for (const Value* v : out_.groups[g].outputs) {
        if (bufferOf_.count(v)) continue;
        bufferOf_[v] = addBuffer({rt::BufferKind::Arena, 0, v->byteSize()});
        if (sliceOf_.count(v))
          sliceProducer[v] = static_cast<int>(g);
        else
          lifetimes_[v] = {v->byteSize(), static_cast<int>(g), static_cast<int>(g)};
      }
    }
    for (const auto& [slice, g] : sliceProducer) {
      passes::BufferLifetime& whole = lifetimes_.at(sliceOf_.at(slice).whole);
      whole.firstStep = std::min(whole.firstStep, g);
    }
    NNC_RETURN_IF_ERROR(lowerGroups());
    for (size_t g = 0; g < out_.groups.size(); ++g) {
      for (const Value* v : out_.groups[g].inputs) {
        if (const PackedConstant* packed = packedOperand(lowered_[g], v)) {
          const PackedKey key{v, packed->layout};
          if (!packedBufferOf_.count(key)) packedBufferOf_[key] = addWeight(packed->pack());
        } else if (v->isConstant() && !bufferOf_.count(v)) {
          bufferOf_[v] = addWeight(v->constant());
        }
        auto slice = sliceOf_.find(v);
        auto it = lifetimes_.find(slice != sliceOf_.end() ? slice->second.whole : v);
        if (it != lifetimes_.end()) it->second.lastStep = std::max(it->second.lastStep, static_cast<int>(g));
      }
    }
    placeArena();
    for (size_t g = 0; g < out_.groups.size(); ++g) {
      NNC_RETURN_IF_ERROR(emitGroup(g));
      out_.stepGroup.resize(out_.plan.steps.size(), g);
    }
    plan.weightsSize = out_.weights.size();
    return Status::ok();
  }

 private:
  int32_t addBuffer(rt::BufferRef ref) {
    out_.plan.buffers.push_back(ref);
    return static_cast<int32_t>(out_.plan.buffers.size()) - 1;
  }

  int32_t addWeight(const Tensor& t) {
    const uint64_t offset = alignUp(out_.weights.size());
    out_.weights.resize(offset + t.byteSize());
    if (t.byteSize()) std::memcpy(out_.weights.data() + offset, t.data(), t.byteSize());
    return addBuffer({rt::BufferKind::Weight, offset, t.byteSize()});
  }

  void placeArena() {
    // In buffer order, not the map's (pointer) order: the same graph gets the same arena layout
    // whatever addresses its Values were allocated at.
    std::vector<const Value*> values;
    for (const auto& entry : lifetimes_) values.push_back(entry.first);
    std::sort(values.begin(), values.end(),
              [&](const Value* a, const Value* b) { return bufferOf_.at(a) < bufferOf_.at(b); });
    std::vector<passes::BufferLifetime> lifetimes;
    for (const Value* v : values) lifetimes.push_back(lifetimes_.at(v));
    passes::ArenaLayout layout = passes::planArena(lifetimes, kAlignment);
    for (size_t i = 0; i < values.size(); ++i) out_.plan.buffers[bufferOf_.at(values[i])].offset = layout.offsets[i];
    for (const auto& [slice, where] : sliceOf_)
      out_.plan.buffers[bufferOf_.at(slice)].offset =
          out_.plan.buffers[bufferOf_.at(where.whole)].offset + where.offset;
    out_.plan.arenaSize = layout.size;
  }

  // The inputs of in-place concatenations (GroupKind::InPlace; the fusion policy checked that each
  // is a contiguous, 64-byte aligned slice of the result and computed by another group). A result
  // nothing reads has no buffer to place them in: they keep their own.
  void findSlices() {
    for (const KernelGroup& group : out_.groups) {
      if (group.kind != GroupKind::InPlace || group.outputs.empty()) continue;
      const Node* concat = group.nodes.front();
      uint64_t offset = 0;
      for (const Value* in : concat->inputs()) {
        sliceOf_[in] = {concat->output(0), offset};
        offset += in->byteSize();
      }
    }
  }

  // Every group's kernels or library call, from the target, before the weights are laid out (the
  // constants its kernels read packed go into the weights in that form). Host builtins and in-place
  // concatenations are the same on every target.
  Status lowerGroups() {
    lowered_.resize(out_.groups.size());
    for (size_t g = 0; g < out_.groups.size(); ++g) {
      const KernelGroup& group = out_.groups[g];
      if (group.kind == GroupKind::HostBuiltin || group.kind == GroupKind::InPlace) continue;
      NNC_ASSIGN_OR_RETURN(lowered_[g], target_.lower(group, kernelName(g, group)));
    }
    return Status::ok();
  }

  Status emitGroup(size_t index) {
    const KernelGroup& group = out_.groups[index];
    if (group.kind == GroupKind::HostBuiltin) return emitBuiltin(group);
    if (group.kind == GroupKind::InPlace) return Status::ok();  // its inputs' producers wrote it
    LoweredGroup& lowered = lowered_[index];
    if (lowered.library) return emitLibraryCall(group, std::move(*lowered.library));
    for (LoweredKernel& lk : lowered.kernels) {
      injectFault(options_.faultNode, group, lk.kernel);
      // A loop nest whose outputs are all empty (its loops may not be) runs nothing.
      if (lk.kernel.isLoopNest() && lk.kernel.writesNothing()) continue;
      rt::Step step;
      step.kind = rt::StepKind::Kernel;
      step.name = lk.kernel.name;
      for (const Value* v : lk.params) {
        const PackedConstant* packed = packedOperand(lowered, v);
        step.args.push_back(!v ? addCheckResult() : packed ? packedBufferOf_.at({v, packed->layout}) : bufferOf(v));
      }
      step.check = std::move(lk.check);
      step.outerSize = lk.kernel.numTasks();
      step.workPerPoint = lk.kernel.workPerTask();
      step.chunkGranule = lk.kernel.chunkGranule();
      step.origin = originOf(group);
      out_.plan.steps.push_back(std::move(step));
      out_.kernels.push_back(std::move(lk.kernel));
    }
    return Status::ok();
  }

  Status emitBuiltin(const KernelGroup& group) {
    const Node* node = group.nodes.front();
    const OpDef& def = opDef(node->op());
    rt::Step step;
    step.kind = rt::StepKind::Builtin;
    step.name = def.opaque.symbol;
    step.params = def.opaque.encode(*node);
    for (const Value* v : node->inputs())
      if (v) step.args.push_back(bufferOf_.at(v));
    for (const Value* v : node->outputs()) step.args.push_back(bufferOf(v));
    step.origin = originOf(group);
    out_.plan.steps.push_back(std::move(step));
    return Status::ok();
  }

  // A library call the target made of the group, as its one step.
  Status emitLibraryCall(const KernelGroup& group, LibraryCall call) {
    rt::Step step;
    step.kind = rt::StepKind::Library;
    step.name = std::move(call.name);
    for (const Value* v : call.args) step.args.push_back(bufferOf(v));
    step.params = std::move(call.params);
    step.outerSize = 0;
    step.workPerPoint = 0;
    step.origin = originOf(group);
    out_.plan.steps.push_back(std::move(step));
    return Status::ok();
  }

  // Outputs of a node that no group reads (an unused second output) still need somewhere to go.
  int32_t bufferOf(const Value* v) {
    auto it = bufferOf_.find(v);
    if (it != bufferOf_.end()) return it->second;
    const int32_t id = appendArenaBuffer(v->byteSize());
    bufferOf_[v] = id;
    return id;
  }

  // A check kernel's result (rt::CheckResult): its own arena bytes past the planned region.
  int32_t addCheckResult() { return appendArenaBuffer(kCheckResultSize * sizeof(int64_t)); }

  int32_t appendArenaBuffer(uint64_t bytes) {
    const int32_t id = addBuffer({rt::BufferKind::Arena, alignUp(out_.plan.arenaSize), bytes});
    out_.plan.arenaSize = alignUp(out_.plan.arenaSize) + alignUp(bytes);
    return id;
  }

  const Graph& graph_;
  LoweredProgram& out_;
  const Target& target_;
  const LoweringOptions& options_;
  std::vector<LoweredGroup> lowered_;  // per group (empty for host builtins and in-place groups)
  std::map<const Value*, int32_t> bufferOf_;
  // Packed constants by (value, layout): two groups may share one packing.
  using PackedKey = std::pair<const Value*, std::string>;
  std::map<PackedKey, int32_t> packedBufferOf_;
  static const PackedConstant* packedOperand(const LoweredGroup& g, const Value* v) {
    for (const PackedConstant& p : g.packed)
      if (p.value == v) return &p;
    return nullptr;
  }
  std::map<const Value*, passes::BufferLifetime> lifetimes_;
  struct Slice {
    const Value* whole;  // the concatenation
    uint64_t offset;     // bytes into it
  };
  std::map<const Value*, Slice> sliceOf_;
};

}  // namespace

Expected<LoweredProgram> lowerProgram(const Graph& graph, const std::vector<std::string>& outputNames,
                                      const Target& target, const LoweringOptions& options) {
  LoweredProgram program;
  passes::FusionOptions fusion;
  fusion.enabled = options.fuse;
  fusion.contractions = target.contractionHooks();
  fusion.debugLog = options.fusionLog;
  std::vector<passes::FusionRefusal> refusals;
  fusion.refusals = &refusals;
  program.groups = passes::partitionIntoKernels(graph, fusion);
  for (KernelGroup& group : program.groups)
    for (const Node* n : group.nodes) group.keepF32 |= options.keepF32.count(n) > 0;
  program.cuts = passes::fusionCuts(program.groups, refusals, fusion.enabled);
  NNC_RETURN_IF_ERROR(PlanBuilder(graph, program, target, options).build(outputNames));
  return program;
}

}  // namespace nnc
