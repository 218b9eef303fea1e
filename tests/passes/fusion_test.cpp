// The fusion policy on parsed graphs: which nodes end up in which kernel group, and why not.
#include "passes/fusion.h"

#include <gtest/gtest.h>

#include <map>
#include <set>
#include <sstream>

#include "ir/op_registry.h"
#include "ir/parser.h"
#include "tests/passes/fusion_graphs.h"

namespace nnc::passes {
namespace {

using namespace nnc::testing;

std::unique_ptr<Graph> parse(std::string_view text) {
  Expected<std::unique_ptr<Graph>> g = parseGraph(text);
  EXPECT_TRUE(g.isOk()) << g.status().message();
  return g ? std::move(g.value()) : std::make_unique<Graph>();
}

// The groups as node names: "a b | c" (groups in execution order, nodes in group order). Also checks
// the partition's invariants: every node in exactly one group, each group topologically ordered,
// and each group's inputs produced by earlier groups.
std::string partition(const Graph& g, const FusionOptions& options = {}) {
  std::vector<KernelGroup> groups = partitionIntoKernels(g, options);
  std::ostringstream os;
  std::set<const Node*> seen;
  std::set<const Value*> available;
  for (const Value* v : g.inputs()) available.insert(v);
  for (const Value* v : g.values())
    if (v->isConstant()) available.insert(v);
  for (size_t i = 0; i < groups.size(); ++i) {
    os << (i ? " | " : "");
    for (const Value* v : groups[i].inputs)
      EXPECT_TRUE(available.count(v)) << "group " << i << " reads '" << v->name() << "' before it is computed";
    for (size_t j = 0; j < groups[i].nodes.size(); ++j) {
      const Node* n = groups[i].nodes[j];
      EXPECT_TRUE(seen.insert(n).second) << n->name() << " is in two groups";
      os << (j ? " " : "") << n->name();
    }
    for (const Value* v : groups[i].outputs) available.insert(v);
  }
  EXPECT_EQ(seen.size(), g.numNodes());
  return os.str();
}

std::string partition(std::string_view text, const FusionOptions& options = {}) {
  auto g = parse(text);
  return partition(*g, options);
}

TEST(Fusion, PointwiseChainIsOneGroup) {
  auto g = parse(kPointwiseChain);
  std::vector<KernelGroup> groups = partitionIntoKernels(*g, {});
  ASSERT_EQ(groups.size(), 1u);
  EXPECT_EQ(partition(*g), "a e n y");
  // Boundaries: reads x and b, writes only y.
  ASSERT_EQ(groups[0].inputs.size(), 2u);
  EXPECT_EQ(groups[0].inputs[0]->name(), "x");
  EXPECT_EQ(groups[0].inputs[1]->name(), "b");
  ASSERT_EQ(groups[0].outputs.size(), 1u);
  EXPECT_EQ(groups[0].outputs[0]->name(), "y");
}

TEST(Fusion, DisabledGivesOneGroupPerNode) {
  FusionOptions off;
  off.enabled = false;
  EXPECT_EQ(partition(kPointwiseChain, off), "a | e | n | y");
}

TEST(Fusion, MatMulBiasReluIsOneGroupWithEpilogue) { EXPECT_EQ(partition(kMatMulBiasRelu), "m a y"); }

TEST(Fusion, EpilogueThatBroadcastsTheAnchorIsRejected) {
  // Add(m, z) has shape 4x8x... larger than m: the anchor's result would be read at another index.
  std::ostringstream log;
  FusionOptions o;
  o.debugLog = &log;
  EXPECT_EQ(partition(kBroadcastAfterMatMul, o), "m | y");
  EXPECT_NE(log.str().find("fusion: y: no epilogue fusion: broadcasts the anchor's result"), std::string::npos)
      << log.str();
}

TEST(Fusion, ProducerWithTwoUsersIsMaterialised) {
  std::ostringstream log;
  FusionOptions o;
  o.debugLog = &log;
  EXPECT_EQ(partition(kSharedProducer, o), "e | r y");
  EXPECT_NE(log.str().find("fusion: r: not inlining e: 'e' has several users (not duplicated)"), std::string::npos)
      << log.str();
}

// fusionCuts: every value that crosses groups, once per (consumer, value), with the policy's reasons.
TEST(Fusion, CutsListEveryCrossingValueWithWhy) {
  auto g = parse(kSharedProducer);  // e | r y: e is read by r and by y
  std::vector<FusionRefusal> refusals;
  FusionOptions o;
  o.refusals = &refusals;
  std::vector<KernelGroup> groups = partitionIntoKernels(*g, o);
  ASSERT_EQ(groups.size(), 2u);
  std::vector<FusionCut> cuts = fusionCuts(groups, refusals, true);
  ASSERT_EQ(cuts.size(), 2u);
  for (const FusionCut& c : cuts) {
    EXPECT_EQ(c.value->name(), "e");
    EXPECT_EQ(c.fromGroup, 0u);
    EXPECT_EQ(c.toGroup, 1u);
    EXPECT_EQ(c.reason, "not inlining e: 'e' has several users (not duplicated)") << c.consumer->name();
  }
  EXPECT_EQ(cuts[0].consumer->name(), "r");
  EXPECT_EQ(cuts[1].consumer->name(), "y");

  // An epilogue and a prologue refusal of one edge are both given; no cut inside a group.
  auto b = parse(kBroadcastAfterMatMul);
  refusals.clear();
  groups = partitionIntoKernels(*b, o);
  cuts = fusionCuts(groups, refusals, true);
  ASSERT_EQ(cuts.size(), 1u);
  EXPECT_EQ(cuts[0].reason,
            "no epilogue fusion: broadcasts the anchor's result; not inlining m: the producer's group has its own "
            "anchor (one per kernel)");

  // -O0: every edge is a cut, for one reason.
  FusionOptions off;
  off.enabled = false;
  groups = partitionIntoKernels(*g, off);
  cuts = fusionCuts(groups, {}, false);
  ASSERT_EQ(cuts.size(), 3u);  // e -> r, r -> y, e -> y
  for (const FusionCut& c : cuts) EXPECT_EQ(c.reason, "fusion is off (-O0: one kernel per node)");

  // A fully fused graph has none.
  auto chain = parse(kPointwiseChain);
  groups = partitionIntoKernels(*chain, o);
  EXPECT_TRUE(fusionCuts(groups, refusals, true).empty());
}

// The cost model of a prologue: a transcendental on a row broadcast over 4096 rows would run 4096
// times per element inlined (once per row) — refused with the numbers, a kernel of its own instead.
// The same producer read once per element, broadcast only along the innermost axis (hoisted out of
// the row loop), or cheap and over a small consumer is inlined as before.
TEST(Fusion, ABroadcastProducerIsNotInlinedWhenRecomputingCostsMore) {
  auto graph = [](const std::string& x, const std::string& op, const std::string& y) {
    return "graph(%x: f32[" + x + "], %y: f32[" + y + "]) -> (%z: f32[" + y + "]) {\n  %e = " + op + "(%x) : f32[" + x +
           "]\n  %z = Add(%e, %y) : f32[" + y + "]\n}\n";
  };
  std::vector<FusionRefusal> refusals;
  FusionOptions o;
  o.refusals = &refusals;
  auto refused = parse(graph("1x768", "Erf", "4096x768"));
  std::vector<KernelGroup> groups = partitionIntoKernels(*refused, o);
  ASSERT_EQ(groups.size(), 2u);
  std::vector<FusionCut> cuts = fusionCuts(groups, refusals, true);
  ASSERT_EQ(cuts.size(), 1u);
  EXPECT_EQ(cuts[0].reason,
            "not inlining e: recomputed 4096x per element of 'e' (62899200 more operations than the 112288 its own "
            "kernel costs)");
  EXPECT_EQ(partition(graph("4096x768", "Erf", "4096x768")), "e z") << "read once per element";
  EXPECT_EQ(partition(graph("4096x1", "Erf", "4096x768")), "e z") << "broadcast along the innermost axis only";
  EXPECT_EQ(partition(graph("1x64", "Neg", "8x64")), "e z") << "cheap, and a small consumer";
  EXPECT_EQ(partition(graph("1x768", "Neg", "4096x768")), "e | z") << "cheap, but over 4096 rows";
}

TEST(Fusion, ArithmeticIsNotInlinedIntoAConv) {
  std::ostringstream log;
  FusionOptions o;
  o.debugLog = &log;
  EXPECT_EQ(partition(kExpIntoConv, o), "e | y");
  EXPECT_NE(log.str().find("fusion: y: not inlining e: arithmetic would be recomputed per reuse in y"),
            std::string::npos)
      << log.str();
}

TEST(Fusion, DataMovementIsInlinedIntoAMatMul) { EXPECT_EQ(partition(kTransposeIntoMatMul), "t y"); }

// --- a target's contraction hooks (targets/target.h: the cpu's packed GEMM, cuda's cuBLASLt calls;
// tests/driver/target_test.cpp checks those) ---------------------------------------------------

// Hooks as a test target declares them: f32 MatMuls anchor library calls that take strided views
// into their B only, and at most one epilogue node.
FusionOptions testHooks(std::ostream* log = nullptr) {
  FusionOptions o;
  o.contractions.kind = GroupKind::LibraryCall;
  o.contractions.isAnchor = [](const Node& n) {
    return n.op() == OpKind::MatMul && n.output(0)->dtype() == DType::F32;
  };
  o.contractions.foldsIntoOperand = [](const Node& p, int operand) {
    return operand == 1 && opDef(p.op()).stridedView;
  };
  o.contractions.noPrologue = "test: no prologue";
  o.contractions.acceptsEpilogue = [](const Node&, const Node&, const Value*, int joined) {
    return joined == 0 ? FusionDecision::yes() : FusionDecision::no("test: one epilogue node");
  };
  o.debugLog = log;
  return o;
}

TEST(Fusion, ContractionHooksDecideTheGroupAndItsKind) {
  std::ostringstream log;
  auto g = parse(kMatMulBiasRelu);
  std::vector<KernelGroup> groups = partitionIntoKernels(*g, testHooks(&log));
  ASSERT_EQ(groups.size(), 2u);
  EXPECT_EQ(partition(*g, testHooks()), "m a | y");
  EXPECT_EQ(groups[0].kind, GroupKind::LibraryCall);
  EXPECT_EQ(groups[1].kind, GroupKind::LoopKernel);
  EXPECT_NE(log.str().find("fusion: y: no epilogue fusion: test: one epilogue node"), std::string::npos) << log.str();
  // The transpose feeds the MatMul's A: it does not fold.
  log.str("");
  EXPECT_EQ(partition(kTransposeIntoMatMul, testHooks(&log)), "t | y");
  EXPECT_NE(log.str().find("fusion: y: not inlining t: test: no prologue"), std::string::npos) << log.str();
  // Without eager fusion the anchor is still the target's.
  FusionOptions eager = testHooks();
  eager.enabled = false;
  groups = partitionIntoKernels(*g, eager);
  ASSERT_EQ(groups.size(), 3u);
  EXPECT_EQ(groups[0].kind, GroupKind::LibraryCall);
}

TEST(Fusion, SoftmaxTakesAPointwisePrologue) { EXPECT_EQ(partition(kSoftmaxPrologue), "m t y"); }

TEST(Fusion, OpaqueTopKIsAlone) {
  std::ostringstream log;
  FusionOptions o;
  o.debugLog = &log;
  EXPECT_EQ(partition(kTopK, o), "e | topk");
  EXPECT_NE(log.str().find("fusion: topk: not inlining e: opaque op"), std::string::npos) << log.str();
}

TEST(Fusion, OpaqueResultIsNotInlinedIntoConsumers) {
  EXPECT_EQ(partition("graph(%x: f32[3x10]) -> (%y: f32[3x4]) {\n"
                      "  %v, %i = TopK(%x) {k=4} : f32[3x4], i64[3x4] @topk\n"
                      "  %y = Neg(%v) : f32[3x4]\n"
                      "}\n"),
            "topk | y");
}

TEST(Fusion, TwoAnchorsStayApart) {
  // A reduction's result feeding a MatMul: the second anchor cannot join the first's group.
  EXPECT_EQ(partition("graph(%x: f32[4x8], %w: f32[8x3]) -> (%y: f32[4x3]) {\n"
                      "  %s = Softmax(%x) : f32[4x8]\n"
                      "  %y = MatMul(%s, %w) : f32[4x3]\n"
                      "}\n"),
            "s | y");
}

TEST(Fusion, AnchorGroupWithTwoResultsTakesNoEpilogue) {
  // m is used by Relu and is a graph output: Relu must not become an epilogue (m is read twice).
  std::ostringstream log;
  FusionOptions o;
  o.debugLog = &log;
  EXPECT_EQ(partition(kMatMulTwoResults, o), "m | y");
  EXPECT_NE(log.str().find("fusion: y: no epilogue fusion: 'm' has other users"), std::string::npos) << log.str();
}

TEST(Fusion, AnEpilogueRegionConsumingEveryUseJoinsTheAnchor) {
  // GELU's x has three users; together they end in one value, so all of them are the epilogue.
  EXPECT_EQ(partition(kMatMulGelu), "m a c ck i is t p q y");
  EXPECT_EQ(partition(kMatMulSilu), "m s y");
  // With the sigmoid also a graph output the region has two results: no epilogue, and why.
  std::ostringstream log;
  FusionOptions o;
  o.debugLog = &log;
  EXPECT_EQ(partition(kMatMulSiluTwoResults, o), "m | s | y");
  EXPECT_NE(log.str().find("fusion: s: no epilogue fusion: 'm' has other users (not one elementwise region"),
            std::string::npos)
      << log.str();
  // A user that is not elementwise at m's shape stops the region.
  EXPECT_EQ(partition("graph(%x: f32[4x16], %w: f32[16x8]) -> (%y: f32[4x8], %t: f32[8x4]) {\n"
                      "  %m = MatMul(%x, %w) : f32[4x8]\n"
                      "  %y = Relu(%m) : f32[4x8]\n"
                      "  %t = Transpose(%m) : f32[8x4]\n"
                      "}\n",
                      o),
            "m | y | t");
  EXPECT_NE(log.str().find("'m' has other users (t is not elementwise at its shape)"), std::string::npos) << log.str();
  // A member that also reads another anchor's result (the softmax) joined m's group with the region;
  // visited later, it must not take the softmax's group along as well (two anchors in one kernel:
  // found by the differential tests, seed 386).
  EXPECT_EQ(partition("graph(%x: f32[4x8], %a: f32[4x16], %w: f32[16x8]) -> (%z: f32[4x8]) {\n"
                      "  %s = Softmax(%x) : f32[4x8]\n"
                      "  %m = MatMul(%a, %w) : f32[4x8]\n"
                      "  %r = Relu(%m) : f32[4x8]\n"
                      "  %y = Mul(%s, %m) : f32[4x8]\n"
                      "  %z = Add(%r, %y) : f32[4x8]\n"
                      "}\n"),
            "s | m r y z");
}

TEST(Fusion, DiamondOfPointwiseOpsIsOneGroupPerSharedValue) {
  // x -> a -> (b, c) -> d: a has two users so it is materialised; b and c both inline into d.
  EXPECT_EQ(partition(kDiamond), "a | b c d");
}

TEST(Fusion, FullyFusedGraphsLogNoRejections) {
  // The refusal log lists candidates that were rejected; one that fused is not one of them.
  for (const char* text : {kPointwiseChain, kMatMulBiasRelu, kSoftmaxPrologue, kTransposeIntoMatMul}) {
    std::ostringstream log;
    FusionOptions o;
    o.debugLog = &log;
    partition(text, o);
    EXPECT_EQ(log.str(), "") << text;
  }
}

TEST(Fusion, GroupCountsOfTheSharedCases) {
  for (const FusionCase& c : kFusionCases) {
    auto g = parse(c.text);
    EXPECT_EQ(static_cast<int>(partitionIntoKernels(*g, {}).size()), c.groupsFused) << c.name;
    FusionOptions off;
    off.enabled = false;
    EXPECT_EQ(partitionIntoKernels(*g, off).size(), g->numNodes()) << c.name;
  }
}

// Rule 4: a Concat of computed slices runs in place, alone and kernel-less; the consumer reads the
// concatenation from memory and the producers write their slices. Where the slices are not
// contiguous (a batch of 2 before the axis), or one is a graph input, it is an ordinary inlined copy.
TEST(Fusion, AConcatOfComputedContiguousSlicesRunsInPlace) {
  auto g = parse(kConcatInPlace);
  std::vector<FusionRefusal> refusals;
  FusionOptions o;
  o.refusals = &refusals;
  std::vector<KernelGroup> groups = partitionIntoKernels(*g, o);
  EXPECT_EQ(partition(*g), "a | b | c | y | z");
  ASSERT_EQ(groups.size(), 5u);
  EXPECT_EQ(groups[2].kind, GroupKind::InPlace);
  for (size_t i : {0, 1, 3, 4}) EXPECT_EQ(groups[i].kind, GroupKind::LoopKernel) << i;
  std::vector<FusionCut> cuts = fusionCuts(groups, refusals, true);
  std::map<std::string, std::string> why;
  for (const FusionCut& c : cuts) why[c.value->name() + " -> " + c.consumer->name()] = c.reason;
  EXPECT_EQ(why["b -> c"], "not inlining b: concatenated in place: the producer writes its slice of 'c'");
  EXPECT_EQ(why["c -> y"], "not inlining c: 'c' is concatenated in place (its inputs' producers write it)");

  FusionOptions off;
  off.enabled = false;
  for (const KernelGroup& group : partitionIntoKernels(*g, off)) EXPECT_NE(group.kind, GroupKind::InPlace);

  const char* batched =
      "graph(%x: f32[2x16x4]) -> (%y: f32[2x32x4]) {\n"
      "  %a = Relu(%x) : f32[2x16x4]\n"
      "  %b = Exp(%x) : f32[2x16x4]\n"
      "  %c = Concat(%a, %b) {axis=1} : f32[2x32x4]\n"
      "  %y = Neg(%c) : f32[2x32x4]\n"
      "}\n";
  EXPECT_EQ(partition(batched), "a b c y");
  const char* fromInput =
      "graph(%x: f32[1x16x4]) -> (%y: f32[1x32x4]) {\n"
      "  %b = Exp(%x) : f32[1x16x4]\n"
      "  %c = Concat(%x, %b) {axis=1} : f32[1x32x4]\n"
      "  %y = Neg(%c) : f32[1x32x4]\n"
      "}\n";
  EXPECT_EQ(partition(fromInput), "b c y");
  const char* unaligned =  // the second slice would start 4 floats in
      "graph(%x: f32[1x1x4]) -> (%y: f32[1x2x4]) {\n"
      "  %a = Relu(%x) : f32[1x1x4]\n"
      "  %b = Exp(%x) : f32[1x1x4]\n"
      "  %c = Concat(%a, %b) {axis=1} : f32[1x2x4]\n"
      "  %y = Neg(%c) : f32[1x2x4]\n"
      "}\n";
  EXPECT_EQ(partition(unaligned), "a b c y");
}

TEST(Fusion, PrintFusedGraphListsKernels) {
  auto g = parse(kMatMulBiasRelu);
  std::string text = printFusedGraph(*g, partitionIntoKernels(*g, {}));
  EXPECT_EQ(text.substr(0, text.find('\n')), "// 1 kernels for 3 nodes");
  EXPECT_NE(text.find("kernel 0 (MatMul, Add, Relu)\n"), std::string::npos) << text;
}

}  // namespace
}  // namespace nnc::passes
