// Reads the text that ir/printer.h writes, so that pass tests can be written as IR text in,
// IR text out. Every node is type-inferred as it is read (no folding), and the declared output
// types must match inference. Constants take their values from `{value=[...]}` (flat, row-major);
// a constant printed without values reads as zeros. `#` starts a comment to the end of the line.
#pragma once

#include <memory>
#include <string_view>

#include "ir/graph.h"
#include "nnc/status.h"

namespace nnc {

// Errors read "line 3: unknown value %foo" (or carry the node prefix from inference).
Expected<std::unique_ptr<Graph>> parseGraph(std::string_view text);

}  // namespace nnc
