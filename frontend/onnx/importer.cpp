// The model-level part of the ONNX importer: parse, opset check, graph inputs (with --shape and
// --bind), initializers, node order (sorted when the file is not), per-node translation through the
// handler table, and graph outputs that keep their ONNX names.
#include "frontend/onnx/importer.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <queue>
#include <set>
#include <string_view>
#include <utility>
#include <vector>

#include "frontend/onnx/node_context.h"

namespace nnc::onnx {

namespace {

// Protobuf's default recursion limit: it refuses messages nested deeper and says only that parsing
// failed, so nestingExceeds() below tells the user when that was the reason.
constexpr int kProtobufNestingLimit = 100;

bool readVarint(std::string_view b, size_t& pos, size_t end, uint64_t& v) {
  v = 0;
  for (int shift = 0; shift < 64 && pos < end; shift += 7) {
    const uint8_t byte = static_cast<uint8_t>(b[pos++]);
    v |= uint64_t(byte & 0x7f) << shift;
    if (!(byte & 0x80)) return true;
  }
  return false;
}

// Reads one field header at pos (and skips a scalar value); for a length-delimited field sets
// [payload, payloadEnd). False on malformed or group-encoded data (onnx.proto has no groups).
bool readField(std::string_view b, size_t& pos, size_t end, size_t& payload, size_t& payloadEnd) {
  uint64_t tag = 0, value = 0;
  payload = payloadEnd = 0;
  if (!readVarint(b, pos, end, tag) || (tag >> 3) == 0) return false;
  switch (tag & 7) {
    case 0: return readVarint(b, pos, end, value);
    case 1: return end - pos >= 8 ? (pos += 8, true) : false;
    case 5: return end - pos >= 4 ? (pos += 4, true) : false;
    case 2:
      if (!readVarint(b, pos, end, value) || value > end - pos) return false;
      payload = pos;
      payloadEnd = pos += static_cast<size_t>(value);
      return true;
    default: return false;
  }
}

// Whether length-delimited fields in `b` nest more than `limit` levels below the top message,
// counting only payloads that are themselves well-formed field sequences (what a nested message
// looks like; names and raw data rarely do). Iterative: a hostile file cannot overflow the stack.
bool nestingExceeds(std::string_view b, int limit) {
  auto wellFormed = [&](size_t pos, size_t end) {
    size_t p0, p1;
    while (pos < end)
      if (!readField(b, pos, end, p0, p1)) return false;
    return true;
  };
  struct Span {
    size_t pos, end;
  };
  std::vector<Span> stack{{0, b.size()}};
  while (!stack.empty()) {
    Span& top = stack.back();
    size_t payload, payloadEnd;
    if (top.pos >= top.end || !readField(b, top.pos, top.end, payload, payloadEnd)) {
      stack.pop_back();
      continue;
    }
    if (payloadEnd > payload && wellFormed(payload, payloadEnd)) {
      stack.push_back({payload, payloadEnd});
      if (stack.size() > static_cast<size_t>(limit) + 1) return true;
    }
  }
  return false;
}

std::string nodeLabel(const ::onnx::NodeProto& node) {
  return "node '" + sourceName(node) + "' (" + node.op_type() + ")";
}

class Importer {
 public:
  Importer(const ImportOptions& options, std::string baseDir, Graph& graph)
      : options_(options), baseDir_(std::move(baseDir)), builder_(graph) {}

  // After a failure: the graph input that, bound to a constant, would get past it (or empty).
  const std::string& neededBinding() const { return neededBinding_; }

  Status run(const ::onnx::ModelProto& model) {
    if (!model.has_ir_version()) return Status::error("not an ONNX model (no ir_version)");
    if (!model.has_graph()) return Status::error("model has no graph");
    NNC_RETURN_IF_ERROR(readOpset(model));
    for (const auto& f : model.functions()) localFunctions_.insert({f.domain(), f.name()});
    const ::onnx::GraphProto& g = model.graph();
    if (g.sparse_initializer_size() > 0)
      return Status::error("sparse initializer '" + g.sparse_initializer(0).values().name() + "' is unsupported");
    NNC_RETURN_IF_ERROR(importInputsAndInitializers(g));
    NNC_ASSIGN_OR_RETURN(std::vector<int> order, nodeOrder(g));
    for (int i : order) NNC_RETURN_IF_ERROR(importNode(g.node(i)));
    return importOutputs(g);
  }

