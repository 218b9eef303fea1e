// Fusion policy. Greedy, one forward walk over the nodes in topological order with union-find
// groups (the anchors of this design: XLA's producer/consumer fusion, TVM's op patterns):
//   0. Attention: each MatMul · scale/mask · Softmax · MatMul the target computes as one kernel
//      (ContractionHooks::acceptsAttention; targets/cpu/lower_attention.h) is one group, before the walk; it
//      takes no prologue and no epilogue.
//   1. Epilogue: an elementwise node joins the group of the anchor (reduction, contraction, window)
//      that computes one of its inputs, when that input has no other user, is not a graph output,
//      has the node's output shape (so it is read at the anchor's own index), and the group has
//      exactly one live result (so no cycle through another group can appear). An input with
//      several users joins with the elementwise region that consumes all of them and ends in one
//      value (GELU, SiLU after a GEMM: epilogueRegion), each node still computed once per element.
//   2. Prologue: a producer group without an anchor is inlined into its single consumer when the
//      consumer's group can take it: pointwise and data-movement consumers take anything; anchors
//      that read each input element a bounded number of times (reductions, softmax, norms) take
//      elementwise and data-movement producers; anchors that re-read inputs many times
//      (OpDef::rereadsInputs: MatMul, Conv, pools, ...) take only pure data movement, so no
//      arithmetic is recomputed per MAC.
//   3. Cost model of a prologue (recomputeCost): an elementwise producer broadcast into a larger
//      elementwise consumer keeps its own kernel when the arithmetic it would repeat per reuse
//      (OpDef::elementCost) outweighs its result's round trip through memory and one kernel.
//   4. Concatenation in place: a Concat whose inputs are contiguous slices of its output (every axis
//      before the concatenated one has extent 1) and are each computed by another group keeps a group
//      of its own with no kernel (GroupKind::InPlace): the plan places each input inside the output,
//      so their producers write the concatenation and no copy runs (SqueezeNet's fire modules,
//      Inception's branches, DenseNet's layers).
//   5. A half-precision copy alongside (alongside): a Cast of an f32 value to bf16 or f16 (a GEMM operand
//      in half: targets/cuda/half_gemm_operands.cpp) whose input has other users joins the group that
//      computes the input, when that is a loop kernel (no contraction, no attention) whose one live
//      result is the input, and no reader of the input runs before the Cast: the kernel stores both,
//      and the copy costs neither a kernel nor a second read.
// A producer with several users is materialised once (no duplication yet).
// The policy names no target and (but for Pad and Concat) no op: it asks op properties (OpDef) and the target's
// contraction hooks (FusionOptions::contractions). A target's contraction anchors make groups of the
// kind it says, taking only the prologue it folds into how they read their operands and the epilogue
// it accepts — e.g. the cpu's packed GEMM folds strided views and im2col patches and takes a reshape
// of its result; cuBLASLt folds nothing and takes one bias (targets/cpu/cpu_target.cpp, cuda_target.cpp).
#include "passes/fusion.h"

#include <algorithm>
#include <array>
#include <map>
#include <numeric>
#include <optional>
#include <set>
#include <sstream>

#include "ir/op_registry.h"
#include "ir/printer.h"

