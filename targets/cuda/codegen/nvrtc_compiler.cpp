// NVRTC compilation of generated CUDA source to cubin + PTX, and the on-disk kernel cache.
#include "targets/cuda/codegen/nvrtc_compiler.h"

#include <nvrtc.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>

namespace nnc::codegen::cuda {

namespace {

namespace fs = std::filesystem;

std::atomic<int64_t> gHits{0}, gMisses{0}, gWrites{0};

// Two independent 64-bit FNV-1a streams make a 128-bit key; each field is length-prefixed so that
// ("ab", "c") and ("a", "bc") differ.
class KeyHasher {
 public:
  void add(const std::string& s) {
    const uint64_t n = s.size();
    bytes(&n, sizeof n);
    bytes(s.data(), s.size());
  }
  std::string hex() const {
    char buf[33];
    std::snprintf(buf, sizeof buf, "%016llx%016llx", static_cast<unsigned long long>(a_),
                  static_cast<unsigned long long>(b_));
    return buf;
  }

 private:
  void bytes(const void* p, size_t n) {
    const auto* c = static_cast<const unsigned char*>(p);
    for (size_t i = 0; i < n; ++i) {
      a_ = (a_ ^ c[i]) * 0x100000001b3ull;
      b_ = (b_ ^ (c[i] + 0x5bu)) * 0x100000001b3ull;
      b_ ^= b_ >> 29;
    }
  }
  uint64_t a_ = 0xcbf29ce484222325ull;
  uint64_t b_ = 0x84222325cbf29ce4ull;
};

// Entry file: magic, cubin size, PTX size (u64 little-endian as the host stores them), then both.
constexpr char kMagic[8] = {'N', 'N', 'C', 'C', 'U', 'B', '1', '\0'};

bool readEntry(const fs::path& path, CompiledCuda* out) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  char magic[8];
  uint64_t cubinSize = 0, ptxSize = 0;
  if (!in.read(magic, 8) || std::memcmp(magic, kMagic, 8) != 0) return false;
  if (!in.read(reinterpret_cast<char*>(&cubinSize), 8) || !in.read(reinterpret_cast<char*>(&ptxSize), 8)) return false;
  std::error_code ec;
  const uint64_t fileSize = fs::file_size(path, ec);
  if (ec || fileSize != 24 + cubinSize + ptxSize) return false;
  out->cubin.resize(cubinSize);
  out->ptx.resize(ptxSize);
  if (!in.read(reinterpret_cast<char*>(out->cubin.data()), static_cast<std::streamsize>(cubinSize))) return false;
  if (!in.read(out->ptx.data(), static_cast<std::streamsize>(ptxSize))) return false;
  return true;
}

// Best effort: a cache that cannot be written only costs a recompile next time.
bool writeEntry(const fs::path& path, const CompiledCuda& c) {
  std::error_code ec;
  fs::create_directories(path.parent_path(), ec);
  std::random_device rd;
  const fs::path tmp = path.string() + ".tmp." + std::to_string(::getpid()) + "." + std::to_string(rd());
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) return false;
    const uint64_t cubinSize = c.cubin.size(), ptxSize = c.ptx.size();
    out.write(kMagic, 8);
    out.write(reinterpret_cast<const char*>(&cubinSize), 8);
    out.write(reinterpret_cast<const char*>(&ptxSize), 8);
    out.write(reinterpret_cast<const char*>(c.cubin.data()), static_cast<std::streamsize>(cubinSize));
    out.write(c.ptx.data(), static_cast<std::streamsize>(ptxSize));
    out.flush();
    if (!out) {
      out.close();
      fs::remove(tmp, ec);
      return false;
    }
  }
  fs::rename(tmp, path, ec);
  if (ec) fs::remove(tmp, ec);
  return !ec;
}

std::string programLog(nvrtcProgram prog) {
  size_t size = 0;
  if (nvrtcGetProgramLogSize(prog, &size) != NVRTC_SUCCESS || size <= 1) return "";
  std::string log(size, '\0');
  if (nvrtcGetProgramLog(prog, log.data()) != NVRTC_SUCCESS) return "";
  log.resize(std::strlen(log.c_str()));
  while (!log.empty() && (log.back() == '\n' || log.back() == ' ')) log.pop_back();
  return log;
}