 private:
  // The default domain's opset, checked against kMaxSupportedOpset. Other imported domains are not
  // checked here: exporters declare them by habit (tf2onnx's ai.onnx.ml, paddle2onnx's Paddle) with no
  // node using them, and a node of a domain nnc lacks is refused by name when it is imported.
  Status readOpset(const ::onnx::ModelProto& model) {
    const std::string supported =
        "nnc implements the default ONNX domain (ai.onnx), opsets 1 to " + std::to_string(kMaxSupportedOpset);
    const std::string override = "pass --allow-unsupported-opset to compile it anyway";
    for (const auto& imp : model.opset_import()) {
      if (imp.domain() != "" && imp.domain() != "ai.onnx") continue;
      if (imp.version() < 1) return Status::error("invalid opset version " + std::to_string(imp.version()));
      if (imp.version() > kMaxSupportedOpset && !options_.allowUnsupportedOpset)
        return Status::error("the model's default-domain opset " + std::to_string(imp.version()) +
                             " is newer than nnc supports: " + supported + "; re-export it for opset " +
                             std::to_string(kMaxSupportedOpset) + " or older, or " + override +
                             " (an operator whose definition changed after opset " +
                             std::to_string(kMaxSupportedOpset) + " then gets the older definition)");
      opset_ = imp.version();
    }
    return Status::ok();
  }

  void define(const std::string& name, Value* v) {
    values_[name] = v;
    if (named_.insert(v).second) v->setName(name);
  }

  Expected<Shape> inputShape(const ::onnx::ValueInfoProto& vi) {
    const std::string& name = vi.name();
    const auto& tt = vi.type().tensor_type();
    auto override = options_.shapeOverrides.find(name);
    std::string hint = "; give --shape " + name + "=...";
    if (!tt.has_shape()) {
      if (override == options_.shapeOverrides.end()) return Status::error("input '" + name + "' has no shape" + hint);
      return override->second;
    }
    std::vector<int64_t> dims;
    std::string unknown;
    for (int i = 0; i < tt.shape().dim_size(); ++i) {
      const auto& d = tt.shape().dim(i);
      if (d.has_dim_value() && d.dim_value() >= 0) {
        dims.push_back(d.dim_value());
      } else if (d.has_dim_value()) {
        // Older exporters write -1 for a dynamic dim: unknown, like a symbolic one, until --shape says.
        if (unknown.empty()) unknown = "negative dim " + std::to_string(d.dim_value());
        dims.push_back(-1);
      } else {
        if (unknown.empty())
          unknown = d.has_dim_param() && !d.dim_param().empty() ? "symbolic dim '" + d.dim_param() + "'"
                                                                : "unknown dim " + std::to_string(i);
        dims.push_back(-1);
      }
    }
    if (override != options_.shapeOverrides.end()) {
      if (override->second.rank() != static_cast<int>(dims.size()))
        return Status::error("--shape " + name + "=" + override->second.str() + " has rank " +
                             std::to_string(override->second.rank()) + ", but the model declares rank " +
                             std::to_string(dims.size()));
      return override->second;
    }
    if (!unknown.empty()) return Status::error("input '" + name + "' has " + unknown + hint);
    return Shape(dims);
  }

  Status bindInput(const ::onnx::ValueInfoProto& vi, const Tensor& t) {
    const std::string& name = vi.name();
    const auto& tt = vi.type().tensor_type();
    std::optional<DType> declared = dtypeFromOnnx(tt.elem_type());
    // The ONNX test data stores bf16 tensors as their uint16 bit patterns.
    if (declared == DType::BF16 && t.dtype() == DType::U16) {
      Tensor bits = Tensor::fromBytes(DType::BF16, t.shape(), t.data(), t.byteSize());
      return bindInput(vi, bits);
    }
    if (declared && *declared != t.dtype())
      return Status::error("--bind " + name + ": tensor has type " + std::string(dtypeName(t.dtype())) +
                           ", but the input is " + std::string(dtypeName(*declared)));
    if (tt.has_shape()) {
      bool ok = tt.shape().dim_size() == t.shape().rank();
      for (int i = 0; ok && i < tt.shape().dim_size(); ++i)
        if (tt.shape().dim(i).has_dim_value() && tt.shape().dim(i).dim_value() != t.shape()[i]) ok = false;
      if (!ok)
        return Status::error("--bind " + name + ": tensor has shape " + t.shape().str() +
                             ", which does not match the input's declared shape");
    }
    define(name, builder_.constant(t, name));
    return Status::ok();
  }

