#include "ir/subgraph.h"

#include <map>

namespace nnc {

std::unique_ptr<Graph> extractSubgraph(const std::vector<const Node*>& nodes, const std::vector<const Value*>& outputs,
                                       std::vector<const Value*>* inputs) {
  auto sub = std::make_unique<Graph>();
  std::map<const Value*, Value*> map;
  auto mapped = [&](const Value* v) -> Value* {
    if (!v) return nullptr;
    auto it = map.find(v);
    if (it != map.end()) return it->second;
    if (v->isConstant()) return map[v] = sub->addConstant(v->name(), v->constant());
    inputs->push_back(v);
    return map[v] = sub->addInput(v->name(), v->dtype(), v->shape());
  };
  for (const Node* n : nodes) {
    std::vector<Value*> in;
    for (const Value* v : n->inputs()) in.push_back(mapped(v));
    Node* copy = sub->addNode(n->op(), n->name(), in, n->numOutputs(), n->attrs());
    for (int i = 0; i < n->numOutputs(); ++i) {
      copy->output(i)->setType(n->output(i)->dtype(), n->output(i)->shape());
      copy->output(i)->setName(n->output(i)->name());
      map[n->output(i)] = copy->output(i);
    }
  }
  for (const Value* v : outputs) sub->addOutput(map.at(v));
  return sub;
}

}  // namespace nnc
