// --precision=auto (CompileOptions::precision): which contraction groups compute in bf16, chosen by
// running the model on calibration inputs so that its outputs stay within CompileOptions::accuracy
// of its f32 compile.
//
// 1. The candidates are the groups --precision=bf16 would put in bf16 (the target's choice by shape).
// 2. The whole model with every candidate in bf16 against the whole model in f32: within the budget
//    (the usual case at 1e-2), that is the choice.
// 3. Otherwise each candidate's own error: the group alone (its nodes as a graph, as `nnc bisect`
//    compiles them) in bf16 and in f32 on the f32 values of its inputs, max |bf16 - f32| / max |f32|
//    over its outputs. A candidate whose own error is over the budget stays f32.
// 4. The others, ordered by own error per FLOP (least first: the most products for the budget), in a
//    binary search for the longest prefix whose whole model is within the budget (errors add up
//    across groups: the own error is a lower bound of what a group contributes, so the model check
//    decides).
// Each model check compiles the whole model: 2 + log2(candidates) at most; step 3 compiles each
// candidate alone twice and each larger other group once (CompileOptions::measureGroupErrors asks for
// step 3 even where step 2 suffices: nnc explain shows the errors).
#pragma once

#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "driver/plan_builder.h"
#include "ir/graph.h"
#include "nnc/compiler.h"
#include "targets/target.h"

namespace nnc {

struct PrecisionChoice {
  std::set<const Node*> keepF32;             // LoweringOptions::keepF32: the candidates left in f32
  std::map<const Node*, double> groupError;  // each candidate group's own bf16 error, by its first node
  double modelError = 0;                     // the chosen model's error against f32 on the inputs
  int candidates = 0, bf16Groups = 0;
  // What calibration cost: compiles of single groups and of the whole model, and their seconds.
  int groupCompiles = 0, modelCompiles = 0;
  double groupSeconds = 0, modelSeconds = 0;
};

// Compiles the (already optimised) graph with these nodes' groups kept f32 and runs it on `inputs`.
using ModelRunner = std::function<Expected<std::vector<Tensor>>(const std::set<const Node*>& keepF32,
                                                                const std::vector<Tensor>& inputs)>;

// How one kernel group compiles as a graph of its own (`nnc bisect`, calibration): the model's options
// with every pass off but materialize-outputs (the group's nodes are final), in `precision`, printing
// nothing.
CompileOptions groupCompileOptions(const CompileOptions& model, Precision precision);

// The calibration inputs in graph input order: CompileOptions::calibrationInputs where given (dtype and
// shape checked), generated otherwise.
Expected<std::vector<Tensor>> calibrationInputs(const Graph& graph, const CompileOptions& options);

// max over float outputs of max |got - want| / max |want| (NaN or infinity where they disagree: inf).
double relativeError(const std::vector<Tensor>& got, const std::vector<Tensor>& want);

// `lowering`: the options the model itself is lowered with (its groups are the ones chosen for).
Expected<PrecisionChoice> choosePrecision(const Graph& graph, const std::vector<std::string>& outputNames,
                                          const Target& target, const CompileOptions& options,
                                          const LoweringOptions& lowering, const ModelRunner& run);

}  // namespace nnc
