// The public ONNX API (nnc/onnx.h): importFile, and ModelBuilder, which writes an onnx::ModelProto as
// onnx.helper would and imports it through the importer, so a graph built in C++ gets every operator,
// opset rule and diagnostic a model file gets.
#include <type_traits>

#include "frontend/onnx/importer.h"
#include "nnc/onnx.h"
#include "onnx.pb.h"

namespace nnc::onnx {

Expected<GraphPtr> importFile(const std::string& path, const ImportOptions& options) {
  NNC_ASSIGN_OR_RETURN(std::unique_ptr<Graph> graph, importModelFile(path, options));
  return GraphPtr(graph.release());
}

namespace {

// Sets `attr` to `value`, with ONNX's attribute type for it.
void setAttribute(const AttributeValue& value, ::onnx::AttributeProto* attr) {
  using A = ::onnx::AttributeProto;
  std::visit(
      [&](const auto& v) {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, int64_t>) {
          attr->set_type(A::INT);
          attr->set_i(v);
        } else if constexpr (std::is_same_v<T, double>) {
          attr->set_type(A::FLOAT);
          attr->set_f(static_cast<float>(v));
        } else if constexpr (std::is_same_v<T, std::string>) {
          attr->set_type(A::STRING);
          attr->set_s(v);
        } else if constexpr (std::is_same_v<T, Tensor>) {
          attr->set_type(A::TENSOR);
          tensorToProto(v, attr->name(), attr->mutable_t());
        } else if constexpr (std::is_same_v<T, std::vector<int64_t>>) {
          attr->set_type(A::INTS);
          for (int64_t x : v) attr->add_ints(x);
        } else if constexpr (std::is_same_v<T, std::vector<double>>) {
          attr->set_type(A::FLOATS);
          for (double x : v) attr->add_floats(static_cast<float>(x));
        } else {
          attr->set_type(A::STRINGS);
          for (const std::string& x : v) attr->add_strings(x);
        }
      },
      value);
}

void setValueInfo(const std::string& name, DType dtype, const Shape& shape, ::onnx::ValueInfoProto* info) {
  info->set_name(name);
  ::onnx::TypeProto_Tensor* type = info->mutable_type()->mutable_tensor_type();
  type->set_elem_type(dtypeToOnnx(dtype));
  ::onnx::TensorShapeProto* dims = type->mutable_shape();
  for (int64_t d : shape.dims()) dims->add_dim()->set_dim_value(d);
}

}  // namespace

struct ModelBuilder::Impl {
  ::onnx::ModelProto model;
  int64_t nextName = 0;

  ::onnx::GraphProto* graph() { return model.mutable_graph(); }
  std::string fresh(const std::string& stem) { return stem + "_" + std::to_string(nextName++); }
};

ModelBuilder::ModelBuilder(int64_t opset) : impl_(std::make_unique<Impl>()) {
  impl_->model.set_ir_version(8);
  impl_->model.set_producer_name("nnc::onnx::ModelBuilder");
  ::onnx::OperatorSetIdProto* id = impl_->model.add_opset_import();
  id->set_domain("");
  id->set_version(opset);
  impl_->graph()->set_name("graph");
}

ModelBuilder::~ModelBuilder() = default;
ModelBuilder::ModelBuilder(ModelBuilder&&) noexcept = default;
ModelBuilder& ModelBuilder::operator=(ModelBuilder&&) noexcept = default;

std::string ModelBuilder::input(const std::string& name, DType dtype, const Shape& shape) {
  setValueInfo(name, dtype, shape, impl_->graph()->add_input());
  return name;
}

std::string ModelBuilder::constant(const Tensor& value, const std::string& name) {
  const std::string n = name.empty() ? impl_->fresh("const") : name;
  tensorToProto(value, n, impl_->graph()->add_initializer());
  return n;
}

std::vector<std::string> ModelBuilder::opMulti(const std::string& type, const std::vector<std::string>& inputs,
                                               const AttributeMap& attributes, int numOutputs,
                                               const std::string& name) {
  ::onnx::NodeProto* node = impl_->graph()->add_node();
  node->set_op_type(type);
  node->set_name(name.empty() ? impl_->fresh(type) : name);
  for (const std::string& in : inputs) node->add_input(in);
  std::vector<std::string> outputs;
  for (int i = 0; i < numOutputs; ++i) {
    outputs.push_back(node->name() + "_" + std::to_string(i));
    node->add_output(outputs.back());
  }
  for (const auto& [key, value] : attributes) {
    ::onnx::AttributeProto* attr = node->add_attribute();
    attr->set_name(key);
    setAttribute(value, attr);
  }
  return outputs;
}

std::string ModelBuilder::op(const std::string& type, const std::vector<std::string>& inputs,
                             const AttributeMap& attributes, const std::string& name) {
  return opMulti(type, inputs, attributes, 1, name).front();
}

// The output's type is left to the importer's inference (ONNX allows an output without one).
void ModelBuilder::output(const std::string& value) { impl_->graph()->add_output()->set_name(value); }

Expected<GraphPtr> ModelBuilder::build(const ImportOptions& options) const {
  NNC_ASSIGN_OR_RETURN(std::unique_ptr<Graph> graph,
                       importModelBytes(serialize(), "the built model", /*baseDir=*/"", options));
  return GraphPtr(graph.release());
}

std::string ModelBuilder::serialize() const { return impl_->model.SerializeAsString(); }

}  // namespace nnc::onnx
