// The table of host builtins, looked up by the symbol a plan step names.
#include "runtime/builtins.h"

namespace nnc::rt {
namespace {

struct BuiltinEntry {
  std::string_view symbol;
  BuiltinFn fn;
  int writtenArgs;  // the last this many arguments are the builtin's outputs
  bool (*validate)(const std::vector<int64_t>& params, const std::vector<uint64_t>& argBytes, std::string* why);
};

// Add new builtins here (and declare them, and their validators, in builtins.h).
constexpr BuiltinEntry kBuiltins[] = {
    {"nnc_builtin_topk", &nnc_builtin_topk, /*writtenArgs=*/2, &validateTopKStep},
};

const BuiltinEntry* findEntry(std::string_view symbol) {
  for (const BuiltinEntry& e : kBuiltins)
    if (e.symbol == symbol) return &e;
  return nullptr;
}

}  // namespace

BuiltinFn findBuiltin(std::string_view symbol) {
  const BuiltinEntry* e = findEntry(symbol);
  return e ? e->fn : nullptr;
}

bool validateBuiltinStep(std::string_view symbol, const std::vector<int64_t>& params,
                         const std::vector<uint64_t>& argBytes, std::string* why) {
  const BuiltinEntry* e = findEntry(symbol);
  if (!e) {
    *why = "unknown builtin '" + std::string(symbol) + "'";
    return false;
  }
  return e->validate(params, argBytes, why);
}

int builtinWrittenArgs(std::string_view symbol) {
  const BuiltinEntry* e = findEntry(symbol);
  return e ? e->writtenArgs : 0;
}

}  // namespace nnc::rt