namespace nnc::passes {

namespace {

class Partitioner {
 public:
  Partitioner(const Graph& graph, const FusionOptions& options) : options_(options) {
    nodes_ = graph.nodes();
    for (size_t i = 0; i < nodes_.size(); ++i) index_[nodes_[i]] = static_cast<int>(i);
    parent_.resize(nodes_.size());
    std::iota(parent_.begin(), parent_.end(), 0);
    anchorOf_.assign(nodes_.size(), -1);
    contractionAnchor_.assign(nodes_.size(), false);
    epilogueJoined_.assign(nodes_.size(), 0);
    onlyDataMovement_.assign(nodes_.size(), true);
    folds_.assign(nodes_.size(), {false, false, false});
    inPlace_.assign(nodes_.size(), false);
    attention_.assign(nodes_.size(), false);
    const ContractionHooks& hooks = options_.contractions;
    for (size_t i = 0; i < nodes_.size(); ++i) {
      const Node& n = *nodes_[i];
      FusionClass fc = opFusionClass(n.op());
      if (fc == FusionClass::Reduction) anchorOf_[i] = static_cast<int>(i);
      contractionAnchor_[i] = fc == FusionClass::Reduction && hooks.isAnchor && hooks.isAnchor(n);
      onlyDataMovement_[i] = fc == FusionClass::Injective;
      for (int operand = -1; operand <= 1; ++operand)
        folds_[i][operand + 1] = hooks.foldsIntoOperand && hooks.foldsIntoOperand(n, operand);
    }
    if (options_.enabled) markConcatsInPlace();
    if (options_.enabled && hooks.acceptsAttention) groupAttention();
  }

  std::vector<KernelGroup> run() {
    if (options_.enabled) {
      for (Node* n : nodes_) {
        if (attention_[groupOf(n)]) continue;  // its operands are read from memory, its result written
        tryEpilogue(n);
        tryAlongside(n);
        tryPrologues(n);
      }
    }
    std::map<int, KernelGroup> byRoot;
    for (Node* n : nodes_) byRoot[find(index_[n])].nodes.push_back(n);
    std::vector<KernelGroup> groups;
    for (auto& [root, g] : byRoot) groups.push_back(std::move(g));
    // Execution order: by each group's last node, which is after all of its inputs' producers.
    std::sort(groups.begin(), groups.end(), [&](const KernelGroup& a, const KernelGroup& b) {
      return index_.at(a.nodes.back()) < index_.at(b.nodes.back());
    });
    for (KernelGroup& g : groups) {
      computeGroupBoundary(g);
      g.kind = kindOf(g);
    }
    return groups;
  }

 private:
  int find(int i) { return parent_[i] == i ? i : parent_[i] = find(parent_[i]); }
  void merge(int into, int from) {
    into = find(into);
    from = find(from);
    if (into == from) return;
    parent_[from] = into;
    if (anchorOf_[into] < 0) anchorOf_[into] = anchorOf_[from];
    onlyDataMovement_[into] = onlyDataMovement_[into] && onlyDataMovement_[from];
    for (int k = 0; k < 3; ++k) folds_[into][k] = folds_[into][k] && folds_[from][k];
  }
  int groupOf(const Node* n) { return find(index_.at(n)); }

  GroupKind kindOf(const KernelGroup& g) {
    const Node* first = g.nodes.front();
    if (opFusionClass(first->op()) == FusionClass::Opaque) return GroupKind::HostBuiltin;  // alone in its group
    if (inPlace_[index_.at(first)]) return GroupKind::InPlace;                             // alone too
    if (attention_[groupOf(first)]) return GroupKind::Attention;
    return isContraction(groupOf(first)) ? options_.contractions.kind : GroupKind::LoopKernel;
  }

  // Whether group g is anchored by one of the target's contractions.
  bool isContraction(int g) { return anchorOf_[g] >= 0 && contractionAnchor_[anchorOf_[g]]; }

  void reject(const Node* n, const Value* in, const std::string& why) {
    if (options_.debugLog) *options_.debugLog << "fusion: " << n->name() << ": " << why << "\n";
    if (options_.refusals) options_.refusals->push_back({n, in, why});
  }

  // Values of group g used outside it or returned.
  int liveResults(int g) {
    int count = 0;
    for (size_t i = 0; i < nodes_.size(); ++i) {
      if (find(static_cast<int>(i)) != g) continue;
      for (const Value* v : nodes_[i]->outputs()) {
        bool outside = v->isGraphOutput();
        for (const Use& u : v->users()) outside |= groupOf(u.node) != g;
        count += outside;
      }
    }
    return count;
  }

