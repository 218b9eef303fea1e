// A recursive-descent parser for the graph text of ir/printer.h.
#include "ir/parser.h"

#include <charconv>
#include <cmath>
#include <limits>
#include <unordered_map>

#include "ir/builder.h"

namespace nnc {

namespace {

bool isNameChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '.';
}

bool isNumberChar(char c) { return isNameChar(c) || c == '-' || c == '+'; }

// A parsed scalar literal: an integer when it has no '.', exponent, inf or nan.
struct Number {
  bool isInt;
  int64_t i;
  double d;
};

struct TypeDecl {
  DType dtype;
  Shape shape;
};

class Parser {
 public:
  explicit Parser(std::string_view text) : text_(text) {}

  Expected<std::unique_ptr<Graph>> run() {
    Status s = parseGraph();
    if (!s) return s;
    return std::move(graph_);
  }

 private:
  // --- lexing helpers
  void skipSpace() {
    while (pos_ < text_.size()) {
      char c = text_[pos_];
      if (c == '#') {
        while (pos_ < text_.size() && text_[pos_] != '\n') ++pos_;
      } else if (c == ' ' || c == '\t' || c == '\r' || c == '\n') {
        if (c == '\n') ++line_;
        ++pos_;
      } else {
        break;
      }
    }
  }
  bool atEnd() {
    skipSpace();
    return pos_ >= text_.size();
  }
  char peek() {
    skipSpace();
    return pos_ < text_.size() ? text_[pos_] : '\0';
  }
  bool accept(std::string_view tok) {
    skipSpace();
    if (text_.substr(pos_, tok.size()) != tok) return false;
    pos_ += tok.size();
    return true;
  }
  std::string near() {
    skipSpace();
    if (pos_ >= text_.size()) return "end of input";
    size_t end = pos_;
    while (end < text_.size() && end - pos_ < 12 && text_[end] != '\n') ++end;
    return "'" + std::string(text_.substr(pos_, end - pos_)) + "'";
  }
  Status err(const std::string& msg) { return errAt(line_, msg); }
  // For errors found after a statement's last token, when line_ may already be past it.
  static Status errAt(int line, const std::string& msg) {
    return Status::error("line " + std::to_string(line) + ": " + msg);
  }
  Status expect(std::string_view tok) {
    if (accept(tok)) return Status::ok();
    return err("expected '" + std::string(tok) + "', got " + near());
  }
  std::string word() {
    skipSpace();
    size_t start = pos_;
    while (pos_ < text_.size() && isNameChar(text_[pos_])) ++pos_;
    return std::string(text_.substr(start, pos_ - start));
  }
  Expected<std::string> quoted() {
    NNC_RETURN_IF_ERROR(expect("\""));
    std::string s;
    while (pos_ < text_.size() && text_[pos_] != '"') {
      char c = text_[pos_++];
      if (c == '\\' && pos_ < text_.size()) {
        c = text_[pos_++];
        if (c == 'n') c = '\n';
      }
      if (c == '\n') ++line_;
      s += c;
    }
    if (pos_ >= text_.size()) return err("unterminated string");
    ++pos_;
    return s;
  }
  // A name: bare [A-Za-z0-9_.]+ or a quoted string.
  Expected<std::string> name(const char* what) {
    if (peek() == '"') return quoted();
    std::string w = word();
    if (w.empty()) return err(std::string("expected ") + what + ", got " + near());
    return w;
  }
  Expected<std::string> valueName() {
    NNC_RETURN_IF_ERROR(expect("%"));
    // No space allowed between % and the name; skipSpace inside name() is harmless here.
    return name("a value name");
  }

