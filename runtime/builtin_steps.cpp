// How the runtime checks a plan's builtin steps (runtime/builtin_steps.h).
#include "runtime/builtin_steps.h"

#include "builtins/builtins.h"
#include "runtime/plan.h"

namespace nnc::rt {
namespace {

constexpr int32_t kI64 = 7;  // nnc_dtype (ONNX numbering) of TopK's indices

struct StepRule {
  std::string_view symbol;
  int writtenArgs;  // the last this many arguments are the builtin's outputs
  bool (*validate)(const std::vector<int64_t>& params, const std::vector<uint64_t>& argBytes, std::string* why);
};

// One rule per builtin of builtins/builtins.cpp.
constexpr StepRule kRules[] = {
    {"nnc_builtin_topk", /*writtenArgs=*/2, &validateTopKStep},
};

const StepRule* findRule(std::string_view symbol) {
  for (const StepRule& r : kRules)
    if (r.symbol == symbol) return &r;
  return nullptr;
}

}  // namespace

bool validateBuiltinStep(std::string_view symbol, const std::vector<int64_t>& params,
                         const std::vector<uint64_t>& argBytes, std::string* why) {
  const StepRule* r = findRule(symbol);
  if (!r || !findBuiltin(symbol)) {
    *why = "unknown builtin '" + std::string(symbol) + "'";
    return false;
  }
  return r->validate(params, argBytes, why);
}

int builtinWrittenArgs(std::string_view symbol) {
  const StepRule* r = findRule(symbol);
  return r ? r->writtenArgs : 0;
}

bool validateTopKStep(const std::vector<int64_t>& params, const std::vector<uint64_t>& argBytes, std::string* why) {
  auto bad = [&](const std::string& message) {
    *why = "topk: " + message;
    return false;
  };
  if (params.size() < 2) return bad("parameter block of " + std::to_string(params.size()) + " values is too short");
  const int64_t rank = params[1];
  if (rank < 1 || rank > 64) return bad("rank " + std::to_string(rank) + " is not in [1, 64]");
  if (params.size() != static_cast<size_t>(7 + rank))
    return bad("expected " + std::to_string(7 + rank) + " parameters for rank " + std::to_string(rank) + ", got " +
               std::to_string(params.size()));
  if (params[0] < 0 || params[0] > INT32_MAX || elementSize(static_cast<int32_t>(params[0])) == 0)
    return bad("unknown dtype " + std::to_string(params[0]));
  const int32_t dtype = static_cast<int32_t>(params[0]);
  std::vector<int64_t> dims(params.begin() + 2, params.begin() + 2 + rank);
  const int64_t axis = params[2 + rank], k = params[3 + rank], numInputs = params[6 + rank];
  for (int64_t d : dims)
    if (d < 0) return bad("negative dim " + std::to_string(d));
  if (axis < 0 || axis >= rank) return bad("axis " + std::to_string(axis) + " is out of range");
  if (k < 0 || k > dims[static_cast<size_t>(axis)]) return bad("k = " + std::to_string(k) + " is out of range");
  if (numInputs < 1 || numInputs > 2) return bad("input count " + std::to_string(numInputs) + " is not 1 or 2");
  if (argBytes.size() != static_cast<size_t>(numInputs) + 2)
    return bad("expected " + std::to_string(numInputs + 2) + " arguments, got " + std::to_string(argBytes.size()));
  // A shape too large for tensorBytes is larger than any plan buffer, so it does not fit either.
  auto fits = [](int32_t type, const std::vector<int64_t>& shape, uint64_t bufferBytes) {
    uint64_t bytes = 0;
    return tensorBytes(type, shape, &bytes) && bytes <= bufferBytes;
  };
  std::vector<int64_t> outDims = dims;
  outDims[static_cast<size_t>(axis)] = k;
  const size_t values = static_cast<size_t>(numInputs), indices = values + 1;
  if (!fits(dtype, dims, argBytes[0])) return bad("the input buffer is smaller than its shape");
  if (!fits(dtype, outDims, argBytes[values])) return bad("the values buffer is smaller than its shape");
  if (!fits(kI64, outDims, argBytes[indices])) return bad("the indices buffer is smaller than its shape");
  return true;
}

}  // namespace nnc::rt
