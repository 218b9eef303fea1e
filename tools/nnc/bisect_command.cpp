// `nnc bisect MODEL.onnx --input NAME=FILE.pb ...`: where do the numbers go wrong? Runs the compiler's
// passes and fusion (-O2 by default), then checks every fused group in execution order, each on its
// own: the group's nodes as a graph of their own, compiled the same way (no passes: the nodes are
// already final), run on the reference evaluator's values of its inputs, its outputs compared with the
// reference evaluator's (ir/reference.h: each node lowered alone and interpreted, the oracle the
// backends are tested against). Given exact inputs, a group's error is its own, never inherited from
// an earlier group. Reports the first group whose outputs leave rtol/atol — its nodes, the worst
// element, the largest absolute and relative errors — and exits 1; 0 when every group agrees.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>

#include "driver/plan_builder.h"
#include "driver/precision_choice.h"
#include "ir/reference.h"
#include "ir/subgraph.h"
#include "passes/pipeline.h"
#include "targets/target.h"
#include "tools/nnc/cli.h"

namespace nnc::cli {

namespace {

struct ErrorStats {
  int64_t mismatches = 0;
  int64_t worst = -1;  // flat index of the element furthest outside the tolerance
  double maxAbs = 0, maxRel = 0;
};

// Element-wise |got - want| against atol + rtol * |want| (integers and bools exactly; NaN only
// matches NaN, infinities only themselves).
ErrorStats measure(const Tensor& got, const Tensor& want, double rtol, double atol) {
  ErrorStats s;
  double worstExcess = -1;
  const bool exact = !isFloat(want.dtype());
  for (int64_t i = 0; i < want.numel(); ++i) {
    const double g = exact ? static_cast<double>(got.getInt(i)) : got.getDouble(i);
    const double w = exact ? static_cast<double>(want.getInt(i)) : want.getDouble(i);
    double excess;
    if (std::isnan(g) || std::isnan(w) || std::isinf(g) || std::isinf(w)) {
      excess = (std::isnan(g) && std::isnan(w)) || g == w ? -1 : INFINITY;
    } else {
      const double err = std::fabs(g - w);
      s.maxAbs = std::max(s.maxAbs, err);
      if (w != 0) s.maxRel = std::max(s.maxRel, err / std::fabs(w));
      excess = exact ? (err == 0 ? -1 : err) : err - (atol + rtol * std::fabs(w));
    }
    if (excess > 0) ++s.mismatches;
    if (excess > 0 && excess > worstExcess) {
      worstExcess = excess;
      s.worst = i;
    }
  }
  return s;
}

std::string multiIndex(const Shape& shape, int64_t flat) {
  std::vector<int64_t> index(shape.rank());
  for (int d = shape.rank() - 1; d >= 0; --d) {
    index[d] = shape[d] ? flat % shape[d] : 0;
    flat = shape[d] ? flat / shape[d] : 0;
  }
  std::string s = "[";
  for (size_t d = 0; d < index.size(); ++d) s += (d ? ", " : "") + std::to_string(index[d]);
  return s + "]";
}

std::string number(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.6g", v);
  return buf;
}

// The group's nodes, then the source (ONNX) nodes they compute (Node::origins), which a rewrite may have
// merged into nodes of other names (a recognised LayerNorm names the nodes it replaced).
std::string nodeList(const KernelGroup& group) {
  std::string s;
  for (const Node* n : group.nodes)
    s += (s.empty() ? "" : ", ") + n->name() + " (" + std::string(opName(n->op())) + ")";
  const std::vector<std::string> sources = groupSources(group);
  if (sources.empty()) return s;
  s += "; source nodes: ";
  for (size_t i = 0; i < sources.size(); ++i) s += (i ? ", " : "") + sources[i];
  return s;
}

}  // namespace

int bisectCommand(const CommonOptions& options) {
  if (options.positional.size() != 1) return fail("nnc bisect expects exactly one model file (see nnc --help)");
  // Real models' tolerance by default (float sums in another order), not the ONNX node tests'.
  CommonOptions o = options;
  if (!o.rtolGiven) o.rtol = 1e-4;
  if (!o.atolGiven) o.atol = 1e-5;
  const std::string& path = o.positional[0];
  // The given inputs, also offered to the import where it needs a constant (a Reshape's shape).
  onnx::ImportOptions import = o.import;
  std::map<std::string, Tensor> given;
  for (const auto& [name, file] : o.inputs) {
    Expected<Tensor> t = onnx::readTensorFile(file);
    if (!t) return fail(t.status().message());
    given[name] = *t;
    import.bindIfNeeded[name] = *t;
  }
  Expected<std::unique_ptr<Graph>> imported = onnx::importModelFile(path, import);
  if (!imported) return fail(imported.status().message());
  Graph& graph = **imported;
  std::vector<Tensor> inputs;
  for (const Value* v : graph.inputs()) {
    auto it = given.find(v->name());
    if (it == given.end()) return fail("no --input given for model input '" + v->name() + "'");
    if (it->second.dtype() != v->dtype() || it->second.shape() != v->shape())
      return fail("--input " + v->name() + ": " + std::string(dtypeName(it->second.dtype())) +
                  it->second.shape().str() + ", the model takes " + std::string(dtypeName(v->dtype())) +
                  v->shape().str());
    inputs.push_back(it->second);
  }

  // The compiler's passes and partition, as `nnc MODEL.onnx -O<level>` makes them.
  const CompileOptions& compile = o.compile;
  Expected<std::unique_ptr<Target>> target = makeTarget(compile);
  if (!target) return fail(target.status().message());
  std::vector<std::string> outputNames;
  for (const Value* v : graph.outputs()) outputNames.push_back(v->name());
  if (Status s = runPipeline(graph, compile); !s) return fail(path + ": " + s.message());
  LoweringOptions lowering;
  lowering.fuse = compile.optLevel > 0;
  Expected<LoweredProgram> program = lowerProgram(graph, outputNames, **target, lowering);
  if (!program) return fail(path + ": " + program.status().message());

  // Every value by the reference evaluator.
  std::map<const Value*, Tensor> reference;
  for (size_t i = 0; i < inputs.size(); ++i) reference[graph.inputs()[i]] = inputs[i];
  auto valueOf = [&](const Value* v) { return v->isConstant() ? v->constant() : reference.at(v); };
  for (const Node* n : graph.nodes()) {
    std::vector<Tensor> args;
    for (const Value* v : n->inputs()) args.push_back(v ? valueOf(v) : Tensor());
    Expected<std::vector<Tensor>> outs = evaluateNode(*n, args);
    if (!outs) return fail(path + ": the reference evaluator failed: " + outs.status().message());
    for (int i = 0; i < n->numOutputs(); ++i) reference[n->output(i)] = (*outs)[i];
  }

  // Each group compiled alone, without passes (materialize-outputs aside: the nodes are final).
  // --precision=auto: each group's error in bf16 (what auto's calibration measures, against the
  // reference evaluator here).
  const CompileOptions groupOptions =
      groupCompileOptions(compile, compile.precision == Precision::Auto ? Precision::BF16 : compile.precision);
  const std::vector<KernelGroup>& groups = program->groups;
  std::printf(
      "%s: %zu kernel groups at -O%d (target %s), each run on the reference evaluator's inputs and "
      "compared with its outputs (rtol %g, atol %g)\n",
      path.c_str(), groups.size(), compile.optLevel, compile.target.c_str(), o.rtol, o.atol);
  for (size_t g = 0; g < groups.size(); ++g) {
    const KernelGroup& group = groups[g];
    if (group.outputs.empty()) continue;
    std::vector<const Value*> originals;
    std::unique_ptr<Graph> sub = extractSubgraph({group.nodes.begin(), group.nodes.end()},
                                                 {group.outputs.begin(), group.outputs.end()}, &originals);
    std::vector<Tensor> subInputs;
    for (const Value* v : originals) subInputs.push_back(valueOf(v));
    Expected<std::unique_ptr<CompiledModel>> compiled = compileJit(*sub, groupOptions);
    if (!compiled)
      return fail(path + ": group " + std::to_string(g) + " (" + nodeList(group) + "): " + compiled.status().message());
    Expected<std::vector<Tensor>> got = (*compiled)->run(subInputs);
    if (!got)
      return fail(path + ": group " + std::to_string(g) + " (" + nodeList(group) + "): " + got.status().message());
    double maxAbs = 0, maxRel = 0;
    for (size_t i = 0; i < group.outputs.size(); ++i) {
      const Value* v = group.outputs[i];
      const Tensor& want = reference.at(v);
      const ErrorStats s = measure((*got)[i], want, o.rtol, o.atol);
      maxAbs = std::max(maxAbs, s.maxAbs);
      maxRel = std::max(maxRel, s.maxRel);
      if (s.mismatches == 0) continue;
      const bool exact = !isFloat(want.dtype());
      auto at = [&](const Tensor& t) {
        return exact ? std::to_string(t.getInt(s.worst)) : number(t.getDouble(s.worst));
      };
      std::printf(
          "  group %zu FAIL: output '%s' (%s%s): %lld of %lld elements out of tolerance; the worst at %s: "
          "got %s, want %s; max abs error %s, max rel error %s\n    nodes: %s\n",
          g, v->name().c_str(), std::string(dtypeName(want.dtype())).c_str(), want.shape().str().c_str(),
          static_cast<long long>(s.mismatches), static_cast<long long>(want.numel()),
          multiIndex(want.shape(), s.worst).c_str(), at((*got)[i]).c_str(), at(want).c_str(), number(s.maxAbs).c_str(),
          number(s.maxRel).c_str(), nodeList(group).c_str());
      std::printf("first group out of tolerance: %zu of %zu\n", g, groups.size());
      return 1;
    }
    std::printf("  group %zu ok (max abs error %s, max rel error %s): %s\n", g, number(maxAbs).c_str(),
                number(maxRel).c_str(), nodeList(group).c_str());
  }
  std::printf("all %zu groups agree with the reference evaluator\n", groups.size());
  return 0;
}

}  // namespace nnc::cli
