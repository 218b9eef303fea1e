// Host builtins: hand-written functions for opaque ops (TopK, ...) that a plan's builtin steps call
// by symbol. Each takes the parameter block from OpaqueKernel::encode and the buffers (inputs, then
// outputs) and returns 0, or a non-zero code when the data is invalid (the executor reports it).
// A library of their own (nnc_builtins, depending on nothing): the executors run them (after
// runtime/builtin_steps.h has checked the step), and so does the compiler's reference evaluator
// (ir/reference.h) when it folds an opaque op.
#pragma once

#include <cstdint>
#include <string_view>

extern "C" {
// builtins/builtin_topk.cpp.
int nnc_builtin_topk(const int64_t* params, void* const* buffers);
}

namespace nnc::rt {

// A host builtin: params from OpaqueKernel::encode, buffers inputs then outputs. Returns 0 on
// success, or a non-zero error code (e.g. index out of range).
using BuiltinFn = int (*)(const int64_t* params, void* const* buffers);

// The builtin named `symbol`, or null when there is none.
BuiltinFn findBuiltin(std::string_view symbol);

}  // namespace nnc::rt