  Status importInputsAndInitializers(const ::onnx::GraphProto& g) {
    std::map<std::string, const ::onnx::TensorProto*> inits;
    for (const auto& t : g.initializer()) {
      if (!inits.emplace(t.name(), &t).second) return Status::error("duplicate initializer '" + t.name() + "'");
    }
    std::set<std::string> inputNames;
    for (const auto& vi : g.input())
      if (!inputNames.insert(vi.name()).second) return Status::error("duplicate graph input '" + vi.name() + "'");
    for (const auto& [name, shape] : options_.shapeOverrides)
      if (!inputNames.count(name)) return Status::error("--shape names '" + name + "', which is not a graph input");
    for (const auto& [name, t] : options_.bindings)
      if (!inputNames.count(name)) return Status::error("--bind names '" + name + "', which is not a graph input");
    for (const auto& vi : g.input()) {
      const std::string& name = vi.name();
      if (auto bound = options_.bindings.find(name); bound != options_.bindings.end()) {
        NNC_RETURN_IF_ERROR(bindInput(vi, bound->second));
        continue;
      }
      if (inits.count(name)) {
        if (options_.shapeOverrides.count(name))
          return Status::error("--shape names '" + name + "', which is an initializer, not a graph input");
        continue;  // an input with a default value: kept as the constant
      }
      if (!vi.type().has_tensor_type())
        return Status::error("input '" + name + "' is not a tensor (sequences, maps and optionals are unsupported)");
      std::optional<DType> dtype = dtypeFromOnnx(vi.type().tensor_type().elem_type());
      if (!dtype) {
        int t = vi.type().tensor_type().elem_type();
        std::string tn = ::onnx::TensorProto_DataType_IsValid(t)
                             ? ::onnx::TensorProto_DataType_Name(static_cast<::onnx::TensorProto_DataType>(t))
                             : std::to_string(t);
        return Status::error("input '" + name + "' has unsupported element type " + tn);
      }
      NNC_ASSIGN_OR_RETURN(Shape shape, inputShape(vi));
      if (!shape.checkedNumel())
        return Status::error("input '" + name + "' has an invalid or too large shape " + shape.str());
      define(name, builder_.input(name, *dtype, shape));
    }
    for (const auto& [name, proto] : inits) {
      if (options_.bindings.count(name) && inputNames.count(name)) continue;
      NNC_ASSIGN_OR_RETURN(Tensor t, tensorFromProto(*proto, baseDir_));
      define(name, builder_.constant(std::move(t), name));
    }
    if (!builder_.status()) return builder_.status();
    return Status::ok();
  }

