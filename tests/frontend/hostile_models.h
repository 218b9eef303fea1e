// Hostile ONNX models for the importer and command-line tests (issue 4): Ifs nested inside If
// branches (built with the protobuf classes up to protobuf's own nesting limit, and as raw wire
// format far beyond it) and models calling model-local functions.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tests/frontend/onnx_test_util.h"

namespace nnc::testing {

// A scalar bool initializer (an If condition known at compile time).
inline void boolInitializer(OnnxModel& m, const std::string& name, bool value) {
  ::onnx::TensorProto* t = m.graph().add_initializer();
  t->set_name(name);
  t->set_data_type(::onnx::TensorProto::BOOL);
  t->add_int32_data(value ? 1 : 0);
}

// y = If(c) { If(c) { ... { Relu(x) } ... } }: `depth` Ifs named if_0 (outermost) to if_<depth-1>,
// each in the then_branch of the one before; c is a constant true, x: f32[2]. Built with the
// protobuf classes, whose recursive parse and destructor limit `depth` to about 33.
inline OnnxModel nestedIfModel(int depth) {
  OnnxModel m;
  m.input("x", {2});
  boolInitializer(m, "c", true);
  ::onnx::GraphProto* g = &m.graph();
  for (int k = 0; k < depth; ++k) {
    ::onnx::NodeProto* n = g->add_node();
    n->set_op_type("If");
    n->set_name("if_" + std::to_string(k));
    n->add_input("c");
    n->add_output("out_" + std::to_string(k));
    ::onnx::AttributeProto* a = n->add_attribute();
    a->set_name("then_branch");
    a->set_type(::onnx::AttributeProto::GRAPH);
    g = a->mutable_g();
    g->set_name("branch_" + std::to_string(k));
    g->add_output()->set_name("out_" + std::to_string(k + 1));
  }
  ::onnx::NodeProto* relu = g->add_node();
  relu->set_op_type("Relu");
  relu->set_name("relu");
  relu->add_input("x");
  relu->add_output("out_" + std::to_string(depth));
  m.output("out_0");
  return m;
}

// --- Raw protobuf wire format, for nesting deeper than the generated classes can handle. ---
inline void wireVarint(std::string& s, uint64_t v) {
  for (; v >= 0x80; v >>= 7) s += static_cast<char>((v & 0x7f) | 0x80);
  s += static_cast<char>(v);
}
inline size_t wireVarintSize(uint64_t v) {
  size_t n = 1;
  for (; v >= 0x80; v >>= 7) ++n;
  return n;
}
inline void wireTag(std::string& s, int field, int wireType) {
  wireVarint(s, (static_cast<uint64_t>(field) << 3) | static_cast<uint64_t>(wireType));
}
inline std::string wireString(int field, const std::string& value) {
  std::string s;
  wireTag(s, field, 2);
  wireVarint(s, value.size());
  return s + value;
}

// The bytes of a ModelProto whose graph holds an If whose then_branch holds an If ... `depth` deep
// (three protobuf messages per level: GraphProto > NodeProto > AttributeProto). Written outermost
// first from precomputed sizes, so that a million levels cost linear time and no recursion.
inline std::string deeplyNestedIfBytes(int depth) {
  // GraphProto: node = 1, output = 12. NodeProto: input = 1, output = 2, name = 3, op_type = 4,
  // attribute = 5. AttributeProto: name = 1, g = 6, type = 20 (GRAPH = 5). ValueInfoProto: name = 1.
  const std::string graphTail = wireString(12, wireString(1, "y"));  // each graph's output "y"
  const std::string nodeHead = wireString(1, "c") + wireString(2, "y") + wireString(3, "if") + wireString(4, "If");
  std::string attrHead = wireString(1, "then_branch");
  wireTag(attrHead, 20, 0);
  wireVarint(attrHead, 5);
  const size_t tagSize = 1;  // every tag used here fits in one byte except type (20), inside attrHead
  // sizes[k]: bytes of the graph at level k (level `depth` is the innermost, holding only its tail).
  std::vector<uint64_t> graphSize(static_cast<size_t>(depth) + 1), nodeSize(depth), attrSize(depth);
  graphSize[depth] = graphTail.size();
  for (int k = depth - 1; k >= 0; --k) {
    attrSize[k] = attrHead.size() + tagSize + wireVarintSize(graphSize[k + 1]) + graphSize[k + 1];
    nodeSize[k] = nodeHead.size() + tagSize + wireVarintSize(attrSize[k]) + attrSize[k];
    graphSize[k] = tagSize + wireVarintSize(nodeSize[k]) + nodeSize[k] + graphTail.size();
  }
  std::string s;
  s.reserve(static_cast<size_t>(graphSize[0]) + 64);
  wireTag(s, 1, 0);  // ir_version = 8
  wireVarint(s, 8);
  std::string opset;  // opset_import = 8: {domain "", version 17}
  wireTag(opset, 2, 0);
  wireVarint(opset, 17);
  s += wireString(8, opset);
  wireTag(s, 7, 2);  // graph
  wireVarint(s, graphSize[0]);
  for (int k = 0; k < depth; ++k) {
    wireTag(s, 1, 2);
    wireVarint(s, nodeSize[k]);
    s += nodeHead;
    wireTag(s, 5, 2);
    wireVarint(s, attrSize[k]);
    s += attrHead;
    wireTag(s, 6, 2);
    wireVarint(s, graphSize[k + 1]);
  }
  for (int k = 0; k <= depth; ++k) s += graphTail;
  return s;
}

// A model whose node "call1" calls the model-local function <domain>.<name> (ModelProto.functions);
// with `recursive`, the function's body calls itself.
inline OnnxModel localFunctionModel(const std::string& domain, const std::string& name, bool recursive) {
  OnnxModel m;
  if (!domain.empty()) {
    auto* imp = m.proto().add_opset_import();
    imp->set_domain(domain);
    imp->set_version(1);
  }
  ::onnx::FunctionProto* f = m.proto().add_functions();
  f->set_name(name);
  f->set_domain(domain);
  f->add_input("a");
  f->add_output("b");
  auto* fo = f->add_opset_import();
  fo->set_domain("");
  fo->set_version(17);
  ::onnx::NodeProto* body = f->add_node();
  body->set_op_type(recursive ? name : "Relu");
  body->set_domain(recursive ? domain : "");
  body->add_input("a");
  body->add_output("b");
  m.input("x", {2});
  m.node(name, {"x"}, {"y"}, "call1")->set_domain(domain);
  m.output("y");
  return m;
}

}  // namespace nnc::testing
