// Host builtins: hand-written functions for opaque ops (TopK, ...) that the plan calls by symbol.
// Each takes the parameter block from OpaqueKernel::encode and the buffers (inputs, then outputs)
// and returns 0, or a non-zero code when the data is invalid (the executor reports it).
#pragma once

#include <cstdint>
#include <string_view>

#include "runtime/plan.h"

extern "C" {
// runtime/builtin_topk.cpp.
int nnc_builtin_topk(const int64_t* params, void* const* buffers);
}

namespace nnc::rt {

// The builtin named `symbol`, or null when there is none.
BuiltinFn findBuiltin(std::string_view symbol);

}  // namespace nnc::rt