  // The order to import nodes in: file order when it is topological (the ONNX rule), otherwise a
  // stable topological sort. Names a node on a cycle, an undefined input, a duplicate output.
  Expected<std::vector<int>> nodeOrder(const ::onnx::GraphProto& g) {
    int n = g.node_size();
    std::map<std::string, int> producer;
    for (int i = 0; i < n; ++i) {
      for (const std::string& out : g.node(i).output()) {
        if (out.empty()) continue;
        if (values_.count(out))
          return Status::error(nodeLabel(g.node(i)) + ": output '" + out + "' redefines a graph input or initializer");
        auto [it, inserted] = producer.emplace(out, i);
        if (!inserted)
          return Status::error("duplicate output name '" + out + "' (" + nodeLabel(g.node(it->second)) + " and " +
                               nodeLabel(g.node(i)) + ")");
      }
    }
    std::vector<std::vector<int>> deps(n), users(n);
    bool sorted = true;
    for (int i = 0; i < n; ++i) {
      for (const std::string& in : g.node(i).input()) {
        if (in.empty() || values_.count(in)) continue;
        auto it = producer.find(in);
        if (it == producer.end())
          return Status::error(nodeLabel(g.node(i)) + ": input '" + in +
                               "' is not defined by any node, graph input or initializer");
        deps[i].push_back(it->second);
        users[it->second].push_back(i);
        if (it->second >= i) sorted = false;
      }
    }
    std::vector<int> order;
    order.reserve(n);
    if (sorted) {
      for (int i = 0; i < n; ++i) order.push_back(i);
      return order;
    }
    // Kahn's algorithm, lowest file index first, so the result stays close to the file order.
    std::vector<int> pending(n);
    std::priority_queue<int, std::vector<int>, std::greater<int>> ready;
    for (int i = 0; i < n; ++i) {
      pending[i] = static_cast<int>(deps[i].size());
      if (pending[i] == 0) ready.push(i);
    }
    while (!ready.empty()) {
      int i = ready.top();
      ready.pop();
      order.push_back(i);
      for (int u : users[i])
        if (--pending[u] == 0) ready.push(u);
    }
    if (static_cast<int>(order.size()) == n) return order;
    // Walk back through unfinished producers; the first node seen twice lies on a cycle.
    int cur = 0;
    while (pending[cur] == 0) ++cur;
    std::vector<bool> seen(n, false);
    while (!seen[cur]) {
      seen[cur] = true;
      for (int d : deps[cur])
        if (pending[d] > 0) {
          cur = d;
          break;
        }
    }
    return Status::error("graph has a cycle through " + nodeLabel(g.node(cur)));
  }

  Status importNode(const ::onnx::NodeProto& node) {
    const bool defaultDomain = node.domain() == "" || node.domain() == "ai.onnx";
    // Model-local functions (ModelProto.functions) are not expanded, so a call to one, recursive or
    // not, is refused by name; a built-in op of the same name still imports as the op.
    if (localFunctions_.count({node.domain(), node.op_type()}) &&
        !(defaultDomain && (findHandler(node.op_type()) || opFromName(node.op_type()))))
      return Status::error(nodeLabel(node) + ": calls model-local function '" +
                           (node.domain().empty() ? "" : node.domain() + ".") + node.op_type() +
                           "'; model-local functions are unsupported");
    if (!defaultDomain)
      return Status::error(nodeLabel(node) + ": unsupported operator domain '" + node.domain() +
                           "'; nnc implements the default ONNX domain (ai.onnx)");
    // Checked here, not up front: a model may use only other domains (and is rejected for that).
    if (opset_ == 0)
      return Status::error("model declares no opset for the default ONNX domain (opset_import), which " +
                           nodeLabel(node) + " uses");
    // Provenance: the nodes built for this one carry its name; if none is left, it was folded (or elided).
    Provenance& provenance = builder_.graph().provenance();
    const std::string source = sourceName(node);
    provenance.sourceNodes.push_back(source);
    if (node.op_type() == "If") {
      provenance.elided.push_back(source);  // the taken branch's nodes are named themselves
      return importIf(node);
    }
    const OpHandler* handler = findHandler(node.op_type());
    const std::optional<OpKind> kind = opFromName(node.op_type());
    // nnc-internal ops (Im2Col) are made by passes, never imported.
    if (!handler && (!kind || opDef(*kind).internal))
      return Status::error(nodeLabel(node) + ": unsupported operator " + node.op_type());
    std::vector<Value*> inputs;
    for (const std::string& in : node.input()) {
      if (in.empty()) {
        inputs.push_back(nullptr);
        continue;
      }
      auto it = values_.find(in);
      NNC_CHECK(it != values_.end(), "node order should have defined input '" + in + "'");
      inputs.push_back(it->second);
    }
    while (!inputs.empty() && !inputs.back()) inputs.pop_back();
    Attributes attrs;
    for (const auto& a : node.attribute()) {
      if (attrs.has(a.name())) return Status::error(nodeLabel(node) + ": duplicate attribute '" + a.name() + "'");
      auto v = convertAttribute(a, baseDir_);
      if (!v) return v.status().withContext(nodeLabel(node) + ": ");
      attrs.set(a.name(), std::move(v).value());
    }
    NodeContext ctx(node, opset_, builder_, std::move(inputs), std::move(attrs));
    builder_.setOrigin(source);
    const int64_t nodesBefore = builder_.nodesKept();
    std::vector<Value*> outs = handler ? (*handler)(ctx) : translateGeneric(ctx);
    builder_.setOrigin("");
    if (ctx.failed()) {
      neededBinding_ = ctx.neededBinding();
      return ctx.status();
    }
    if (!builder_.status()) {
      const std::string& msg = builder_.status().message();
      return Status::error(msg.rfind("node '", 0) == 0 ? msg : ctx.prefix() + msg);
    }
    for (int i = 0; i < node.output_size(); ++i) {
      const std::string& out = node.output(i);
      if (out.empty()) continue;
      Value* v = i < static_cast<int>(outs.size()) ? outs[i] : nullptr;
      if (!v)
        return Status::error(ctx.prefix() + "output '" + out + "' (output " + std::to_string(i) + ") is unsupported");
      define(out, v);
    }
    if (builder_.nodesKept() == nodesBefore) {
      const bool constant = std::all_of(outs.begin(), outs.end(), [](const Value* v) { return !v || v->isConstant(); });
      (constant ? provenance.folded : provenance.elided).push_back(source);
    }
    return Status::ok();
  }

