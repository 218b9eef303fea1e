// The graph printer (format documented in ir/printer.h).
#include "ir/printer.h"

#include <charconv>
#include <cmath>

namespace nnc {

namespace {

bool isBareNameChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '.';
}

std::string quotedName(const std::string& name) {
  bool bare = !name.empty();
  for (char c : name) bare = bare && isBareNameChar(c);
  if (bare) return name;
  std::string out = "\"";
  for (char c : name) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

std::string valueRef(const Value* v) { return v ? "%" + quotedName(v->name()) : "_"; }

std::string typeStr(const Value* v) { return std::string(dtypeName(v->dtype())) + v->shape().str(); }

std::string formatElement(const Tensor& t, int64_t i) {
  char buf[64];
  std::to_chars_result res;
  if (t.dtype() == DType::F64) {
    res = std::to_chars(buf, buf + sizeof buf, t.getDouble(i));
  } else if (isFloat(t.dtype())) {
    res = std::to_chars(buf, buf + sizeof buf, static_cast<float>(t.getDouble(i)));
  } else if (t.dtype() == DType::U64) {
    res = std::to_chars(buf, buf + sizeof buf, static_cast<uint64_t>(t.getInt(i)));
  } else {
    res = std::to_chars(buf, buf + sizeof buf, t.getInt(i));
  }
  return std::string(buf, res.ptr);
}

std::string constantLine(const Value* v) {
  std::string s = valueRef(v) + " = Constant()";
  const Tensor& t = v->constant();
  if (t.numel() <= kPrintedConstantElements) {
    s += " {value=[";
    for (int64_t i = 0; i < t.numel(); ++i) s += (i ? ", " : "") + formatElement(t, i);
    s += "]}";
  }
  return s + " : " + typeStr(v);
}

std::string attrStr(const AttrValue& v) {
  if (attrKindOf(v) != AttrKind::Tensor) return attrValueStr(v);
  // Tensor attributes print in full when small, so that the parser can read them back.
  const Tensor& t = std::get<Tensor>(v);
  if (t.numel() > kPrintedConstantElements) return t.summary();
  std::string s = std::string(dtypeName(t.dtype())) + t.shape().str() + "{";
  for (int64_t i = 0; i < t.numel(); ++i) s += (i ? ", " : "") + formatElement(t, i);
  return s + "}";
}

}  // namespace

std::string printNode(const Node& node) {
  std::string s;
  for (int i = 0; i < node.numOutputs(); ++i) s += (i ? ", " : "") + valueRef(node.output(i));
  s += " = " + std::string(opName(node.op())) + "(";
  for (int i = 0; i < node.numInputs(); ++i) s += (i ? ", " : "") + valueRef(node.input(i));
  s += ")";
  if (!node.attrs().all().empty()) {
    s += " {";
    bool first = true;
    for (const auto& [name, value] : node.attrs().all()) {
      s += (first ? "" : ", ") + quotedName(name) + "=" + attrStr(value);
      first = false;
    }
    s += "}";
  }
  s += " :";
  for (int i = 0; i < node.numOutputs(); ++i) s += (i ? ", " : " ") + typeStr(node.output(i));
  const std::string& first = node.numOutputs() ? node.output(0)->name() : std::string();
  if (node.name() != first && node.name() + "_out0" != first) s += " @" + quotedName(node.name());
  return s;
}

std::string printGraph(const Graph& graph) {
  std::string s = "graph(";
  for (size_t i = 0; i < graph.inputs().size(); ++i) {
    const Value* v = graph.inputs()[i];
    s += (i ? ", " : "") + valueRef(v) + ": " + typeStr(v);
  }
  s += ") -> (";
  for (size_t i = 0; i < graph.outputs().size(); ++i) {
    const Value* v = graph.outputs()[i];
    s += (i ? ", " : "") + valueRef(v) + ": " + typeStr(v);
  }
  s += ") {\n";
  for (const Value* v : graph.values())
    if (v->isConstant()) s += "  " + constantLine(v) + "\n";
  for (const Node* n : graph.nodes()) s += "  " + printNode(*n) + "\n";
  return s + "}\n";
}

}  // namespace nnc