std::vector<std::string> allOptions(const NvrtcOptions& o) {
  std::vector<std::string> opts = {"--gpu-architecture=" + o.arch, "-std=c++17",
                                   // No FMA contraction: a*b+c rounds twice, as in the interpreter.
                                   "--fmad=false"};
  opts.insert(opts.end(), o.extraOptions.begin(), o.extraOptions.end());
  return opts;
}

Expected<CompiledCuda> runNvrtc(const std::string& source, const std::string& displayName,
                                const std::vector<std::string>& options) {
  const std::string prefix = "kernel '" + displayName + "': nvrtc: ";
  nvrtcProgram prog = nullptr;
  nvrtcResult r = nvrtcCreateProgram(&prog, source.c_str(), (displayName + ".cu").c_str(), 0, nullptr, nullptr);
  if (r != NVRTC_SUCCESS) return Status::error(prefix + nvrtcGetErrorString(r));
  std::vector<const char*> argv;
  for (const std::string& s : options) argv.push_back(s.c_str());
  r = nvrtcCompileProgram(prog, static_cast<int>(argv.size()), argv.data());
  CompiledCuda out;
  out.log = programLog(prog);
  if (r != NVRTC_SUCCESS) {
    nvrtcDestroyProgram(&prog);
    return Status::error(prefix + nvrtcGetErrorString(r) + (out.log.empty() ? "" : "\n" + out.log));
  }
  size_t cubinSize = 0, ptxSize = 0;
  r = nvrtcGetCUBINSize(prog, &cubinSize);
  if (r == NVRTC_SUCCESS) {
    out.cubin.resize(cubinSize);
    r = nvrtcGetCUBIN(prog, reinterpret_cast<char*>(out.cubin.data()));
  }
  if (r == NVRTC_SUCCESS) r = nvrtcGetPTXSize(prog, &ptxSize);
  if (r == NVRTC_SUCCESS) {
    out.ptx.resize(ptxSize);
    r = nvrtcGetPTX(prog, out.ptx.data());
    out.ptx.resize(std::strlen(out.ptx.c_str()));  // drop the terminating NUL
  }
  nvrtcDestroyProgram(&prog);
  if (r != NVRTC_SUCCESS) return Status::error(prefix + "reading the images: " + nvrtcGetErrorString(r));
  if (out.cubin.empty()) return Status::error(prefix + "no cubin (is '" + options.front() + "' a real architecture?)");
  return out;
}

}  // namespace

std::string nvrtcVersionString() {
  int major = 0, minor = 0;
  if (nvrtcVersion(&major, &minor) != NVRTC_SUCCESS) return "unknown";
  return std::to_string(major) + "." + std::to_string(minor);
}

std::string kernelCacheDir(const NvrtcOptions& options) {
  if (!options.cacheDir.empty()) return options.cacheDir;
  if (const char* dir = std::getenv("NNC_CACHE_DIR"); dir && *dir) return dir;
  if (const char* home = std::getenv("HOME"); home && *home) return std::string(home) + "/.cache/nnc/kernels";
  return "";
}

Expected<CompiledCuda> compileCuda(const std::string& source, const std::string& displayName,
                                   const NvrtcOptions& options) {
  const std::vector<std::string> opts = allOptions(options);
  fs::path entry;
  if (options.useCache) {
    const std::string dir = kernelCacheDir(options);
    if (!dir.empty()) {
      KeyHasher key;
      key.add(source);
      for (const std::string& o : opts) key.add(o);
      key.add(options.arch);
      key.add(nvrtcVersionString());
      entry = fs::path(dir) / (key.hex() + ".nvcache");
      CompiledCuda cached;
      if (readEntry(entry, &cached)) {
        cached.fromCache = true;
        ++gHits;
        return cached;
      }
    }
  }
  ++gMisses;
  NNC_ASSIGN_OR_RETURN(CompiledCuda compiled, runNvrtc(source, displayName, opts));
  if (!entry.empty() && writeEntry(entry, compiled)) ++gWrites;
  return compiled;
}

KernelCacheStats kernelCacheStats() {
  KernelCacheStats s;
  s.hits = gHits.load();
  s.misses = gMisses.load();
  s.writes = gWrites.load();
  return s;
}

}  // namespace nnc::codegen::cuda