  // If with a compile-time condition (typically a rank or size test in an expanded function body):
  // the taken branch's nodes are imported inline, seeing the outer scope, and its outputs become
  // the If's. Names the branch defines are dropped again afterwards.
  Status importIf(const ::onnx::NodeProto& node) {
    auto it = node.input_size() > 0 ? values_.find(node.input(0)) : values_.end();
    if (it == values_.end()) return Status::error(nodeLabel(node) + ": missing input 'cond'");
    NodeContext ctx(node, opset_, builder_, {it->second}, {});
    const Tensor* cond = ctx.constantInput(0, "cond");
    if (!cond) {
      neededBinding_ = ctx.neededBinding();
      return ctx.status();
    }
    // The branch is imported by recursing into it: bound the depth (kMaxSubgraphDepth).
    if (subgraphDepth_ >= kMaxSubgraphDepth)
      return Status::error(ctx.prefix() + "subgraphs nested more than " + std::to_string(kMaxSubgraphDepth) +
                           " levels deep (an If inside the branch of an If ...) are unsupported");
    if (cond->numel() != 1)
      return Status::error(ctx.prefix() + "cond has shape " + cond->shape().str() + ", expected one element");
    const std::string branchName = cond->getInt(0) != 0 ? "then_branch" : "else_branch";
    const ::onnx::GraphProto* branch = nullptr;
    for (const auto& a : node.attribute())
      if (a.name() == branchName && a.has_g()) branch = &a.g();
    if (!branch) return Status::error(ctx.prefix() + "missing graph attribute '" + branchName + "'");
    if (branch->initializer_size() > 0 || branch->sparse_initializer_size() > 0)
      return Status::error(ctx.prefix() + branchName + " has initializers, which are unsupported");
    if (branch->output_size() < node.output_size())
      return Status::error(ctx.prefix() + branchName + " has " + std::to_string(branch->output_size()) +
                           " outputs, expected " + std::to_string(node.output_size()));
    std::map<std::string, Value*> outer = values_;
    NNC_ASSIGN_OR_RETURN(std::vector<int> order, nodeOrder(*branch));
    ++subgraphDepth_;
    for (int i : order) NNC_RETURN_IF_ERROR(importNode(branch->node(i)));
    --subgraphDepth_;
    std::vector<Value*> outs;
    for (const auto& vi : branch->output()) {
      auto found = values_.find(vi.name());
      if (found == values_.end())
        return Status::error(ctx.prefix() + branchName + " output '" + vi.name() + "' is not defined");
      outs.push_back(found->second);
    }
    values_ = std::move(outer);
    for (int i = 0; i < node.output_size(); ++i) {
      if (node.output(i).empty()) continue;
      // A value named inside the branch takes the If's output name, which outlives the branch.
      if (!values_.count(outs[i]->name())) outs[i]->setName(node.output(i));
      define(node.output(i), outs[i]);
    }
    return Status::ok();
  }

