// The table of host builtins, looked up by the symbol a plan step names.
#include "builtins/builtins.h"

namespace nnc::rt {
namespace {

struct BuiltinEntry {
  std::string_view symbol;
  BuiltinFn fn;
};

// Add new builtins here (declare them in builtins.h, and say how to check their steps in
// runtime/builtin_steps.cpp).
constexpr BuiltinEntry kBuiltins[] = {
    {"nnc_builtin_topk", &nnc_builtin_topk},
};

}  // namespace

BuiltinFn findBuiltin(std::string_view symbol) {
  for (const BuiltinEntry& e : kBuiltins)
    if (e.symbol == symbol) return e.fn;
  return nullptr;
}

}  // namespace nnc::rt
