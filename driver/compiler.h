// The compiler as a library, beyond the public API of nnc/compiler.h: what the command line and the
// tests use.
#pragma once

#include "ir/graph.h"
#include "nnc/compiler.h"

namespace nnc {

// Only the passes (for --emit=ir/fused-ir and tests).
Status runPipeline(Graph& graph, const CompileOptions& options, CompileReport* report = nullptr);

}  // namespace nnc
