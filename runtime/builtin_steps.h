// Checking a plan's builtin steps before they run (a plan may come from a corrupt model.so): for each
// host builtin of builtins/builtins.h, the layout of its parameter block and the bytes it reads and
// writes.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace nnc::rt {

// Whether a step may call builtin `symbol`: the builtin exists, its parameter block has the layout
// its encoder writes, and every argument buffer (argBytes: the size of each, in order) holds what the
// parameters say it will read or write. False with the reason in *why otherwise.
bool validateBuiltinStep(std::string_view symbol, const std::vector<int64_t>& params,
                         const std::vector<uint64_t>& argBytes, std::string* why);

// How many of a builtin's arguments, counted from the last, it writes (0 for an unknown one).
int builtinWrittenArgs(std::string_view symbol);

// TopK's part of validateBuiltinStep.
bool validateTopKStep(const std::vector<int64_t>& params, const std::vector<uint64_t>& argBytes, std::string* why);

}  // namespace nnc::rt
