// The nnc binary run from the cuda tests (cuda_target_test.cpp, cuda_half_precision_test.cpp).
#pragma once

#include <sys/wait.h>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace nnc::testing {

inline std::string readFile(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

struct CliResult {
  int exitCode = -1;
  std::string out, err;
};

// Runs the nnc binary with `args` (each single-quoted) in `cwd`, capturing stdout and stderr; the CUDA
// kernels go to the build's kernel cache.
inline CliResult runNnc(const std::vector<std::string>& args, const std::string& cwd) {
  std::string cmd = "cd '" + cwd + "' && NNC_CACHE_DIR='" NNC_BINARY_DIR "/cuda-kernel-cache' '" NNC_BINARY "'";
  for (const std::string& a : args) cmd += " '" + a + "'";
  cmd += " 2>'" + cwd + "/stderr.txt'";
  CliResult r;
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return r;
  char buf[4096];
  while (size_t n = fread(buf, 1, sizeof buf, p)) r.out.append(buf, n);
  const int status = pclose(p);
  r.exitCode = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.err = readFile(cwd + "/stderr.txt");
  return r;
}

}  // namespace nnc::testing
