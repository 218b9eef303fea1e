// The internal-error channel: NNC_CHECK failures end up here.
#include "nnc/status.h"

namespace nnc {

void internalError(const char* file, int line, const std::string& message) {
  std::fprintf(stderr, "nnc internal error (compiler bug) at %s:%d: %s\n", file, line, message.c_str());
  std::fflush(stderr);
  std::abort();
}

}  // namespace nnc
