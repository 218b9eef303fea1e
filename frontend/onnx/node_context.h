// Internal to the ONNX importer: what an op handler sees while translating one ONNX node (its
// inputs as IR values, its attributes converted to nnc form, the builder), and the handler table.
//
// Errors are sticky, like the builder's: the first failure is kept and later helper calls return
// null, so a handler reads straight through and the importer checks once after it returns.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "ir/builder.h"
#include "onnx.pb.h"

namespace nnc::onnx {

// ONNX AttributeProto -> AttrValue (INT, FLOAT as double, STRING, INTS, FLOATS, STRINGS, TENSOR).
Expected<AttrValue> convertAttribute(const ::onnx::AttributeProto& attr, const std::string& baseDir);

// A node's name, or its first output's when the file leaves it empty: what diagnostics and provenance call it.
std::string sourceName(const ::onnx::NodeProto& node);

class NodeContext {
 public:
  NodeContext(const ::onnx::NodeProto& proto, int64_t opset, GraphBuilder& builder, std::vector<Value*> inputs,
              Attributes attrs);

  const ::onnx::NodeProto& proto() const { return proto_; }
  const std::string& opType() const { return proto_.op_type(); }
  // The node's name, or its first output's name when the model left it empty.
  const std::string& name() const { return name_; }
  int64_t opset() const { return opset_; }
  GraphBuilder& builder() { return builder_; }

  // ONNX inputs in order; nullptr for an omitted optional input (and past the end).
  const std::vector<Value*>& inputs() const { return inputs_; }
  Value* input(int i) const { return i < static_cast<int>(inputs_.size()) ? inputs_[i] : nullptr; }
  int numInputs() const { return static_cast<int>(inputs_.size()); }
  // ONNX outputs, trailing omitted ones dropped.
  int numOutputs() const { return numOutputs_; }
  bool wantsOutput(int i) const { return i < numOutputs_ && !proto_.output(i).empty(); }

  // The converted ONNX attributes; handlers may rewrite them before the generic translation.
  Attributes& attrs() { return attrs_; }
  bool hasAttr(const std::string& name) const { return attrs_.has(name); }
  // Typed reads with ONNX's defaults; a wrong kind records an error and returns the default.
  int64_t attrInt(const std::string& name, int64_t fallback);
  double attrFloat(const std::string& name, double fallback);
  std::string attrString(const std::string& name, const std::string& fallback);
  std::vector<int64_t> attrInts(const std::string& name, std::vector<int64_t> fallback);
  std::vector<double> attrFloats(const std::string& name, std::vector<double> fallback);
  // A required attribute; records "missing required attribute" when absent.
  std::optional<std::vector<int64_t>> requireInts(const std::string& name);

  // Records the first error as "node 'n' (Op): message" (or a message that already names a node).
  void fail(const std::string& message);
  bool failed() const { return !status_.isOk(); }
  const Status& status() const { return status_; }
  // "node 'n' (Op): "
  std::string prefix() const;
  // After a "must be a compile-time constant" error: the graph input whose binding would fix it.
  const std::string& neededBinding() const { return neededBinding_; }

  // The data of constant input i, or null after recording "input 'what' ... must be a
  // compile-time constant".
  const Tensor* constantInput(int i, const std::string& what);

  // Building helpers. They return null once an error is recorded (here or in the builder).
  Value* constant(Tensor t);
  Value* constInts(const std::vector<int64_t>& values);
  Value* scalar(DType dtype, double value);
  // Creates an IR op, turning constant inputs listed in its OpDef::staticInputs into attributes and
  // dropping trailing omitted inputs. A non-constant static input is an error.
  Value* op(OpKind kind, std::vector<Value*> inputs, Attributes attrs = {});
  std::vector<Value*> opMulti(OpKind kind, std::vector<Value*> inputs, Attributes attrs, int numOutputs);
  Value* reshape(Value* x, const std::vector<int64_t>& dims);
  Value* reduce(OpKind kind, Value* x, const std::vector<int64_t>& axes, bool keepdims);
  Value* cast(Value* x, DType to);
  // op/opMulti with an explicit node name (translateAs names the main op after the ONNX node).
  std::vector<Value*> createOp(OpKind kind, std::vector<Value*> inputs, Attributes attrs, int numOutputs,
                               const std::string& nodeName);

 private:
  void failNotConstant(const std::string& what, Value* v);
  bool checkKind(const std::string& name, const AttrValue* v, AttrKind kind);
  std::string subNodeName(OpKind kind);

  const ::onnx::NodeProto& proto_;
  int64_t opset_;
  GraphBuilder& builder_;
  std::vector<Value*> inputs_;
  Attributes attrs_;
  std::string name_;
  int numOutputs_ = 0;
  int opsCreated_ = 0;
  Status status_;
  std::string neededBinding_;
};

// A handler returns one value per ONNX output (nullptr for an omitted optional output).
using OpHandler = std::function<std::vector<Value*>(NodeContext&)>;
using HandlerTable = std::map<std::string, OpHandler>;

// The translation of an ONNX op whose name is an nnc op: attributes copied, static inputs folded
// into attributes. Handlers for older opsets rewrite the node into the newest form, then call this.
std::vector<Value*> translateGeneric(NodeContext& n);
// Same, with explicit inputs and attributes.
std::vector<Value*> translateAs(NodeContext& n, OpKind kind, std::vector<Value*> inputs, Attributes attrs);

// The handler for an ONNX op type, or null when the generic translation applies.
const OpHandler* findHandler(const std::string& opType);

// The per-file registration functions that fill the table.
void registerCoreHandlers(HandlerTable& table);
void registerOpsetHandlers(HandlerTable& table);
void registerLossHandlers(HandlerTable& table);
void registerExtraHandlers(HandlerTable& table);
void registerRnnHandlers(HandlerTable& table);

}  // namespace nnc::onnx
