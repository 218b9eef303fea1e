// Dead code elimination: walks nodes in reverse order and erases any node none of whose outputs has
// a user or is a graph output; erasing one can make its producers dead, which the reverse walk sees.
#include "passes/pass.h"

namespace nnc::passes {

Expected<bool> eliminateDeadCode(Graph& graph) {
  bool changed = false;
  std::vector<Node*> nodes = graph.nodes();
  for (auto it = nodes.rbegin(); it != nodes.rend(); ++it) {
    Node* n = *it;
    bool live = false;
    for (Value* v : n->outputs()) live |= !v->users().empty() || v->isGraphOutput();
    if (live) continue;
    graph.eraseNode(n);
    changed = true;
  }
  if (changed) graph.removeDeadValues();
  return changed;
}

}  // namespace nnc::passes
