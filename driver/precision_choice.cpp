#include "driver/precision_choice.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <random>

#include "ir/reference.h"
#include "ir/subgraph.h"
#include "passes/pipeline.h"

namespace nnc {

namespace {

// max |got - want| / max |want| over one float tensor; exact agreement for other dtypes (0 or inf).
double tensorError(const Tensor& got, const Tensor& want) {
  if (got.shape() != want.shape()) return INFINITY;
  if (!isFloat(want.dtype())) {
    for (int64_t i = 0; i < want.numel(); ++i)
      if (got.getInt(i) != want.getInt(i)) return INFINITY;
    return 0;
  }
  double maxDiff = 0, maxWant = 0;
  for (int64_t i = 0; i < want.numel(); ++i) {
    const double g = got.getDouble(i), w = want.getDouble(i);
    if (std::isnan(w) || std::isinf(w) || std::isnan(g) || std::isinf(g)) {
      if (!(std::isnan(g) && std::isnan(w)) && g != w) return INFINITY;
      continue;
    }
    maxDiff = std::max(maxDiff, std::fabs(g - w));
    maxWant = std::max(maxWant, std::fabs(w));
  }
  return maxWant > 0 ? maxDiff / maxWant : maxDiff;
}

// The groups of `program` that compute in bf16: those with a kernel whose contraction has bf16 operands.
std::vector<size_t> bf16Groups(const LoweredProgram& program) {
  std::set<std::string> bf16Kernels;
  for (const kir::Kernel& k : program.kernels)
    if (const auto* c = k.as<kir::Contraction>(); c && c->operands == DType::BF16) bf16Kernels.insert(k.name);
  std::set<size_t> groups;
  for (size_t s = 0; s < program.plan.steps.size(); ++s)
    if (program.plan.steps[s].kind == rt::StepKind::Kernel && bf16Kernels.count(program.plan.steps[s].name))
      groups.insert(program.stepGroup[s]);
  return {groups.begin(), groups.end()};
}

// Each group's contraction FLOPs.
std::map<size_t, double> groupFlops(const LoweredProgram& program) {
  std::map<std::string, double> byKernel;
  for (const kir::Kernel& k : program.kernels) byKernel[k.name] = k.flops();
  std::map<size_t, double> flops;
  for (size_t s = 0; s < program.plan.steps.size(); ++s)
    if (auto it = byKernel.find(program.plan.steps[s].name); it != byKernel.end())
      flops[program.stepGroup[s]] += it->second;
  return flops;
}

std::string groupName(const KernelGroup& group) {
  return "group of node '" + group.nodes.front()->name() + "' (" + std::string(opName(group.nodes.front()->op())) + ")";
}

// A group that is no candidate, of at most this many loop points, gets its f32 outputs from the
// reference evaluator, node by node: about what compiling it alone would cost (~0.1 s).
constexpr int64_t kMaxReferenceGroupWork = int64_t{1} << 22;

// Every candidate group's own bf16 error: the groups run one by one in f32 on the f32 values of their
// inputs, compiled alone, or (small groups that are no candidate; values no group computes: views,
// aliases) by the reference evaluator; the candidates also in bf16.
Expected<std::map<size_t, double>> groupErrors(const Graph& graph, const LoweredProgram& program,
                                               const std::vector<size_t>& candidates, const std::vector<Tensor>& inputs,
                                               const CompileOptions& options, PrecisionChoice& cost) {
  const auto started = std::chrono::steady_clock::now();
  std::map<const Value*, Tensor> values;
  for (size_t i = 0; i < inputs.size(); ++i) values[graph.inputs()[i]] = inputs[i];
  std::function<Expected<Tensor>(const Value*)> valueOf = [&](const Value* v) -> Expected<Tensor> {
    if (v->isConstant()) return v->constant();
    if (auto it = values.find(v); it != values.end()) return it->second;
    const Node* n = v->producer();
    if (!n) return Status::error("calibration: value '" + v->name() + "' has no producer");
    std::vector<Tensor> args;
    for (const Value* in : n->inputs()) {
      if (!in) {
        args.emplace_back();
        continue;
      }
      NNC_ASSIGN_OR_RETURN(Tensor t, valueOf(in));
      args.push_back(std::move(t));
    }
    NNC_ASSIGN_OR_RETURN(std::vector<Tensor> outs, evaluateNode(*n, args));
    for (int i = 0; i < n->numOutputs(); ++i) values[n->output(i)] = outs[i];
    return values.at(v);
  };
  const std::set<size_t> isCandidate(candidates.begin(), candidates.end());
  const CompileOptions f32 = groupCompileOptions(options, Precision::F32),
                       bf16 = groupCompileOptions(options, Precision::BF16);
  std::map<size_t, double> errors;
  for (size_t g = 0; g < program.groups.size(); ++g) {
    const KernelGroup& group = program.groups[g];
    if (group.outputs.empty()) continue;
    // Groups before the last candidate only: later values feed no candidate.
    if (g > candidates.back()) break;
    if (!isCandidate.count(g)) {
      int64_t work = 0;
      for (const Node* n : group.nodes) {
        Expected<int64_t> points = loopPoints(*n);
        work += points ? *points : kMaxReferenceGroupWork + 1;
      }
      if (work <= kMaxReferenceGroupWork) {
        for (const Value* v : group.outputs) NNC_RETURN_IF_ERROR(valueOf(v).status());
        continue;
      }
    }
    std::vector<const Value*> originals;
    std::unique_ptr<Graph> sub = extractSubgraph({group.nodes.begin(), group.nodes.end()},
                                                 {group.outputs.begin(), group.outputs.end()}, &originals);
    std::vector<Tensor> subInputs;
    for (const Value* v : originals) {
      NNC_ASSIGN_OR_RETURN(Tensor t, valueOf(v));
      subInputs.push_back(std::move(t));
    }
    auto runAs = [&](const CompileOptions& o) -> Expected<std::vector<Tensor>> {
      std::unique_ptr<Graph> copy = sub->clone();  // (compiling rewrites the graph)
      ++cost.groupCompiles;
      NNC_ASSIGN_OR_RETURN(std::unique_ptr<CompiledModel> model, compileJit(*copy, o));
      return model->run(subInputs);
    };
    Expected<std::vector<Tensor>> want = runAs(f32);
    if (!want) return Status::error("calibration: " + groupName(group) + " in f32: " + want.status().message());
    for (size_t i = 0; i < group.outputs.size(); ++i) values[group.outputs[i]] = (*want)[i];
    if (!isCandidate.count(g)) continue;
    Expected<std::vector<Tensor>> got = runAs(bf16);
    if (!got) return Status::error("calibration: " + groupName(group) + " in bf16: " + got.status().message());
    errors[g] = relativeError(*got, *want);
  }
  cost.groupSeconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  return errors;
}

std::set<const Node*> nodesOf(const LoweredProgram& program, const std::vector<size_t>& groups) {
  std::set<const Node*> nodes;
  for (size_t g : groups) nodes.insert(program.groups[g].nodes.begin(), program.groups[g].nodes.end());
  return nodes;
}

}  // namespace

CompileOptions groupCompileOptions(const CompileOptions& model, Precision precision) {
  CompileOptions o = model;
  o.precision = precision;
  o.calibrationInputs.clear();
  o.measureGroupErrors = false;
  o.printAfterAll = false;
  o.timePasses = false;
  o.disabledPasses.clear();
  for (const PassListing& p : allPasses())
    if (p.info.name != "materialize-outputs") o.disabledPasses.push_back(p.info.name);
  return o;
}

double relativeError(const std::vector<Tensor>& got, const std::vector<Tensor>& want) {
  if (got.size() != want.size()) return INFINITY;
  double worst = 0;
  for (size_t i = 0; i < want.size(); ++i) worst = std::max(worst, tensorError(got[i], want[i]));
  return worst;
}

Expected<std::vector<Tensor>> calibrationInputs(const Graph& graph, const CompileOptions& options) {
  std::vector<Tensor> inputs;
  std::mt19937 rng(20261203);
  std::normal_distribution<double> normal(0.0, 1.0);
  std::set<std::string> used;
  for (const Value* v : graph.inputs()) {
    auto given = options.calibrationInputs.find(v->name());
    if (given != options.calibrationInputs.end()) {
      if (given->second.dtype() != v->dtype() || given->second.shape() != v->shape())
        return Status::error("calibration input '" + v->name() + "' is " +
                             std::string(dtypeName(given->second.dtype())) + given->second.shape().str() +
                             ", the model takes " + std::string(dtypeName(v->dtype())) + v->shape().str());
      inputs.push_back(given->second);
      used.insert(v->name());
      continue;
    }
    Tensor t(v->dtype(), v->shape());
    for (int64_t i = 0; i < t.numel(); ++i) {
      if (isFloat(v->dtype()))
        t.setDouble(i, normal(rng));
      else
        t.setInt(i, 1);
    }
    inputs.push_back(std::move(t));
  }
  for (const auto& [name, tensor] : options.calibrationInputs)
    if (!used.count(name)) return Status::error("calibration input '" + name + "' is not an input of the model");
  return inputs;
}

Expected<PrecisionChoice> choosePrecision(const Graph& graph, const std::vector<std::string>& outputNames,
                                          const Target& target, const CompileOptions& options,
                                          const LoweringOptions& lowering, const ModelRunner& run) {
  if (!(options.accuracy > 0) || !std::isfinite(options.accuracy))
    return Status::error("--accuracy must be a positive number (a relative error such as 1e-2)");
  PrecisionChoice choice;
  NNC_ASSIGN_OR_RETURN(LoweredProgram all, lowerProgram(graph, outputNames, target, lowering));
  const std::vector<size_t> candidates = bf16Groups(all);
  choice.candidates = static_cast<int>(candidates.size());
  if (candidates.empty()) return choice;
  const std::set<const Node*> allNodes = nodesOf(all, candidates);
  NNC_ASSIGN_OR_RETURN(std::vector<Tensor> inputs, calibrationInputs(graph, options));
  // The whole model compiled and run with `keep` in f32, timed.
  auto runModel = [&](const std::set<const Node*>& keep) {
    const auto started = std::chrono::steady_clock::now();
    Expected<std::vector<Tensor>> out = run(keep, inputs);
    ++choice.modelCompiles;
    choice.modelSeconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    return out;
  };
  Expected<std::vector<Tensor>> f32 = runModel(allNodes);
  if (!f32) return Status::error("calibration: the model in f32: " + f32.status().message());

  // The model's error with every candidate in bf16. Within the budget (the common case), that is the
  // choice, and the groups' own errors are measured only where asked for.
  std::set<const Node*> none;
  Expected<std::vector<Tensor>> allBf16 = runModel(none);
  if (!allBf16) return Status::error("calibration: the model in bf16: " + allBf16.status().message());
  const double allError = relativeError(*allBf16, *f32);
  if (allError <= options.accuracy && !options.measureGroupErrors) {
    choice.bf16Groups = choice.candidates;
    choice.modelError = allError;
    return choice;
  }

  NNC_ASSIGN_OR_RETURN(auto errors, groupErrors(graph, all, candidates, inputs, options, choice));
  // Candidates within the budget on their own, by error per FLOP, least first: the budget buys the
  // most products (what bf16 halves) that way (bench/NOTES.md: BERT-12 at a 1e-3 budget).
  const std::map<size_t, double> flops = groupFlops(all);
  std::vector<size_t> order;
  for (size_t g : candidates) {
    choice.groupError[all.groups[g].nodes.front()] = errors.count(g) ? errors.at(g) : INFINITY;
    if (errors.count(g) && errors.at(g) <= options.accuracy) order.push_back(g);
  }
  auto errorPerFlop = [&](size_t g) { return errors.at(g) / std::max(1.0, flops.count(g) ? flops.at(g) : 0.0); };
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return errorPerFlop(a) < errorPerFlop(b); });

  // The model's error with the first `count` of `order` in bf16.
  auto modelError = [&](size_t count) -> Expected<double> {
    std::set<const Node*> keep = allNodes;
    for (size_t i = 0; i < count; ++i)
      for (const Node* n : all.groups[order[i]].nodes) keep.erase(n);
    Expected<std::vector<Tensor>> got = runModel(keep);
    if (!got)
      return Status::error("calibration: the model with " + std::to_string(count) +
                           " groups in bf16: " + got.status().message());
    return relativeError(*got, *f32);
  };
  size_t good = 0;  // in bf16: none, the f32 model itself, is within any budget
  double goodError = 0;
  if (!order.empty()) {
    double e = allError;
    if (order.size() < candidates.size()) {
      NNC_ASSIGN_OR_RETURN(e, modelError(order.size()));
    }
    if (e <= options.accuracy) {
      good = order.size();
      goodError = e;
    } else {
      size_t bad = order.size();
      while (bad - good > 1) {
        const size_t mid = (good + bad) / 2;
        NNC_ASSIGN_OR_RETURN(double m, modelError(mid));
        if (m <= options.accuracy) {
          good = mid;
          goodError = m;
        } else {
          bad = mid;
        }
      }
    }
  }
  choice.keepF32 = allNodes;
  for (size_t i = 0; i < good; ++i)
    for (const Node* n : all.groups[order[i]].nodes) choice.keepF32.erase(n);
  choice.bf16Groups = static_cast<int>(good);
  choice.modelError = goodError;
  return choice;
}

}  // namespace nnc
