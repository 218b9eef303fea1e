// The graph IR: values (typed tensor edges), nodes (op + inputs + outputs + attributes) and the
// graph that owns both. Values know their producer and their users, so rewrites stay short.
#pragma once

#include <list>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "ir/attributes.h"
#include "ir/op_kind.h"
#include "nnc/graph.h"
#include "nnc/tensor.h"

namespace nnc {

class Node;
class Graph;

struct Use {
  Node* node;
  int inputIndex;
  bool operator==(const Use& o) const { return node == o.node && inputIndex == o.inputIndex; }
};

class Value {
 public:
  const std::string& name() const { return name_; }
  DType dtype() const { return dtype_; }
  const Shape& shape() const { return shape_; }
  uint64_t byteSize() const { return static_cast<uint64_t>(shape_.numel()) * dtypeSize(dtype_); }
  Node* producer() const { return producer_; }
  int producerOutput() const { return producerOutput_; }
  const std::vector<Use>& users() const { return users_; }
  bool isConstant() const { return !constant_.isNull(); }
  const Tensor& constant() const { return constant_; }
  bool isGraphInput() const { return isGraphInput_; }
  bool isGraphOutput() const;
  void setType(DType dtype, Shape shape) {
    dtype_ = dtype;
    shape_ = std::move(shape);
  }
  // Renames the value (the graph records the name so that uniqueName never hands it out).
  void setName(std::string name);

 private:
  friend class Graph;
  std::string name_;
  DType dtype_ = DType::F32;
  Shape shape_;
  Node* producer_ = nullptr;
  int producerOutput_ = 0;
  std::vector<Use> users_;
  Tensor constant_;
  bool isGraphInput_ = false;
  Graph* graph_ = nullptr;
};

class Node {
 public:
  OpKind op() const { return op_; }
  const std::string& name() const { return name_; }
  // An omitted optional input is nullptr.
  const std::vector<Value*>& inputs() const { return inputs_; }
  Value* input(int i) const { return i < static_cast<int>(inputs_.size()) ? inputs_[i] : nullptr; }
  int numInputs() const { return static_cast<int>(inputs_.size()); }
  const std::vector<Value*>& outputs() const { return outputs_; }
  Value* output(int i) const { return outputs_[i]; }
  int numOutputs() const { return static_cast<int>(outputs_.size()); }
  const Attributes& attrs() const { return attrs_; }
  Attributes& attrs() { return attrs_; }
  // "node 'conv1' (Conv): " — the prefix of every diagnostic about this node.
  std::string diagPrefix() const;
  // The source (ONNX) nodes this node computes, wholly or in part, by name: stamped by the importer, and
  // inherited from the nodes a rewrite removes (Graph's provenance rules), so that a fused group names
  // every source node it computes (nnc explain, nnc bisect).
  const std::vector<std::string>& origins() const { return origins_; }
  void addOrigins(const std::vector<std::string>& names);

 private:
  friend class Graph;
  OpKind op_;
  std::string name_;
  std::vector<std::string> origins_;
  std::vector<Value*> inputs_;
  std::vector<Value*> outputs_;
  Attributes attrs_;
  std::list<std::unique_ptr<Node>>::iterator pos_;  // this node's place in Graph::nodes_
};

// Where the source nodes went that no node of the graph computes any more. With the nodes' origins this
// accounts for every source node the importer read.
struct Provenance {
  std::vector<std::string> sourceNodes;  // every source node imported, in file order
  std::vector<std::string> folded;       // computed at compile time (their results are constants)
  std::vector<std::string> elided;       // no computation left: aliases, unused results, a constant If
};

class Graph {
 public:
  Graph() = default;
  Graph(const Graph&) = delete;
  Graph& operator=(const Graph&) = delete;
  std::unique_ptr<Graph> clone() const;

  Value* addInput(const std::string& name, DType dtype, Shape shape);
  Value* addConstant(const std::string& name, Tensor value);
  // Appends a node; output types are set by the caller (GraphBuilder runs shape inference).
  Node* addNode(OpKind op, const std::string& name, std::vector<Value*> inputs, int numOutputs, Attributes attrs = {});
  // Inserts a node immediately before `before` in the node order.
  Node* insertNodeBefore(Node* before, OpKind op, const std::string& name, std::vector<Value*> inputs, int numOutputs,
                         Attributes attrs = {});
  void addOutput(Value* v);
  void setOutput(int i, Value* v);

  const std::vector<Value*>& inputs() const { return inputs_; }
  const std::vector<Value*>& outputs() const { return outputs_; }
  // Nodes in insertion order, which the graph keeps topological.
  std::vector<Node*> nodes() const;
  size_t numNodes() const { return nodes_.size(); }

  void setNodeInput(Node* node, int index, Value* v);
  // Graph outputs included. Provenance: `to`'s producer becomes the heir of `from`'s, which hands it its
  // origins when it is erased (or to `folded` when `to` is a constant); a node erased after its users
  // passes the same heir to its inputs' producers, so a rewrite's whole dead cone (a recognised
  // LayerNorm's decomposed nodes) ends up in the node that replaced it.
  void replaceAllUsesWith(Value* from, Value* to);
  // Erases a node whose outputs have no users and are not graph outputs; its origins go to its heir.
  void eraseNode(Node* node);
  Provenance& provenance() { return provenance_; }
  const Provenance& provenance() const { return provenance_; }
  // Drops values that are unused, unproduced and not graph inputs/outputs.
  void removeDeadValues();
  // Reorders nodes topologically; fails naming a node on a cycle.
  Status sortTopologically();
  // Fresh unique names for values/nodes created by passes.
  std::string uniqueName(const std::string& base);
  std::vector<Value*> values() const;

 private:
  friend class Value;
  Value* newValue(const std::string& name);
  Node* createNode(std::list<std::unique_ptr<Node>>::iterator pos, OpKind op, const std::string& name,
                   std::vector<Value*> inputs, int numOutputs, Attributes attrs);
  void setHeir(Node* node, Node* heir);
  std::list<std::unique_ptr<Node>> nodes_;
  std::vector<std::unique_ptr<Value>> values_;
  Provenance provenance_;
  // Provenance bookkeeping (not cloned): the node that inherits a node's origins when it is erased,
  // kFoldedHeir for results replaced by constants; and the reverse map, to redirect on erasure.
  std::unordered_map<Node*, Node*> heirOf_;
  std::unordered_map<Node*, std::vector<Node*>> heirsOf_;
  std::vector<Value*> inputs_;
  std::vector<Value*> outputs_;
  int nameCounter_ = 0;
  // Every name ever given to a value or node of this graph (never recycled), mapped to the last
  // suffix uniqueName tried for it as a base, so that repeated bases do not probe from _1 again.
  std::unordered_map<std::string, int> usedNames_;
};

}  // namespace nnc