  // Rule 1 for a value with several users (GELU's x * 0.5 * (1 + erf(x / sqrt 2)), SiLU's x * sigmoid(x)):
  // the smallest set of nodes after `in`'s producer, in topological order, that consumes every use of
  // `in` and of each value it computes but one (the region's result). Every member must be
  // elementwise at `in`'s shape, with one output, not yet visited by the walk (index > current) and
  // no graph output but the last; then the region joins the anchor's group at once, and each of its
  // values is computed once per element, as a chain would be. A member's other inputs cannot depend
  // on `in`: in topological order, every consumer of a region value is a member or the search fails.
  FusionDecision epilogueRegion(const Node* current, const Value* in, std::vector<int>* region) {
    constexpr size_t kMaxRegion = 24;
    std::set<const Value*> values{in};
    std::set<const Node*> members;
    // The walk ends at the last use of the region's values so far (a member can only come before it),
    // so a graph of many nodes costs the span of each region, not the rest of the graph.
    int lastUse = 0;
    auto noteUses = [&](const Value* v) {
      for (const Use& u : v->users()) lastUse = std::max(lastUse, index_.at(u.node));
    };
    noteUses(in);
    const int begin = index_.at(in->producer()) + 1;
    for (int i = begin; i <= lastUse && members.size() < kMaxRegion; ++i) {
      const Node* m = nodes_[i];
      const bool reads =
          std::any_of(m->inputs().begin(), m->inputs().end(), [&](const Value* v) { return v && values.count(v); });
      if (!reads) continue;
      if (i < index_.at(current)) return FusionDecision::no("'" + in->name() + "' is also read by an earlier node");
      if (opFusionClass(m->op()) != FusionClass::Elementwise || m->numOutputs() != 1 ||
          m->output(0)->shape() != in->shape())
        return FusionDecision::no("'" + in->name() + "' has other users (" + m->name() +
                                  " is not elementwise at its shape)");
      members.insert(m);
      region->push_back(i);
      bool closed = true;
      for (const Value* v : values) {
        closed = closed && !v->isGraphOutput();
        for (const Use& u : v->users()) closed = closed && members.count(u.node);
      }
      values.insert(m->output(0));
      if (closed) return FusionDecision::yes();
      noteUses(m->output(0));
    }
    return FusionDecision::no("'" + in->name() + "' has other users (not one elementwise region of at most " +
                              std::to_string(kMaxRegion) + " nodes)");
  }

  // Whether n (and, when `in` has several users, the region that consumes them: see epilogueRegion)
  // can join the group of `in`'s producer as its epilogue; `region` gets the node indices to merge.
  FusionDecision canBeEpilogue(const Node* n, const Value* in, std::vector<int>* region) {
    // A reshape keeps each element's flat position: after a contraction that stores by flat
    // position (the cpu's packed GEMM; conv-to-gemm's [N, M, P] -> [N, M, H, W]) it is an epilogue,
    // so the bias and activation after it fuse too.
    const bool reshapeOfContraction = options_.contractions.reshapeInEpilogue && opDef(n->op()).keepsElementOrder &&
                                      in->producer() && isContraction(groupOf(in->producer()));
    if (opFusionClass(n->op()) != FusionClass::Elementwise && !reshapeOfContraction)
      return FusionDecision::no(std::string(opName(n->op())) + " is not elementwise");
    if (n->numOutputs() != 1) return FusionDecision::no("several outputs");
    const Node* p = in->producer();
    if (!p) return FusionDecision::no("input is not computed");
    const int g = groupOf(p);
    if (anchorOf_[g] < 0) return FusionDecision::no("producer group has no anchor");
    if (attention_[g]) return FusionDecision::no("an attention kernel writes its result as it is");
    if (in->isGraphOutput()) return FusionDecision::no("'" + in->name() + "' has other users");
    if (in->shape() != n->output(0)->shape() && !reshapeOfContraction)
      return FusionDecision::no("broadcasts the anchor's result");
    if (liveResults(g) != 1) return FusionDecision::no("anchor group has several results");
    region->clear();
    if (in->users().size() == 1) {
      region->push_back(index_.at(n));
    } else if (FusionDecision d = epilogueRegion(n, in, region); !d.ok) {
      return d;
    }
    if (isContraction(g) && options_.contractions.acceptsEpilogue) {
      std::set<const Value*> computed{in};  // the group's values each member may read
      for (size_t k = 0; k < region->size(); ++k) {
        const Node& m = *nodes_[(*region)[k]];
        const Value* read =
            *std::find_if(m.inputs().begin(), m.inputs().end(), [&](const Value* v) { return v && computed.count(v); });
        FusionDecision d = options_.contractions.acceptsEpilogue(*nodes_[anchorOf_[g]], m, read,
                                                                 epilogueJoined_[g] + static_cast<int>(k));
        if (!d.ok) return d;
        computed.insert(m.output(0));
      }
    }
    return FusionDecision::yes();
  }

