// The pass interface: a pass is a function Graph& -> Expected<bool> ("did it change anything"),
// registered once: in the table of passes/pipeline.cpp, or by the targets that run it
// (Target::passes(); a pass only one target runs lives in its folder, e.g. targets/cpu/cpu_passes.h).
// Each pass lives in its own file with its algorithm note.
#pragma once

#include <functional>
#include <vector>

#include "ir/graph.h"
#include "nnc/status.h"
#include "nnc/tensor.h"

namespace nnc::passes {

using PassFn = Expected<bool> (*)(Graph& graph);

// Computes a graph that has no inputs and returns its outputs, in order. The driver gives the pipeline
// one that compiles the graph for the host and runs it (PipelineOptions::evaluateConstants).
using ConstantEvaluator = std::function<Expected<std::vector<Tensor>>(Graph& graph)>;
using EvaluatingPassFn = Expected<bool> (*)(Graph& graph, const ConstantEvaluator& evaluate);

// The largest result, in elements, that folding makes a constant: past it a result runs at inference
// time rather than bloat the weights.
inline constexpr int64_t kMaxFoldedElements = int64_t{1} << 22;

// Removes nodes none of whose outputs is used or a graph output.
Expected<bool> eliminateDeadCode(Graph& graph);
// Merges nodes with the same op, inputs and attributes (and equal small constants).
Expected<bool> eliminateCommonSubexpressions(Graph& graph);
// Evaluates nodes whose inputs are all constants (reference evaluator), up to a size limit.
Expected<bool> foldConstants(Graph& graph);
// Computes the constant subgraphs foldConstants left (too much work for the reference evaluator: a
// projection of a constant embedding table) by compiling them for the host, up to where a result would
// be larger than what it is computed from.
Expected<bool> foldConstantSubgraphs(Graph& graph, const ConstantEvaluator& evaluate);
// Canonical forms for the recognisers: constants second in commutative ops, Pow by a constant
// exponent as multiplies, Sqrt or Reciprocal, Div(1, x) as Reciprocal, Sub(0, x) as Neg.
Expected<bool> canonicalize(Graph& graph);
// Local algebraic clean-ups: identities, casts to the same type, reshape/transpose chains.
Expected<bool> simplify(Graph& graph);
// Group-1 Conv as Im2Col + MatMul (cuda: a cuBLASLt GEMM; cpu: a packed contraction) + Reshape
// (+ bias Add).
Expected<bool> convToGemm(Graph& graph);
// The decomposed LayerNorm of older exports (ReduceMean, Sub, Pow, ReduceMean, Add, Sqrt, Div, [Mul],
// [Add]) as one LayerNormalization node.
Expected<bool> recognizeLayerNorm(Graph& graph);
// The RMS normalisation of exports (Pow or Mul, ReduceMean, Add, Sqrt, Div or Reciprocal and Mul, [Mul])
// as one RmsNormalization node. After recognize-layer-norm: a LayerNorm's variance part matches too.
Expected<bool> recognizeRmsNorm(Graph& graph);
// The exact GELU of exports (Div by sqrt 2 or Mul by its reciprocal, Erf, Add 1, two Muls: by x and
// by 0.5) as one Gelu node.
Expected<bool> recognizeGelu(Graph& graph);
// Gives every graph output its own computed value (an Identity copy for outputs that are graph
// inputs, constants, or listed twice), so the runtime can write each output buffer once.
Expected<bool> materializeOutputs(Graph& graph);

}  // namespace nnc::passes
