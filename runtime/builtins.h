// Host builtins: hand-written functions for opaque ops (TopK, ...) that the plan calls by symbol.
// Each takes the parameter block from OpaqueKernel::encode and the buffers (inputs, then outputs)
// and returns 0, or a non-zero code when the data is invalid (the executor reports it).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/plan.h"

extern "C" {
// runtime/builtin_topk.cpp.
int nnc_builtin_topk(const int64_t* params, void* const* buffers);
}

namespace nnc::rt {

// The builtin named `symbol`, or null when there is none.
BuiltinFn findBuiltin(std::string_view symbol);

// Checks a builtin step before it can run (a plan may come from a corrupt model.so): the builtin
// exists, its parameter block has the layout its encoder writes, and every argument buffer
// (argBytes: the size of each, in order) holds what the parameters say it will read or write.
// False with the reason in *why otherwise.
bool validateBuiltinStep(std::string_view symbol, const std::vector<int64_t>& params,
                         const std::vector<uint64_t>& argBytes, std::string* why);

// How many of a builtin's arguments, counted from the last, it writes (0 for an unknown one).
int builtinWrittenArgs(std::string_view symbol);

// TopK's part of validateBuiltinStep (runtime/builtin_topk.cpp).
bool validateTopKStep(const std::vector<int64_t>& params, const std::vector<uint64_t>& argBytes, std::string* why);

}  // namespace nnc::rt