  void tryEpilogue(Node* n) {
    // Joined an anchor's group already, as a member of its epilogue region: a group has one anchor.
    if (find(index_.at(n)) != index_.at(n)) return;
    std::vector<int> region;
    for (Value* in : n->inputs()) {
      if (!in || !in->producer()) continue;
      FusionDecision d = canBeEpilogue(n, in, &region);
      if (!d.ok) {
        if (in->producer() && anchorOf_[groupOf(in->producer())] >= 0) reject(n, in, "no epilogue fusion: " + d.reason);
        continue;
      }
      const int g = groupOf(in->producer());
      for (int member : region) {
        ++epilogueJoined_[g];
        merge(g, member);
      }
      return;
    }
  }

  // Rule 5.
  FusionDecision canGoAlongside(const Node* n, const Value* in) {
    if (n->op() != OpKind::Cast || in->dtype() != DType::F32 ||
        (n->output(0)->dtype() != DType::BF16 && n->output(0)->dtype() != DType::F16))
      return FusionDecision::no("not a half-precision copy");
    const Node* p = in->producer();
    if (!p || in->users().size() < 2 || in->shape() != n->output(0)->shape())
      return FusionDecision::no("not alongside");
    if (opFusionClass(p->op()) == FusionClass::Opaque || inPlace_[index_.at(p)])
      return FusionDecision::no("the producer is no loop kernel");
    const int g = groupOf(p);
    if (g == groupOf(n)) return FusionDecision::no("already fused");
    if (attention_[g] || isContraction(g))
      return FusionDecision::no("the producer's kernel writes its result as it is");
    if (liveResults(g) != 1) return FusionDecision::no("producer group has several results");
    for (const Use& u : in->users())
      if (u.node != n && groupOf(u.node) != g && index_.at(u.node) < index_.at(n))
        return FusionDecision::no("'" + u.node->name() + "' reads '" + in->name() + "' before the copy");
    return FusionDecision::yes();
  }

  void tryAlongside(Node* n) {
    if (n->numInputs() != 1 || !n->input(0)) return;
    if (FusionDecision d = canGoAlongside(n, n->input(0)); d.ok) merge(groupOf(n->input(0)->producer()), index_.at(n));
  }

  FusionDecision canInline(const Node* consumer, const Value* in) {
    const Node* p = in->producer();
    if (!p) return FusionDecision::no("not computed");
    if (opFusionClass(p->op()) == FusionClass::Opaque || opFusionClass(consumer->op()) == FusionClass::Opaque)
      return FusionDecision::no("opaque op");
    const int pg = groupOf(p), cg = groupOf(consumer);
    if (pg == cg) return FusionDecision::no("already fused");
    if (inPlace_[index_.at(p)])
      return FusionDecision::no("'" + in->name() + "' is concatenated in place (its inputs' producers write it)");
    if (inPlace_[index_.at(consumer)])
      return FusionDecision::no("concatenated in place: the producer writes its slice of '" +
                                consumer->output(0)->name() + "'");
    if (anchorOf_[pg] >= 0) return FusionDecision::no("the producer's group has its own anchor (one per kernel)");
    if (in->users().size() != 1 || in->isGraphOutput())
      return FusionDecision::no("'" + in->name() + "' has several users (not duplicated)");
    if (liveResults(pg) != 1) return FusionDecision::no("producer group has several results");
    const int anchor = anchorOf_[cg];
    if (p->op() == OpKind::Pad && opDef(consumer->op()).keepsPadInput)
      return FusionDecision::no("the padding stays materialised: the window reads it at affine indices");
    if (isContraction(cg)) {
      // Which input of the anchor `in` is (0: A, 1: B), or -1 when the consumer is another node.
      const int operand = consumer != nodes_[anchor] ? -1 : consumer->input(1) == in ? 1 : 0;
      if (!folds_[pg][operand + 1]) return FusionDecision::no(options_.contractions.noPrologue);
    }
    if (anchor >= 0 && opDef(nodes_[anchor]->op()).rereadsInputs && !onlyDataMovement_[pg])
      return FusionDecision::no("arithmetic would be recomputed per reuse in " + nodes_[anchor]->name());
    if (FusionDecision d = recomputeCost(pg, consumer, in); !d.ok) return d;
    return FusionDecision::yes();
  }