  Expected<Number> number() {
    skipSpace();
    size_t start = pos_;
    while (pos_ < text_.size() && isNumberChar(text_[pos_])) ++pos_;
    std::string tok(text_.substr(start, pos_ - start));
    if (tok.empty()) return err("expected a number, got " + near());
    std::string_view body = tok;
    bool neg = !body.empty() && body[0] == '-';
    std::string_view mag = (neg || (!body.empty() && body[0] == '+')) ? body.substr(1) : body;
    if (mag == "inf") return Number{false, 0, neg ? -HUGE_VAL : HUGE_VAL};
    if (mag == "nan") return Number{false, 0, std::numeric_limits<double>::quiet_NaN()};
    if (tok == "true") return Number{true, 1, 1};
    if (tok == "false") return Number{true, 0, 0};
    bool isInt = tok.find_first_of(".eE") == std::string::npos;
    const char* b = tok.data();
    const char* e = tok.data() + tok.size();
    if (*b == '+') ++b;
    if (isInt) {
      int64_t v;
      auto res = std::from_chars(b, e, v);
      if (res.ec == std::errc() && res.ptr == e) return Number{true, v, static_cast<double>(v)};
      uint64_t u;  // u64 values above 2^63 keep their bits
      res = std::from_chars(b, e, u);
      if (res.ec == std::errc() && res.ptr == e) return Number{true, static_cast<int64_t>(u), static_cast<double>(u)};
      return err("bad integer '" + tok + "'");
    }
    double d;
    auto res = std::from_chars(b, e, d);
    if (res.ec != std::errc() || res.ptr != e) return err("bad number '" + tok + "'");
    return Number{false, 0, d};
  }

  Expected<TypeDecl> type() {
    std::string dt = word();
    auto dtype = dtypeFromName(dt);
    if (!dtype) return err("unknown dtype '" + dt + "'");
    NNC_RETURN_IF_ERROR(expect("["));
    std::vector<int64_t> dims;
    if (!accept("]")) {
      while (true) {
        skipSpace();
        size_t start = pos_;
        if (pos_ < text_.size() && text_[pos_] == '-') ++pos_;
        while (pos_ < text_.size() && text_[pos_] >= '0' && text_[pos_] <= '9') ++pos_;
        int64_t d;
        auto res = std::from_chars(text_.data() + start, text_.data() + pos_, d);
        if (res.ec != std::errc() || pos_ == start) return err("bad dimension in type, at " + near());
        dims.push_back(d);
        if (accept("]")) break;
        NNC_RETURN_IF_ERROR(expect("x"));
      }
    }
    Shape shape(std::move(dims));
    if (!shape.checkedNumel()) return err("unsupported shape " + shape.str());
    return TypeDecl{*dtype, std::move(shape)};
  }

  Expected<std::vector<Number>> numberList(char close) {
    std::vector<Number> out;
    if (accept(std::string(1, close))) return out;
    while (true) {
      NNC_ASSIGN_OR_RETURN(Number n, number());
      out.push_back(n);
      if (accept(std::string(1, close))) return out;
      NNC_RETURN_IF_ERROR(expect(","));
    }
  }

  static void fill(Tensor& t, const std::vector<Number>& values) {
    for (size_t i = 0; i < values.size(); ++i) {
      if (values[i].isInt && !isFloat(t.dtype())) {
        t.setInt(static_cast<int64_t>(i), values[i].i);
      } else {
        t.setDouble(static_cast<int64_t>(i), values[i].d);
      }
    }
  }

  Expected<Tensor> tensorOf(const TypeDecl& type, const std::vector<Number>& values, int line) {
    Tensor t(type.dtype, type.shape);
    if (static_cast<int64_t>(values.size()) != t.numel())
      return errAt(line, "tensor of type " + std::string(dtypeName(type.dtype)) + type.shape.str() + " given " +
                             std::to_string(values.size()) + " values");
    fill(t, values);
    return t;
  }

  Expected<AttrValue> attrValue() {
    char c = peek();
    if (c == '"') {
      NNC_ASSIGN_OR_RETURN(std::string s, quoted());
      return AttrValue(std::move(s));
    }
    if (c == '[') {
      accept("[");
      if (peek() == '"') {
        std::vector<std::string> strs;
        while (true) {
          NNC_ASSIGN_OR_RETURN(std::string s, quoted());
          strs.push_back(std::move(s));
          if (accept("]")) break;
          NNC_RETURN_IF_ERROR(expect(","));
        }
        return AttrValue(std::move(strs));
      }
      NNC_ASSIGN_OR_RETURN(std::vector<Number> nums, numberList(']'));
      bool allInt = true;
      for (const Number& n : nums) allInt = allInt && n.isInt;
      if (allInt) {
        std::vector<int64_t> ints;
        for (const Number& n : nums) ints.push_back(n.i);
        return AttrValue(std::move(ints));
      }
      std::vector<double> ds;
      for (const Number& n : nums) ds.push_back(n.d);
      return AttrValue(std::move(ds));
    }
    // A tensor: dtype[dims]{values}.
    size_t save = pos_;
    int saveLine = line_;
    std::string w = word();
    if (dtypeFromName(w) && peek() == '[') {
      pos_ = save;
      line_ = saveLine;
      NNC_ASSIGN_OR_RETURN(TypeDecl t, type());
      NNC_RETURN_IF_ERROR(expect("{"));
      NNC_ASSIGN_OR_RETURN(std::vector<Number> nums, numberList('}'));
      NNC_ASSIGN_OR_RETURN(Tensor tensor, tensorOf(t, nums, line_));
      return AttrValue(std::move(tensor));
    }
    pos_ = save;
    line_ = saveLine;
    NNC_ASSIGN_OR_RETURN(Number n, number());
    if (n.isInt) return AttrValue(n.i);
    return AttrValue(n.d);
  }

