// libFuzzer target: bytes -> ONNX importer -> graph verifier. Any import error is fine; a crash, a
// sanitizer report, or an imported graph that fails verification is a bug.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "frontend/onnx/importer.h"
#include "ir/verifier.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string bytes(reinterpret_cast<const char*>(data), size);
  // No base directory: external data must be refused, never read from the fuzzer's cwd.
  auto graph = nnc::onnx::importModelBytes(bytes, "fuzz.onnx", "");
  if (!graph) return 0;
  nnc::Status s = nnc::verifyGraph(*graph.value());
  if (!s) {
    std::fprintf(stderr, "imported graph fails verification: %s\n", s.message().c_str());
    __builtin_trap();
  }
  return 0;
}
