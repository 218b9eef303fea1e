// Graph storage and the rewrite helpers passes use (uses, erasure, topological order, names).
#include "ir/graph.h"

#include <algorithm>
#include <unordered_map>
#include <unordered_set>

namespace nnc {

void GraphDeleter::operator()(Graph* graph) const { delete graph; }

bool Value::isGraphOutput() const {
  if (!graph_) return false;
  const auto& outs = graph_->outputs();
  return std::find(outs.begin(), outs.end(), this) != outs.end();
}

void Value::setName(std::string name) {
  name_ = std::move(name);
  if (graph_) graph_->usedNames_.emplace(name_, 0);
}

std::string Node::diagPrefix() const { return "node '" + name_ + "' (" + std::string(opName(op_)) + "): "; }

Value* Graph::newValue(const std::string& name) {
  auto v = std::make_unique<Value>();
  v->name_ = name;
  v->graph_ = this;
  usedNames_.emplace(name, 0);
  values_.push_back(std::move(v));
  return values_.back().get();
}

Value* Graph::addInput(const std::string& name, DType dtype, Shape shape) {
  Value* v = newValue(name);
  v->setType(dtype, std::move(shape));
  v->isGraphInput_ = true;
  inputs_.push_back(v);
  return v;
}

Value* Graph::addConstant(const std::string& name, Tensor value) {
  NNC_CHECK(!value.isNull(), "Graph::addConstant with a null tensor");
  Value* v = newValue(name);
  v->setType(value.dtype(), value.shape());
  v->constant_ = std::move(value);
  return v;
}

Node* Graph::createNode(std::list<std::unique_ptr<Node>>::iterator pos, OpKind op, const std::string& name,
                        std::vector<Value*> inputs, int numOutputs, Attributes attrs) {
  NNC_CHECK(numOutputs >= 0, "Graph::addNode with a negative output count");
  auto owned = std::make_unique<Node>();
  Node* node = owned.get();
  node->op_ = op;
  node->name_ = name;
  node->attrs_ = std::move(attrs);
  node->inputs_ = std::move(inputs);
  usedNames_.emplace(name, 0);
  for (int i = 0; i < node->numInputs(); ++i) {
    Value* in = node->inputs_[i];
    if (!in) continue;
    NNC_CHECK(in->graph_ == this, "node '" + name + "' reads a value of another graph");
    in->users_.push_back({node, i});
  }
  for (int i = 0; i < numOutputs; ++i) {
    Value* out = newValue(uniqueName(name + "_out" + std::to_string(i)));
    out->producer_ = node;
    out->producerOutput_ = i;
    node->outputs_.push_back(out);
  }
  node->pos_ = nodes_.insert(pos, std::move(owned));
  return node;
}

Node* Graph::addNode(OpKind op, const std::string& name, std::vector<Value*> inputs, int numOutputs, Attributes attrs) {
  return createNode(nodes_.end(), op, name, std::move(inputs), numOutputs, std::move(attrs));
}

Node* Graph::insertNodeBefore(Node* before, OpKind op, const std::string& name, std::vector<Value*> inputs,
                              int numOutputs, Attributes attrs) {
  NNC_CHECK(before != nullptr, "insertNodeBefore(nullptr)");
  return createNode(before->pos_, op, name, std::move(inputs), numOutputs, std::move(attrs));
}

void Graph::addOutput(Value* v) {
  NNC_CHECK(v != nullptr && v->graph_ == this, "Graph::addOutput: value not in this graph");
  outputs_.push_back(v);
}

void Graph::setOutput(int i, Value* v) {
  NNC_CHECK(i >= 0 && i < static_cast<int>(outputs_.size()), "Graph::setOutput index out of range");
  NNC_CHECK(v != nullptr && v->graph_ == this, "Graph::setOutput: value not in this graph");
  outputs_[i] = v;
}

std::vector<Node*> Graph::nodes() const {
  std::vector<Node*> out;
  out.reserve(nodes_.size());
  for (const auto& n : nodes_) out.push_back(n.get());
  return out;
}

std::vector<Value*> Graph::values() const {
  std::vector<Value*> out;
  out.reserve(values_.size());
  for (const auto& v : values_) out.push_back(v.get());
  return out;
}

void Graph::setNodeInput(Node* node, int index, Value* v) {
  NNC_CHECK(node != nullptr && index >= 0, "Graph::setNodeInput: bad node or index");
  NNC_CHECK(v == nullptr || v->graph_ == this, "Graph::setNodeInput: value not in this graph");
  if (index >= node->numInputs()) node->inputs_.resize(index + 1, nullptr);
  Value* old = node->inputs_[index];
  if (old == v) return;
  if (old) {
    auto& users = old->users_;
    auto it = std::find(users.begin(), users.end(), Use{node, index});
    NNC_CHECK(it != users.end(), "use list out of sync at node '" + node->name_ + "'");
    users.erase(it);
  }
  node->inputs_[index] = v;
  if (v) v->users_.push_back({node, index});
}

namespace {
// The heir of a node replaced by a constant: its origins go to Provenance::folded. Never dereferenced.
Node* const kFoldedHeir = reinterpret_cast<Node*>(alignof(Node));
}  // namespace

void Node::addOrigins(const std::vector<std::string>& names) {
  for (const std::string& n : names)
    if (std::find(origins_.begin(), origins_.end(), n) == origins_.end()) origins_.push_back(n);
}

void Graph::setHeir(Node* node, Node* heir) {
  if (heir == node) heir = nullptr;
  if (auto it = heirOf_.find(node); it != heirOf_.end()) {
    if (it->second == heir) return;
    if (it->second != kFoldedHeir) std::erase(heirsOf_[it->second], node);
  }
  if (!heir) {
    heirOf_.erase(node);
    return;
  }
  heirOf_[node] = heir;
  if (heir != kFoldedHeir) heirsOf_[heir].push_back(node);
}

void Graph::replaceAllUsesWith(Value* from, Value* to) {
  NNC_CHECK(from != nullptr && to != nullptr, "replaceAllUsesWith(nullptr)");
  NNC_CHECK(from->graph_ == this && to->graph_ == this, "replaceAllUsesWith: value not in this graph");
  if (from == to) return;
  if (from->producer_ && from->producer_ != to->producer_)
    setHeir(from->producer_, to->producer_ ? to->producer_ : to->isConstant() ? kFoldedHeir : nullptr);
  for (const Use& use : from->users_) {
    use.node->inputs_[use.inputIndex] = to;
    to->users_.push_back(use);
  }
  from->users_.clear();
  for (Value*& out : outputs_)
    if (out == from) out = to;
}

void Graph::eraseNode(Node* node) {
  NNC_CHECK(node != nullptr, "eraseNode(nullptr)");
  for (Value* out : node->outputs_) {
    NNC_CHECK(out->users_.empty(), node->diagPrefix() + "erased while output '" + out->name_ + "' has users");
    NNC_CHECK(!out->isGraphOutput(), node->diagPrefix() + "erased while '" + out->name_ + "' is a graph output");
  }
  for (int i = 0; i < node->numInputs(); ++i) {
    Value* in = node->inputs_[i];
    if (!in) continue;
    auto& users = in->users_;
    auto it = std::find(users.begin(), users.end(), Use{node, i});
    NNC_CHECK(it != users.end(), "use list out of sync at " + node->diagPrefix());
    users.erase(it);
  }
  // Provenance: the origins go to the heir (which the inputs' producers inherit unless they have one),
  // and whoever had this node as heir gets its heir instead.
  Node* heir = nullptr;
  if (auto it = heirOf_.find(node); it != heirOf_.end()) heir = it->second;
  if (heir == kFoldedHeir) {
    provenance_.folded.insert(provenance_.folded.end(), node->origins_.begin(), node->origins_.end());
  } else if (heir) {
    heir->addOrigins(node->origins_);
  } else {
    provenance_.elided.insert(provenance_.elided.end(), node->origins_.begin(), node->origins_.end());
  }
  if (heir) {
    for (Value* in : node->inputs_)
      if (in && in->producer_ && !heirOf_.count(in->producer_)) setHeir(in->producer_, heir);
  }
  if (auto it = heirsOf_.find(node); it != heirsOf_.end()) {
    std::vector<Node*> orphans = std::move(it->second);
    heirsOf_.erase(it);
    for (Node* n : orphans) {
      heirOf_.erase(n);
      setHeir(n, heir);
    }
  }
  setHeir(node, nullptr);
  // The outputs die with the node, so no value is left pointing at a freed producer.
  std::unordered_set<const Value*> dead(node->outputs_.begin(), node->outputs_.end());
  std::erase_if(values_, [&](const std::unique_ptr<Value>& v) { return dead.count(v.get()) != 0; });
  nodes_.erase(node->pos_);
}

void Graph::removeDeadValues() {
  std::unordered_set<const Value*> outs(outputs_.begin(), outputs_.end());
  std::erase_if(values_, [&](const std::unique_ptr<Value>& v) {
    return v->users_.empty() && v->producer_ == nullptr && !v->isGraphInput_ && outs.count(v.get()) == 0;
  });
}

Status Graph::sortTopologically() {
  // Iterative depth-first post-order from each node in the current order: a node is placed after
  // all producers of its inputs, and nodes already in order stay in order (the sort is stable).
  enum class Mark : uint8_t { None, Active, Done };
  std::unordered_map<const Node*, Mark> mark;
  for (const auto& n : nodes_) mark[n.get()] = Mark::None;
  std::vector<Node*> order;
  order.reserve(nodes_.size());
  struct Frame {
    Node* node;
    int next;  // next input to visit
  };
  for (const auto& root : nodes_) {
    if (mark[root.get()] != Mark::None) continue;
    std::vector<Frame> stack{{root.get(), 0}};
    mark[root.get()] = Mark::Active;
    while (!stack.empty()) {
      Frame& f = stack.back();
      if (f.next == f.node->numInputs()) {
        mark[f.node] = Mark::Done;
        order.push_back(f.node);
        stack.pop_back();
        continue;
      }
      Value* in = f.node->inputs_[f.next++];
      Node* p = in ? in->producer_ : nullptr;
      if (!p) continue;
      auto it = mark.find(p);
      NNC_CHECK(it != mark.end(), "value '" + in->name_ + "' is produced by a node outside the graph");
      if (it->second == Mark::Active) {
        return Status::error("graph has a cycle through " + p->diagPrefix().substr(0, p->diagPrefix().size() - 2));
      }
      if (it->second == Mark::None) {
        it->second = Mark::Active;
        stack.push_back({p, 0});
      }
    }
  }
  // Splicing keeps every node's iterator (Node::pos_) valid.
  for (Node* n : order) nodes_.splice(nodes_.end(), nodes_, n->pos_);
  return Status::ok();
}

std::string Graph::uniqueName(const std::string& base) {
  auto [it, inserted] = usedNames_.emplace(base, 0);
  if (inserted) return base;
  int n = it->second;
  std::string candidate;
  do {
    candidate = base + "_" + std::to_string(++n);
  } while (usedNames_.count(candidate));
  usedNames_[base] = n;
  usedNames_.emplace(candidate, 0);
  return candidate;
}

std::unique_ptr<Graph> Graph::clone() const {
  auto g = std::make_unique<Graph>();
  std::unordered_map<const Value*, Value*> vmap;
  for (const auto& v : values_) {
    auto copy = std::make_unique<Value>();
    copy->name_ = v->name_;
    copy->dtype_ = v->dtype_;
    copy->shape_ = v->shape_;
    copy->producerOutput_ = v->producerOutput_;
    copy->constant_ = v->constant_;  // shares the buffer
    copy->isGraphInput_ = v->isGraphInput_;
    copy->graph_ = g.get();
    vmap[v.get()] = copy.get();
    g->values_.push_back(std::move(copy));
  }
  auto mapValue = [&](Value* v) -> Value* {
    if (!v) return nullptr;
    auto it = vmap.find(v);
    NNC_CHECK(it != vmap.end(), "Graph::clone: value '" + v->name_ + "' is not owned by the graph");
    return it->second;
  };
  for (const auto& n : nodes_) {
    auto copy = std::make_unique<Node>();
    Node* c = copy.get();
    c->op_ = n->op_;
    c->name_ = n->name_;
    c->origins_ = n->origins_;
    c->attrs_ = n->attrs_;
    for (int i = 0; i < n->numInputs(); ++i) {
      Value* in = mapValue(n->inputs_[i]);
      c->inputs_.push_back(in);
      if (in) in->users_.push_back({c, i});
    }
    for (Value* out : n->outputs_) {
      Value* o = mapValue(out);
      o->producer_ = c;
      c->outputs_.push_back(o);
    }
    c->pos_ = g->nodes_.insert(g->nodes_.end(), std::move(copy));
  }
  for (Value* v : inputs_) g->inputs_.push_back(mapValue(v));
  for (Value* v : outputs_) g->outputs_.push_back(mapValue(v));
  g->nameCounter_ = nameCounter_;
  g->usedNames_ = usedNames_;
  g->provenance_ = provenance_;
  return g;
}

}  // namespace nnc
