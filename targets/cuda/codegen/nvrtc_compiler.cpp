// NVRTC compilation of generated CUDA source to cubin + PTX, and the on-disk kernel cache. NVRTC is
// opened with dlopen when first needed (as the runtime opens the driver and cuBLASLt), so that nnc
// starts, and compiles for the cpu, on a machine without the CUDA toolkit: an installed wheel carries
// no libnvrtc, and finds one on the loader's path, in the toolkit, or at $NNC_NVRTC_LIBRARY.
#include "targets/cuda/codegen/nvrtc_compiler.h"

#include <dlfcn.h>
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

// The NVRTC entry points nnc calls, resolved from the library once per process.
struct NvrtcApi {
  decltype(&::nvrtcVersion) version = nullptr;
  decltype(&::nvrtcGetErrorString) getErrorString = nullptr;
  decltype(&::nvrtcCreateProgram) createProgram = nullptr;
  decltype(&::nvrtcCompileProgram) compileProgram = nullptr;
  decltype(&::nvrtcDestroyProgram) destroyProgram = nullptr;
  decltype(&::nvrtcGetProgramLogSize) getProgramLogSize = nullptr;
  decltype(&::nvrtcGetProgramLog) getProgramLog = nullptr;
  decltype(&::nvrtcGetCUBINSize) getCUBINSize = nullptr;
  decltype(&::nvrtcGetCUBIN) getCUBIN = nullptr;
  decltype(&::nvrtcGetPTXSize) getPTXSize = nullptr;
  decltype(&::nvrtcGetPTX) getPTX = nullptr;
  std::string error;  // why it could not be opened (then the pointers are null)
};

template <typename Fn>
bool resolve(void* lib, const char* name, Fn* fn, std::string* missing) {
  *fn = reinterpret_cast<Fn>(dlsym(lib, name));
  if (!*fn) *missing += std::string(missing->empty() ? "" : ", ") + name;
  return *fn != nullptr;
}

NvrtcApi openNvrtc() {
  std::vector<std::string> candidates;
  if (const char* path = std::getenv("NNC_NVRTC_LIBRARY"); path && *path) {
    candidates.push_back(path);
  } else {
    for (const char* name : {"libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so"}) candidates.emplace_back(name);
    for (const char* name : {"libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so"})
      candidates.push_back(std::string(NNC_CUDA_TOOLKIT_LIB_DIR) + "/" + name);
  }
  NvrtcApi api;
  for (const std::string& candidate : candidates) {
    dlerror();
    void* lib = dlopen(candidate.c_str(), RTLD_NOW | RTLD_LOCAL);  // never closed, like the driver
    if (!lib) {
      const char* err = dlerror();
      api.error += std::string(api.error.empty() ? "" : "; ") + (err ? err : candidate + ": cannot be opened");
      continue;
    }
    std::string missing;
    NvrtcApi a;
    resolve(lib, "nvrtcVersion", &a.version, &missing);
    resolve(lib, "nvrtcGetErrorString", &a.getErrorString, &missing);
    resolve(lib, "nvrtcCreateProgram", &a.createProgram, &missing);
    resolve(lib, "nvrtcCompileProgram", &a.compileProgram, &missing);
    resolve(lib, "nvrtcDestroyProgram", &a.destroyProgram, &missing);
    resolve(lib, "nvrtcGetProgramLogSize", &a.getProgramLogSize, &missing);
    resolve(lib, "nvrtcGetProgramLog", &a.getProgramLog, &missing);
    resolve(lib, "nvrtcGetCUBINSize", &a.getCUBINSize, &missing);
    resolve(lib, "nvrtcGetCUBIN", &a.getCUBIN, &missing);
    resolve(lib, "nvrtcGetPTXSize", &a.getPTXSize, &missing);
    resolve(lib, "nvrtcGetPTX", &a.getPTX, &missing);
    if (missing.empty()) return a;
    api.error += std::string(api.error.empty() ? "" : "; ") + candidate + " lacks " + missing;
  }
  api.error = "NVRTC could not be opened (install the CUDA toolkit, or set NNC_NVRTC_LIBRARY): " + api.error;
  return api;
}

const NvrtcApi& nvrtc() {
  static const NvrtcApi api = openNvrtc();
  return api;
}

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

std::string programLog(const NvrtcApi& api, nvrtcProgram prog) {
  size_t size = 0;
  if (api.getProgramLogSize(prog, &size) != NVRTC_SUCCESS || size <= 1) return "";
  std::string log(size, '\0');
  if (api.getProgramLog(prog, log.data()) != NVRTC_SUCCESS) return "";
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
  const NvrtcApi& api = nvrtc();
  if (!api.error.empty()) return Status::error(prefix + api.error);
  nvrtcProgram prog = nullptr;
  nvrtcResult r = api.createProgram(&prog, source.c_str(), (displayName + ".cu").c_str(), 0, nullptr, nullptr);
  if (r != NVRTC_SUCCESS) return Status::error(prefix + api.getErrorString(r));
  std::vector<const char*> argv;
  for (const std::string& s : options) argv.push_back(s.c_str());
  r = api.compileProgram(prog, static_cast<int>(argv.size()), argv.data());
  CompiledCuda out;
  out.log = programLog(api, prog);
  if (r != NVRTC_SUCCESS) {
    api.destroyProgram(&prog);
    return Status::error(prefix + api.getErrorString(r) + (out.log.empty() ? "" : "\n" + out.log));
  }
  size_t cubinSize = 0, ptxSize = 0;
  r = api.getCUBINSize(prog, &cubinSize);
  if (r == NVRTC_SUCCESS) {
    out.cubin.resize(cubinSize);
    r = api.getCUBIN(prog, reinterpret_cast<char*>(out.cubin.data()));
  }
  if (r == NVRTC_SUCCESS) r = api.getPTXSize(prog, &ptxSize);
  if (r == NVRTC_SUCCESS) {
    out.ptx.resize(ptxSize);
    r = api.getPTX(prog, out.ptx.data());
    out.ptx.resize(std::strlen(out.ptx.c_str()));  // drop the terminating NUL
  }
  api.destroyProgram(&prog);
  if (r != NVRTC_SUCCESS) return Status::error(prefix + "reading the images: " + api.getErrorString(r));
  if (out.cubin.empty()) return Status::error(prefix + "no cubin (is '" + options.front() + "' a real architecture?)");
  return out;
}

}  // namespace

std::string nvrtcVersionString() {
  int major = 0, minor = 0;
  if (!nvrtc().error.empty()) return "unavailable";
  if (nvrtc().version(&major, &minor) != NVRTC_SUCCESS) return "unknown";
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
