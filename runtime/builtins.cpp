// The table of host builtins, looked up by the symbol a plan step names.
#include "runtime/builtins.h"

namespace nnc::rt {
namespace {

struct BuiltinEntry {
  std::string_view symbol;
  BuiltinFn fn;
};

// Add new builtins here (and declare them in builtins.h).
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
