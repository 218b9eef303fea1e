// Output materialisation: the runtime writes each graph output buffer exactly once, from a kernel.
// An output that is a graph input, a constant, or the same value as an earlier output gets its own
// Identity copy.
#include <set>

#include "ir/builder.h"
#include "passes/pass.h"

namespace nnc::passes {

Expected<bool> materializeOutputs(Graph& graph) {
  bool changed = false;
  std::set<const Value*> seen;
  for (size_t i = 0; i < graph.outputs().size(); ++i) {
    Value* v = graph.outputs()[i];
    const bool needsCopy = v->isGraphInput() || v->isConstant() || !seen.insert(v).second;
    if (!needsCopy) continue;
    Node* copy = graph.addNode(OpKind::Identity, graph.uniqueName("output_copy"), {v}, 1);
    NNC_RETURN_IF_ERROR(inferNode(*copy));
    graph.setOutput(static_cast<int>(i), copy->output(0));
    changed = true;
  }
  return changed;
}

}  // namespace nnc::passes