  // The cost model of a prologue: an inlined producer is evaluated wherever the consumer reads it,
  // so a producer broadcast into a larger consumer (an activation of a bias row added to every
  // row) repeats its arithmetic per reuse. Refused when the repeated work exceeds what inlining
  // saves: writing and reading the producer's result once, and one kernel. A broadcast along the
  // innermost axis only is not counted: the value is invariant in the innermost loop, which LLVM
  // hoists it out of. Units: vector-lane operations (OpDef::elementCost), two per byte moved.
  FusionDecision recomputeCost(int pg, const Node* consumer, const Value* in) {
    if (onlyDataMovement_[pg] || opFusionClass(consumer->op()) != FusionClass::Elementwise)
      return FusionDecision::yes();
    const Shape& out = consumer->output(0)->shape();
    const Shape& s = in->shape();
    const std::optional<int64_t> outPoints = out.checkedNumel(), inPoints = s.checkedNumel();
    if (!outPoints || !inPoints || *inPoints == 0 || *outPoints <= *inPoints || out.rank() == 0)
      return FusionDecision::yes();
    double evaluations = static_cast<double>(*outPoints);
    if ((s.rank() == 0 || s[s.rank() - 1] == 1) && out[out.rank() - 1] > 1)
      evaluations /= static_cast<double>(out[out.rank() - 1]);
    const double repeats = evaluations / static_cast<double>(*inPoints);
    if (repeats <= 1) return FusionDecision::yes();
    double perElement = 0;
    for (size_t i = 0; i < nodes_.size(); ++i)
      if (find(static_cast<int>(i)) == pg && opFusionClass(nodes_[i]->op()) == FusionClass::Elementwise)
        perElement += opDef(nodes_[i]->op()).elementCost;
    const double extra = (repeats - 1) * static_cast<double>(*inPoints) * perElement;
    const double saved =
        2.0 * 2.0 * static_cast<double>(*inPoints) * static_cast<double>(dtypeSize(in->dtype())) + kKernelCost;
    if (extra <= saved) return FusionDecision::yes();
    std::ostringstream why;
    why << "recomputed " << static_cast<int64_t>(repeats + 0.5) << "x per element of '" << in->name() << "' ("
        << static_cast<int64_t>(extra) << " more operations than the " << static_cast<int64_t>(saved)
        << " its own kernel costs)";
    return FusionDecision::no(why.str());
  }
  // One kernel's fixed cost (a plan step: dispatch, loop set-up, its thread-pool handoff), about a
  // microsecond, in vector-lane operations.
  static constexpr double kKernelCost = 100000;

  void tryPrologues(Node* n) {
    for (Value* in : n->inputs()) {
      // An input already in n's group (n joined as its epilogue) is fused, not a rejected candidate.
      if (!in || !in->producer() || groupOf(in->producer()) == groupOf(n)) continue;
      FusionDecision d = canInline(n, in);
      if (!d.ok) {
        reject(n, in, "not inlining " + in->name() + ": " + d.reason);
        continue;
      }
      merge(groupOf(n), groupOf(in->producer()));
    }
  }