  Expected<Attributes> attributes() {
    Attributes attrs;
    if (!accept("{")) return attrs;
    if (accept("}")) return attrs;
    while (true) {
      NNC_ASSIGN_OR_RETURN(std::string n, name("an attribute name"));
      NNC_RETURN_IF_ERROR(expect("="));
      if (attrs.has(n)) return err("attribute '" + n + "' given twice");
      NNC_ASSIGN_OR_RETURN(AttrValue v, attrValue());
      attrs.set(n, std::move(v));
      if (accept("}")) return attrs;
      NNC_RETURN_IF_ERROR(expect(","));
    }
  }

  // --- values
  Expected<Value*> lookup(const std::string& n) {
    auto it = values_.find(n);
    if (it == values_.end()) return err("unknown value %" + n + " (values must be defined before use)");
    return it->second;
  }
  Status define(const std::string& n, Value* v, int line) {
    if (!values_.emplace(n, v).second) return errAt(line, "value %" + n + " defined twice");
    return Status::ok();
  }

  // --- grammar
  Status parseGraph() {
    graph_ = std::make_unique<Graph>();
    if (word() != "graph") return err("expected 'graph'");
    NNC_RETURN_IF_ERROR(expect("("));
    if (!accept(")")) {
      while (true) {
        NNC_ASSIGN_OR_RETURN(std::string n, valueName());
        NNC_RETURN_IF_ERROR(expect(":"));
        NNC_ASSIGN_OR_RETURN(TypeDecl t, type());
        Value* v = graph_->addInput(n, t.dtype, t.shape);
        NNC_RETURN_IF_ERROR(define(n, v, line_));
        if (accept(")")) break;
        NNC_RETURN_IF_ERROR(expect(","));
      }
    }
    NNC_RETURN_IF_ERROR(expect("->"));
    NNC_RETURN_IF_ERROR(expect("("));
    struct OutDecl {
      std::string name;
      TypeDecl type;
      int line;
    };
    std::vector<OutDecl> outs;
    if (!accept(")")) {
      while (true) {
        int line = line_;
        NNC_ASSIGN_OR_RETURN(std::string n, valueName());
        NNC_RETURN_IF_ERROR(expect(":"));
        NNC_ASSIGN_OR_RETURN(TypeDecl t, type());
        outs.push_back({n, t, line});
        if (accept(")")) break;
        NNC_RETURN_IF_ERROR(expect(","));
      }
    }
    NNC_RETURN_IF_ERROR(expect("{"));
    while (!accept("}")) {
      if (atEnd()) return err("expected '}' at the end of the graph");
      NNC_RETURN_IF_ERROR(parseLine());
    }
    if (!atEnd()) return err("unexpected text after the graph: " + near());
    for (const OutDecl& o : outs) {
      auto it = values_.find(o.name);
      if (it == values_.end())
        return Status::error("line " + std::to_string(o.line) + ": graph output %" + o.name + " is never defined");
      Value* v = it->second;
      if (v->dtype() != o.type.dtype || v->shape() != o.type.shape)
        return Status::error("line " + std::to_string(o.line) + ": graph output %" + o.name + " declared " +
                             std::string(dtypeName(o.type.dtype)) + o.type.shape.str() + " but is " +
                             std::string(dtypeName(v->dtype())) + v->shape().str());
      graph_->addOutput(v);
    }
    return Status::ok();
  }

