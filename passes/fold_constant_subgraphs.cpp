// Folding what the reference evaluator declines. fold-constants leaves a node with constant inputs to
// run at inference time when it would take the interpreter too long (ir/reference.h: kMaxFoldWork):
// DeBERTa projects its constant relative-position embeddings through each layer's key and query
// weights, 24 GEMMs of 512 x 768 x 768 that every inference repeats. ONNX Runtime and OpenVINO fold
// them; so does this pass, by compiling the constant cone as a model of its own for the host (through
// the evaluator the driver provides) and running it once.
//
// The cone is every node whose inputs are constants or results of the cone. Its results read from
// outside it become constants, unless one would be larger than the inputs of the node that computes
// it (a Tile, an Expand, a broadcast: folding would grow the weights) or than kMaxFoldedElements:
// that node then leaves the cone, and the cone's results are taken before it. A model file is untrusted:
// the cone is also bounded in work and in the memory its values take (kMaxConeWork, kMaxConeBytes), and
// nodes past either bound run at inference time as they did before.
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "ir/reference.h"
#include "ir/subgraph.h"
#include "passes/pass.h"

namespace nnc::passes {

namespace {

// One compile-time evaluation's bounds: loop points (a contraction's multiply-adds), a few seconds of
// compiled code on one core at most (DeBERTa-v2-large's 48 projections are 2^34.6), and the bytes of
// the values it computes.
constexpr int64_t kMaxConeWork = int64_t{1} << 35;
constexpr int64_t kMaxConeBytes = int64_t{1} << 31;

// Whether the result `out` of `n` may become a constant: no larger than what `n` reads.
bool smallEnoughToKeep(const Node* n, const Value* out) {
  if (out->shape().numel() > kMaxFoldedElements) return false;
  int64_t inputBytes = 0;
  for (const Value* v : n->inputs())
    if (v) inputBytes += static_cast<int64_t>(v->byteSize());
  return static_cast<int64_t>(out->byteSize()) <= inputBytes;
}

struct ConstantCone {
  std::vector<const Node*> nodes;     // topological order
  std::vector<const Value*> results;  // the values read from outside the cone (or graph outputs)
};

// The cone (in order, within the bounds), without `excluded`. Sets *tooLarge to a node whose result may
// not become a constant, if there is one (the caller excludes it and asks again). `work` caches loopPoints.
ConstantCone findCone(const std::vector<Node*>& order, const std::unordered_set<const Node*>& excluded,
                      std::unordered_map<const Node*, int64_t>& work, const Node** tooLarge) {
  ConstantCone cone;
  std::unordered_set<const Node*> inCone;
  int64_t coneWork = 0, coneBytes = 0;
  for (const Node* n : order) {
    if (excluded.count(n) || n->numInputs() == 0) continue;
    bool constantInputs = true;
    for (const Value* v : n->inputs())
      constantInputs &= !v || v->isConstant() || (v->producer() && inCone.count(v->producer()));
    if (!constantInputs) continue;
    if (!work.count(n)) {
      Expected<int64_t> points = loopPoints(*n);
      work[n] = points ? *points : INT64_MAX;  // (what cannot be lowered alone is not folded)
    }
    int64_t bytes = 0;
    for (const Value* out : n->outputs()) bytes += static_cast<int64_t>(out->byteSize());
    if (work[n] > kMaxConeWork - coneWork || bytes > kMaxConeBytes - coneBytes) continue;
    coneWork += work[n];
    coneBytes += bytes;
    inCone.insert(n);
    cone.nodes.push_back(n);
  }
  *tooLarge = nullptr;
  for (const Node* n : cone.nodes) {
    for (const Value* out : n->outputs()) {
      bool readOutside = out->isGraphOutput();
      for (const Use& use : out->users()) readOutside |= !inCone.count(use.node);
      if (!readOutside) continue;
      if (!smallEnoughToKeep(n, out)) {
        *tooLarge = n;
        return cone;
      }
      cone.results.push_back(out);
    }
  }
  return cone;
}

}  // namespace

Expected<bool> foldConstantSubgraphs(Graph& graph, const ConstantEvaluator& evaluate) {
  const std::vector<Node*> order = graph.nodes();
  std::unordered_set<const Node*> excluded;
  std::unordered_map<const Node*, int64_t> work;
  ConstantCone cone;
  for (;;) {
    const Node* tooLarge = nullptr;
    cone = findCone(order, excluded, work, &tooLarge);
    if (!tooLarge) break;
    excluded.insert(tooLarge);
  }
  if (cone.results.empty()) return false;
  std::vector<const Value*> inputs;
  std::unique_ptr<Graph> sub = extractSubgraph(cone.nodes, cone.results, &inputs);
  NNC_CHECK(inputs.empty(), "a constant cone read a value that is not constant");
  Expected<std::vector<Tensor>> values = evaluate(*sub);
  // What the host cannot compute now (an index a Gather checks, an op the host target lacks) runs, and
  // reports itself, at inference time.
  if (!values) return false;
  NNC_CHECK(values->size() == cone.results.size(), "the constant evaluator returned the wrong number of results");
  for (size_t i = 0; i < cone.results.size(); ++i) {
    Value* result = const_cast<Value*>(cone.results[i]);
    const Tensor& t = (*values)[i];
    NNC_CHECK(t.dtype() == result->dtype() && t.shape() == result->shape(),
              "the constant evaluator's result for '" + result->name() + "' has another type");
    graph.replaceAllUsesWith(result, graph.addConstant(graph.uniqueName(result->name()), t));
  }
  for (auto it = cone.nodes.rbegin(); it != cone.nodes.rend(); ++it) graph.eraseNode(const_cast<Node*>(*it));
  graph.removeDeadValues();
  return true;
}

}  // namespace nnc::passes