  // Rule 0: each attention pattern the target computes as one kernel is one group, anchored by its
  // first MatMul (a Reduction-class node anchors itself; merging keeps the root's anchor), so no other
  // group inlines its nodes, before any other rule sees them.
  void groupAttention() {
    for (Node* n : nodes_) {
      std::optional<AttentionPattern> m = matchAttention(*n);
      if (!m || !options_.contractions.acceptsAttention(*m)) continue;
      const std::vector<Node*> members = m->nodes();
      // (Patterns may chain: one's P.V could be the next one's Q.Kt. The first keeps its nodes.)
      if (std::any_of(members.begin(), members.end(), [&](const Node* x) { return attention_[index_.at(x)]; }))
        continue;
      const int root = index_.at(m->scores);
      for (const Node* x : members) {
        attention_[index_.at(x)] = true;
        merge(root, index_.at(x));
      }
    }
  }

  // Rule 4: which Concats run in place. Each input must be a distinct value computed by another
  // node (not a graph input, constant or output, nor another in-place Concat's result, whose bytes
  // are placed already), and its slice must start 64-byte aligned like every buffer of the plan.
  void markConcatsInPlace() {
    std::set<const Value*> placed;  // a value goes inside at most one concatenation
    for (size_t i = 0; i < nodes_.size(); ++i) {
      const Node& n = *nodes_[i];
      if (n.op() != OpKind::Concat || n.output(0)->isGraphOutput()) continue;
      const Shape& out = n.output(0)->shape();
      const std::optional<int> axis = normalizeAxis(n.attrs().getInt("axis"), out.rank());
      if (!axis) continue;
      bool ok = true;
      for (int k = 0; k < *axis; ++k) ok = ok && out[k] == 1;
      std::set<const Value*> inputs;
      uint64_t offset = 0;
      for (const Value* in : n.inputs()) {
        ok = ok && in && in->producer() && !in->isGraphOutput() && !placed.count(in) && inputs.insert(in).second &&
             !inPlace_[index_.at(in->producer())] && offset % 64 == 0;
        if (!ok) break;
        offset += in->byteSize();
      }
      if (!ok) continue;
      inPlace_[i] = true;
      placed.insert(inputs.begin(), inputs.end());
    }
  }

