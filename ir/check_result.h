// What a check kernel writes (ir/lower.h builds one per OpDef::indexChecks contract): an
// i64[kCheckResultSize] in its own arena bytes. The executors (runtime/) fail the run when
// kCheckViolations is non-zero, and constant folding fails the compile, both with
// describeCheckFailure's message. Header only: the runtime shares it as it shares nnc/dtype.def, so
// neither library depends on the other.
#pragma once

#include <cstdint>
#include <string>

namespace nnc {

enum CheckResult : int { kCheckViolations = 0, kCheckFirstPosition = 1, kCheckFirstValue = 2, kCheckResultSize = 3 };

// "<check>; 2 elements do not, the first is 7 (at flat position 3)".
inline std::string describeCheckFailure(const std::string& check, const int64_t* result) {
  const int64_t violations = result[kCheckViolations];
  return check + "; " + std::to_string(violations) + (violations == 1 ? " element does" : " elements do") +
         " not, the first is " + std::to_string(result[kCheckFirstValue]) + " (at flat position " +
         std::to_string(result[kCheckFirstPosition]) + ")";
}

}  // namespace nnc
