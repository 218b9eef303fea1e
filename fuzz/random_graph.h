// Random graphs for the fuzz targets and the differential tests (tests/difftest): a source of
// choices (fuzzer bytes or a seeded generator), a generator of valid graphs that every -O level must
// run like the reference evaluator, a generator of loose graphs (random ops, attributes and shapes)
// whose only duty is to fail cleanly, and the compile-and-compare check itself.
#pragma once

#include <cstddef>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "nnc/compiler.h"
#include "nnc/status.h"
#include "nnc/tensor.h"

namespace nnc::fuzz {

// Every random decision goes through nextByte(), so a fuzzer's bytes and a seed drive the same code.
class Choices {
 public:
  virtual ~Choices() = default;
  virtual uint8_t nextByte() = 0;
  // Uniform-ish in [lo, hi] (inclusive); consumes one byte per 256 values of span.
  int64_t range(int64_t lo, int64_t hi);
  bool percent(int p) { return range(0, 99) < p; }
  template <class T>
  const T& pick(const std::vector<T>& v) {
    return v[static_cast<size_t>(range(0, static_cast<int64_t>(v.size()) - 1))];
  }
};

// Reads the fuzzer's bytes; zeros once they run out, so every input decodes to some graph.
class ByteChoices : public Choices {
 public:
  ByteChoices(const uint8_t* data, size_t size) : data_(data), size_(size) {}
  uint8_t nextByte() override { return pos_ < size_ ? data_[pos_++] : 0; }
  bool exhausted() const { return pos_ >= size_; }

 private:
  const uint8_t* data_;
  size_t size_;
  size_t pos_ = 0;
};

class SeededChoices : public Choices {
 public:
  explicit SeededChoices(uint64_t seed) : rng_(seed) {}
  uint8_t nextByte() override { return static_cast<uint8_t>(rng_() & 0xff); }

 private:
  std::mt19937_64 rng_;
};

struct RandomGraphOptions {
  int maxNodes = 8;  // generated op steps (a step may add a few helper nodes)
  int maxDim = 5;    // dims of generated shapes are in [1, maxDim]
  bool allowF64 = true;
  bool allowInts = true;  // i32 / i64 values
};

// Builds a graph that is valid by construction into `graph` (which must be empty): pointwise chains
// with broadcasting, reductions, softmax/layer-norm, data movement, MatMul/Conv with epilogues, over
// f32/f64/i32/i64. Float values stay away from the edges of their functions' domains only loosely;
// NaN and inf compare equal to themselves. Returns an error only when the builder rejected a node
// (a generator or shape-inference bug: the message names the node).
Status buildValidGraph(Choices& choices, Graph& graph, const RandomGraphOptions& options = {});

// Builds a graph of random ops with random attributes, input counts, dtypes and shapes (dims may be
// zero, or large). Most such graphs are rejected by the builder; that is fine, crashing is not.
// Returns the builder's status.
Status buildLooseGraph(Choices& choices, Graph& graph);

// Deterministic input tensors for `graph`'s inputs (floats in [-2, 2], integers in [-4, 4], bools).
std::vector<Tensor> deterministicInputs(const Graph& graph, uint64_t salt = 0);

// Compiles clones of `graph` at -O0 and -O2 (JIT), runs them on deterministicInputs and compares
// every output with evaluateGraph's. Returns an error describing the first mismatch, or a compile
// or run failure (which is also a bug: the graph is valid). `log` gets the graph text on failure.
Status compileAndCompare(const Graph& graph, int numThreads = 1);
// The same with other compile options (their optimisation level and thread count replaced): e.g.
// --precision=auto under a budget no bf16 group meets, which must compile exactly what f32 does.
Status compileAndCompare(const Graph& graph, int numThreads, const CompileOptions& base);
// The same against evaluateGraph of `reference` (same inputs and outputs): what `graph` compiles to
// under `base` when that is not `graph`'s own semantics, e.g. cuda's --precision=bf16, which must
// compute what the graph after half-gemm-operands specifies.
Status compileAndCompareWith(const Graph& graph, const Graph& reference, int numThreads, const CompileOptions& base);

// |a - b| within tolerance for `t` (floats), exact for integers and bool; NaN equals NaN.
bool closeEnough(DType t, double a, double b);

}  // namespace nnc::fuzz