  const FusionOptions& options_;
  std::vector<Node*> nodes_;
  std::map<const Node*, int> index_;
  std::vector<int> parent_;
  std::vector<int> anchorOf_;            // per root: the anchor node index, or -1
  std::vector<bool> contractionAnchor_;  // per node: one of the target's contraction anchors
  std::vector<int> epilogueJoined_;      // per root: how many nodes joined it as epilogue
  std::vector<bool> onlyDataMovement_;   // per root: the group is injective ops only
  std::vector<bool> inPlace_;            // per node: a Concat its inputs' producers write (rule 4)
  std::vector<bool> attention_;          // per node (so per root): in an attention group (rule 0)
  // Per root: every node of the group folds into a contraction's operand -1, 0, 1 (index + 1).
  std::vector<std::array<bool, 3>> folds_;
};

}  // namespace

std::vector<KernelGroup> partitionIntoKernels(const Graph& graph, const FusionOptions& options) {
  return Partitioner(graph, options).run();
}

std::vector<FusionCut> fusionCuts(const std::vector<KernelGroup>& groups, const std::vector<FusionRefusal>& refusals,
                                  bool fusionEnabled) {
  std::map<const Node*, size_t> groupOf;
  for (size_t g = 0; g < groups.size(); ++g)
    for (const Node* n : groups[g].nodes) groupOf[n] = g;
  std::map<std::pair<const Node*, const Value*>, std::vector<std::string>> reasons;
  for (const FusionRefusal& r : refusals) {
    std::vector<std::string>& list = reasons[{r.consumer, r.value}];
    if (std::find(list.begin(), list.end(), r.reason) == list.end()) list.push_back(r.reason);
  }
  std::vector<FusionCut> cuts;
  for (size_t g = 0; g < groups.size(); ++g) {
    for (const Node* n : groups[g].nodes) {
      std::set<const Value*> seen;  // x * x reads one value twice: one cut
      for (const Value* in : n->inputs()) {
        if (!in || !in->producer() || !seen.insert(in).second) continue;
        const size_t from = groupOf.at(in->producer());
        if (from == g) continue;
        FusionCut cut{in, from, g, n, ""};
        auto it = reasons.find({n, in});
        if (!fusionEnabled) {
          cut.reason = "fusion is off (-O0: one kernel per node)";
        } else if (it != reasons.end()) {
          for (const std::string& r : it->second) cut.reason += (cut.reason.empty() ? "" : "; ") + r;
        } else if (opFusionClass(in->producer()->op()) == FusionClass::Opaque ||
                   opFusionClass(n->op()) == FusionClass::Opaque) {
          cut.reason = "opaque op (a host builtin, alone in its step)";
        } else {
          cut.reason = "the policy recorded no fusion candidate for this edge";
        }
        cuts.push_back(std::move(cut));
      }
    }
  }
  return cuts;
}

std::string printFusedGraph(const Graph& graph, const std::vector<KernelGroup>& groups) {
  std::ostringstream os;
  const auto inPlace =
      std::count_if(groups.begin(), groups.end(), [](const KernelGroup& g) { return g.kind == GroupKind::InPlace; });
  os << "// " << groups.size() - static_cast<size_t>(inPlace) << " kernels for " << graph.numNodes() << " nodes\n";
  for (size_t i = 0; i < groups.size(); ++i) {
    const KernelGroup& g = groups[i];
    os << (g.kind == GroupKind::InPlace ? "in place " : "kernel ") << i << " (";
    for (size_t j = 0; j < g.nodes.size(); ++j) os << (j ? ", " : "") << opName(g.nodes[j]->op());
    os << ")\n";
    for (const Node* n : g.nodes) os << "  " << printNode(*n) << "\n";
  }
  return os.str();
}

std::string fusedGraphToDot(const Graph& graph, const std::vector<KernelGroup>& groups) {
  std::ostringstream os;
  std::map<const Value*, std::string> valueIds;
  auto id = [&](const Value* v) {
    auto it = valueIds.find(v);
    if (it != valueIds.end()) return it->second;
    return valueIds[v] = "v" + std::to_string(valueIds.size());
  };
  os << "digraph nnc {\n  rankdir=TB;\n  node [fontname=\"monospace\", fontsize=10];\n";
  for (const Value* v : graph.inputs()) os << "  " << id(v) << " [shape=oval, label=\"" << v->name() << "\"];\n";
  for (size_t i = 0; i < groups.size(); ++i) {
    const KernelGroup& g = groups[i];
    const bool cluster = g.nodes.size() > 1;
    if (cluster) os << "  subgraph cluster_" << i << " {\n    label=\"kernel " << i << "\"; style=rounded;\n";
    for (const Node* n : g.nodes) {
      os << "    n" << n << " [shape=box, label=\"" << n->name() << "\\n" << opName(n->op()) << "\"];\n";
    }
    if (cluster) os << "  }\n";
  }
  for (size_t i = 0; i < groups.size(); ++i) {
    for (const Node* n : groups[i].nodes) {
      for (const Value* in : n->inputs()) {
        if (!in) continue;
        if (in->producer()) {
          os << "  n" << in->producer() << " -> n" << n << ";\n";
        } else if (!in->isConstant()) {
          os << "  " << id(in) << " -> n" << n << ";\n";
        }
      }
    }
  }
  for (const Value* v : graph.outputs()) {
    os << "  out_" << id(v) << " [shape=oval, label=\"" << v->name() << "\"];\n";
    if (v->producer()) os << "  n" << v->producer() << " -> out_" << id(v) << ";\n";
  }
  os << "}\n";
  return os.str();
}

}  // namespace nnc::passes