  Status parseLine() {
    int line = line_;
    std::vector<std::string> outNames;
    while (true) {
      NNC_ASSIGN_OR_RETURN(std::string n, valueName());
      outNames.push_back(std::move(n));
      if (!accept(",")) break;
    }
    NNC_RETURN_IF_ERROR(expect("="));
    std::string opText = word();
    if (opText.empty()) return err("expected an operator name, got " + near());
    if (opText == "Constant") return parseConstant(outNames, line);
    auto op = opFromName(opText);
    if (!op) return err("unknown operator '" + opText + "'");

    NNC_RETURN_IF_ERROR(expect("("));
    std::vector<Value*> inputs;
    if (!accept(")")) {
      while (true) {
        if (accept("_")) {
          inputs.push_back(nullptr);
        } else {
          NNC_ASSIGN_OR_RETURN(std::string n, valueName());
          NNC_ASSIGN_OR_RETURN(Value * v, lookup(n));
          inputs.push_back(v);
        }
        if (accept(")")) break;
        NNC_RETURN_IF_ERROR(expect(","));
      }
    }
    NNC_ASSIGN_OR_RETURN(Attributes attrs, attributes());
    NNC_RETURN_IF_ERROR(expect(":"));
    std::vector<TypeDecl> types;
    while (true) {
      NNC_ASSIGN_OR_RETURN(TypeDecl t, type());
      types.push_back(std::move(t));
      if (!accept(",")) break;
    }
    if (types.size() != outNames.size())
      return errAt(line, std::to_string(outNames.size()) + " outputs but " + std::to_string(types.size()) + " types");
    std::string nodeName = outNames[0];
    if (nodeName.size() > 5 && nodeName.ends_with("_out0")) nodeName.resize(nodeName.size() - 5);
    if (accept("@")) {
      NNC_ASSIGN_OR_RETURN(std::string n, name("a node name"));
      nodeName = std::move(n);
    }

    Node* node = graph_->addNode(*op, nodeName, std::move(inputs), static_cast<int>(outNames.size()), std::move(attrs));
    for (size_t i = 0; i < outNames.size(); ++i) {
      node->output(static_cast<int>(i))->setName(outNames[i]);
      NNC_RETURN_IF_ERROR(define(outNames[i], node->output(static_cast<int>(i)), line));
    }
    if (Status s = inferNode(*node); !s) return Status::error("line " + std::to_string(line) + ": " + s.message());
    for (size_t i = 0; i < types.size(); ++i) {
      const Value* out = node->output(static_cast<int>(i));
      if (out->dtype() != types[i].dtype || out->shape() != types[i].shape)
        return Status::error("line " + std::to_string(line) + ": " + node->diagPrefix() + "output " +
                             std::to_string(i) + " declared " + std::string(dtypeName(types[i].dtype)) +
                             types[i].shape.str() + " but inference gives " + std::string(dtypeName(out->dtype())) +
                             out->shape().str());
    }
    return Status::ok();
  }

  Status parseConstant(const std::vector<std::string>& outNames, int line) {
    if (outNames.size() != 1) return errAt(line, "a constant defines exactly one value");
    NNC_RETURN_IF_ERROR(expect("("));
    NNC_RETURN_IF_ERROR(expect(")"));
    std::vector<Number> nums;
    bool hasValue = false;
    if (accept("{")) {
      std::string key = word();
      if (key != "value") return err("a constant's only attribute is 'value', got '" + key + "'");
      NNC_RETURN_IF_ERROR(expect("="));
      NNC_RETURN_IF_ERROR(expect("["));
      NNC_ASSIGN_OR_RETURN(nums, numberList(']'));
      NNC_RETURN_IF_ERROR(expect("}"));
      hasValue = true;
    }
    NNC_RETURN_IF_ERROR(expect(":"));
    NNC_ASSIGN_OR_RETURN(TypeDecl t, type());
    Tensor tensor(t.dtype, t.shape);
    if (hasValue) {
      NNC_ASSIGN_OR_RETURN(tensor, tensorOf(t, nums, line));
    }
    return define(outNames[0], graph_->addConstant(outNames[0], std::move(tensor)), line);
  }

  std::string_view text_;
  size_t pos_ = 0;
  int line_ = 1;
  std::unique_ptr<Graph> graph_;
  std::unordered_map<std::string, Value*> values_;
};

}  // namespace

Expected<std::unique_ptr<Graph>> parseGraph(std::string_view text) { return Parser(text).run(); }

}  // namespace nnc
