// Helpers for the ONNX importer tests: small ModelProtos built with the generated protobuf classes.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "frontend/onnx/importer.h"
#include "ir/graph.h"
#include "onnx.pb.h"

namespace nnc::testing {

class OnnxModel {
 public:
  explicit OnnxModel(int64_t opset = 17) {
    model_.set_ir_version(8);
    auto* imp = model_.add_opset_import();
    imp->set_domain("");
    imp->set_version(opset);
    g_ = model_.mutable_graph();
    g_->set_name("test");
  }

  // dims: a negative entry is a symbolic dim named "N".
  ::onnx::ValueInfoProto* input(const std::string& name, std::vector<int64_t> dims,
                                int elemType = ::onnx::TensorProto::FLOAT) {
    auto* vi = g_->add_input();
    vi->set_name(name);
    auto* tt = vi->mutable_type()->mutable_tensor_type();
    tt->set_elem_type(elemType);
    auto* shape = tt->mutable_shape();
    for (int64_t d : dims) {
      auto* dim = shape->add_dim();
      if (d < 0)
        dim->set_dim_param("N");
      else
        dim->set_dim_value(d);
    }
    return vi;
  }
  // Overwrites one declared dim of graph input `input`, e.g. with a value input() refuses (negative).
  void setInputDim(int input, int dim, int64_t value) {
    g_->mutable_input(input)->mutable_type()->mutable_tensor_type()->mutable_shape()->mutable_dim(dim)->set_dim_value(
        value);
  }
  void output(const std::string& name) { g_->add_output()->set_name(name); }

  ::onnx::NodeProto* node(const std::string& op, std::vector<std::string> inputs, std::vector<std::string> outputs,
                          const std::string& name = "") {
    auto* n = g_->add_node();
    n->set_op_type(op);
    n->set_name(name);
    for (auto& i : inputs) n->add_input(i);
    for (auto& o : outputs) n->add_output(o);
    return n;
  }

  ::onnx::TensorProto* floats(const std::string& name, std::vector<int64_t> dims, std::vector<float> data) {
    auto* t = g_->add_initializer();
    t->set_name(name);
    t->set_data_type(::onnx::TensorProto::FLOAT);
    for (int64_t d : dims) t->add_dims(d);
    for (float f : data) t->add_float_data(f);
    return t;
  }
  ::onnx::TensorProto* ints(const std::string& name, std::vector<int64_t> data) {
    auto* t = g_->add_initializer();
    t->set_name(name);
    t->set_data_type(::onnx::TensorProto::INT64);
    t->add_dims(static_cast<int64_t>(data.size()));
    for (int64_t v : data) t->add_int64_data(v);
    return t;
  }

  ::onnx::ModelProto& proto() { return model_; }
  ::onnx::GraphProto& graph() { return *g_; }
  std::string bytes() const { return model_.SerializeAsString(); }

  Expected<std::unique_ptr<Graph>> import(const onnx::ImportOptions& options = {},
                                          const std::string& baseDir = "") const {
    return onnx::importModelBytes(bytes(), "model.onnx", baseDir, options);
  }

 private:
  ::onnx::ModelProto model_;
  ::onnx::GraphProto* g_;
};

inline void setInt(::onnx::NodeProto* n, const std::string& name, int64_t v) {
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(::onnx::AttributeProto::INT);
  a->set_i(v);
}
inline void setFloat(::onnx::NodeProto* n, const std::string& name, float v) {
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(::onnx::AttributeProto::FLOAT);
  a->set_f(v);
}
inline void setInts(::onnx::NodeProto* n, const std::string& name, std::vector<int64_t> v) {
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(::onnx::AttributeProto::INTS);
  for (int64_t x : v) a->add_ints(x);
}
inline void setFloats(::onnx::NodeProto* n, const std::string& name, std::vector<float> v) {
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(::onnx::AttributeProto::FLOATS);
  for (float x : v) a->add_floats(x);
}
inline void setString(::onnx::NodeProto* n, const std::string& name, const std::string& v) {
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(::onnx::AttributeProto::STRING);
  a->set_s(v);
}

// The ops of the graph's nodes, in order ("Reshape,Softmax,Reshape").
inline std::string opList(const Graph& g) {
  std::string s;
  for (const Node* n : g.nodes()) {
    if (!s.empty()) s += ",";
    s += std::string(opName(n->op()));
  }
  return s;
}

inline const Node* findNode(const Graph& g, OpKind op) {
  for (const Node* n : g.nodes())
    if (n->op() == op) return n;
  return nullptr;
}

// Asserts an import failed with a message containing `text`.
#define EXPECT_IMPORT_ERROR(expr, text)                                                     \
  do {                                                                                      \
    auto nnc_r_ = (expr);                                                                   \
    ASSERT_FALSE(nnc_r_.isOk()) << "import unexpectedly succeeded";                         \
    EXPECT_NE(nnc_r_.status().message().find(text), std::string::npos)                      \
        << "message: " << nnc_r_.status().message() << "\nexpected to contain: " << (text); \
  } while (0)

}  // namespace nnc::testing