  Status importOutputs(const ::onnx::GraphProto& g) {
    std::set<Value*> used;
    std::set<std::string> listed;
    for (const auto& vi : g.output()) {
      // Outputs are bound by name (the C ABI, nnc run): a name listed twice would be two outputs
      // that cannot be told apart.
      if (!listed.insert(vi.name()).second) return Status::error("graph output '" + vi.name() + "' is listed twice");
      auto it = values_.find(vi.name());
      if (it == values_.end())
        return Status::error("graph output '" + vi.name() + "' is not produced by any node, input or initializer");
      Value* v = it->second;
      // A value has one name; an output that aliases another name (Identity, Dropout, two output
      // names for one value) gets its own copy so the graph output keeps its ONNX name.
      if (v->name() != vi.name() || used.count(v)) {
        v = builder_.op(OpKind::Identity, {v}, {}, vi.name());
        if (!builder_.status()) return builder_.status();
        v->setName(vi.name());
      }
      used.insert(v);
      builder_.output(v);
    }
    return builder_.status();
  }

  const ImportOptions& options_;
  std::string baseDir_;
  GraphBuilder builder_;
  int64_t opset_ = 0;
  std::map<std::string, Value*> values_;  // ONNX value name -> IR value
  std::set<Value*> named_;                // values that already carry an ONNX name
  std::string neededBinding_;
  std::set<std::pair<std::string, std::string>> localFunctions_;  // (domain, name) of ModelProto.functions
  int subgraphDepth_ = 0;                                         // If branches being imported
};

}  // namespace

Expected<std::unique_ptr<Graph>> importModelBytes(const std::string& bytes, const std::string& displayName,
                                                  const std::string& baseDir, const ImportOptions& options) {
  std::string prefix = displayName + ": ";
  if (bytes.size() > static_cast<size_t>(kMaxModelBytes))
    return Status::error(prefix + "model is " + std::to_string(bytes.size()) +
                         " bytes; protobuf limits a model to 2 GiB - 1 (keep the weights in external data files)");
  ::onnx::ModelProto model;
  if (!model.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) {
    if (nestingExceeds(bytes, kProtobufNestingLimit))
      return Status::error(prefix + "not a valid ONNX model (protobuf parse failed: messages are nested more than " +
                           std::to_string(kProtobufNestingLimit) +
                           " levels deep, protobuf's limit; e.g. If subgraphs inside subgraphs)");
    return Status::error(prefix + "not a valid ONNX model (protobuf parse failed)");
  }
  // Each failure that an offered value can fix binds that input and starts over (a handful of
  // passes at most: one per such input).
  ImportOptions effective = options;
  while (true) {
    auto graph = std::make_unique<Graph>();
    Importer importer(effective, baseDir, *graph);
    Status st = importer.run(model);
    if (st) return graph;
    const std::string& need = importer.neededBinding();
    auto offered = effective.bindIfNeeded.find(need);
    if (need.empty() || offered == effective.bindIfNeeded.end() || effective.bindings.count(need))
      return st.withContext(prefix);
    effective.bindings[need] = offered->second;
  }
}

Expected<std::unique_ptr<Graph>> importModelFile(const std::string& path, const ImportOptions& options) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) return Status::error(path + ": is a directory, not a model file");
  if (!std::filesystem::is_regular_file(path, ec)) return Status::error(path + ": no such model file");
  uint64_t size = std::filesystem::file_size(path, ec);
  if (ec) return Status::error(path + ": cannot read: " + ec.message());
  if (size > static_cast<uint64_t>(kMaxModelBytes))
    return Status::error(path + ": file is " + std::to_string(size) +
                         " bytes; protobuf limits a model to 2 GiB - 1 (keep the weights in external data files)");
  std::string bytes(size, '\0');
  std::ifstream in(path, std::ios::binary);
  if (size > 0) in.read(bytes.data(), static_cast<std::streamsize>(size));
  if (!in) return Status::error(path + ": cannot read");
  std::string dir = std::filesystem::path(path).parent_path().string();
  if (dir.empty()) dir = ".";
  return importModelBytes(bytes, path, dir, options);
}

}  // namespace nnc::onnx
