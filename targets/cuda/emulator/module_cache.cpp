// Modules (see emulator.h): CUDA C++ compiled by the host compiler, cached on disk; the module and launch entry points.
#include <dlfcn.h>
#include <fcntl.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <initializer_list>
#include <iterator>
#include <map>
#include <memory>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "targets/cuda/emulator/emulation_embed.h"
#include "targets/cuda/emulator/emulator_internal.h"

extern char** environ;

namespace nnc::rt::cuda::emu::detail {
namespace {

// Modules: the CUDA C++ source compiled by the host compiler into a shared object (cached on disk
// by a hash of everything that goes into it), dlopen'ed.

struct Module {
  void* library = nullptr;
  std::map<std::string, std::unique_ptr<Function>> functions;
};

uint64_t fnv1a(const std::string& text, uint64_t h) {
  for (unsigned char c : text) h = (h ^ c) * 1099511628211ull;
  return h;
}

std::string cacheDir() {
  std::string dir;
  if (const char* d = std::getenv("NNC_CACHE_DIR"); d && *d)
    dir = d;
  else if (const char* home = std::getenv("HOME"); home && *home)
    dir = std::string(home) + "/.cache/nnc";
  else
    dir = "/tmp/nnc-cache-" + std::to_string(getuid());
  return dir + "/emulated";
}

bool makeDirs(const std::string& path) {
  for (size_t i = 1; i <= path.size(); ++i) {
    if (i < path.size() && path[i] != '/') continue;
    const std::string prefix = path.substr(0, i);
    if (mkdir(prefix.c_str(), 0755) != 0 && errno != EEXIST) return false;
  }
  return true;
}

bool writeFileAtomically(const std::string& path, const std::string& text) {
  const std::string tmp = path + ".tmp." + std::to_string(getpid()) + "." +
                          std::to_string(std::hash<std::thread::id>()(std::this_thread::get_id()));
  {
    std::ofstream out(tmp, std::ios::binary);
    out << text;
    if (!out.good()) return false;
  }
  return std::rename(tmp.c_str(), path.c_str()) == 0;
}

std::string readFile(const std::string& path, size_t limit) {
  std::ifstream in(path, std::ios::binary);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (text.size() > limit) text = text.substr(0, limit) + "\n...";
  return text;
}

// The kernels the source defines (the emitter's `extern "C" __global__ void NAME(...) {` lines, at
// the start of a line) and whether each one's body cooperates.
std::vector<std::pair<std::string, bool>> findKernels(const std::string& source) {
  static const std::string kPrefix = "extern \"C\" __global__ void ";
  std::vector<std::pair<std::string, size_t>> starts;
  for (size_t pos = 0; pos < source.size();) {
    size_t eol = source.find('\n', pos);
    if (eol == std::string::npos) eol = source.size();
    if (source.compare(pos, kPrefix.size(), kPrefix) == 0 && eol > pos && source[eol - 1] == '{') {
      const size_t nameStart = pos + kPrefix.size();
      const size_t paren = source.find('(', nameStart);
      if (paren != std::string::npos && paren < eol)
        starts.emplace_back(source.substr(nameStart, paren - nameStart), pos);
    }
    pos = eol + 1;
  }
  std::vector<std::pair<std::string, bool>> kernels;
  for (size_t i = 0; i < starts.size(); ++i) {
    const size_t end = i + 1 < starts.size() ? starts[i + 1].second : source.size();
    const std::string body = source.substr(starts[i].second, end - starts[i].second);
    const bool cooperative = body.find("__syncthreads") != std::string::npos ||
                             body.find("__shfl") != std::string::npos || body.find("nnc_shfl") != std::string::npos ||
                             body.find("__shared__") != std::string::npos;
    kernels.emplace_back(starts[i].first, cooperative);
  }
  return kernels;
}

bool validIdentifier(const std::string& name) {
  if (name.empty() || std::isdigit(static_cast<unsigned char>(name[0]))) return false;
  return std::all_of(name.begin(), name.end(),
                     [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; });
}

// Runs the compiler; false with *log set to its output.
bool runCompiler(const std::vector<std::string>& args, const std::string& logPath, std::string* log) {
  std::vector<char*> argv;
  for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, logPath.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&actions, 1, 2);
  pid_t pid = 0;
  const int rc = posix_spawnp(&pid, argv[0], &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) {
    *log = "cannot run " + args[0] + ": " + std::strerror(rc);
    return false;
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  *log = readFile(logPath, 4000);
  return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

std::string compilerCommand() {
  if (const char* cxx = std::getenv("NNC_EMULATE_CXX"); cxx && *cxx) return cxx;
  return NNC_EMULATOR_CXX;
}

std::vector<std::string> splitFlags(const std::string& flags) {
  std::istringstream in(flags);
  std::vector<std::string> out;
  for (std::string f; in >> f;) out.push_back(f);
  return out;
}

// Compiles `source` (the image without the magic line) into a cached shared object; its path, or
// empty with *error.
std::string compileModule(const std::string& source, const std::vector<std::pair<std::string, bool>>& kernels,
                          std::string* error) {
  // -g1: line tables are all a sanitizer's report (module.cu:LINE) needs; full -g made the largest
  // module's ASan+UBSan compile 6.8 s instead of 5.2.
  std::vector<std::string> flags = {"-std=c++17", "-fPIC", "-shared", "-g1", "-w", "-ffp-contract=off"};
  const char* opt = std::getenv("NNC_EMULATE_OPT");
  flags.push_back(opt && *opt ? opt : "-O1");
  for (const std::string& f : splitFlags(NNC_EMULATOR_SANITIZE_FLAGS)) flags.push_back(f);
  if (const char* extra = std::getenv("NNC_EMULATE_CXXFLAGS"))
    for (const std::string& f : splitFlags(extra)) flags.push_back(f);
  const std::string cxx = compilerCommand();

  std::string unit = "#include \"nnc_emulation.cuh\"\n#include \"module.cu\"\n";
  for (const auto& [name, cooperative] : kernels) unit += "NNC_EMU_KERNEL(" + name + ")\n";
  uint64_t h1 = 1469598103934665603ull, h2 = 0x9e3779b97f4a7c15ull;
  for (const std::string* part : std::initializer_list<const std::string*>{&source, &unit, &cxx})
    h1 = fnv1a(*part, h1), h2 = fnv1a(*part, h2);
  for (const std::string& f : flags) h1 = fnv1a(f + "\n", h1), h2 = fnv1a(f + "\n", h2);
  const std::string header = kEmulationHeader;
  h1 = fnv1a(header, h1), h2 = fnv1a(header, h2);
  char key[40];
  std::snprintf(key, sizeof key, "%016llx%016llx", static_cast<unsigned long long>(h1),
                static_cast<unsigned long long>(h2));

  const std::string root = cacheDir();
  const std::string dir = root + "/" + key;
  const std::string library = dir + "/module.so";
  if (access(library.c_str(), R_OK) == 0) return library;
  if (!makeDirs(dir)) {
    *error = "cannot create the emulator's cache directory " + dir + ": " + std::strerror(errno);
    return "";
  }
  // The source keeps its own file, so that sanitizer reports name its lines (module.cu:LINE).
  if (!writeFileAtomically(dir + "/nnc_emulation.cuh", header) || !writeFileAtomically(dir + "/module.cu", source) ||
      !writeFileAtomically(dir + "/unit.cpp", unit)) {
    *error = "cannot write the emulated module's source to " + dir;
    return "";
  }
  const std::string tmp = library + ".tmp." + std::to_string(getpid()) + "." +
                          std::to_string(std::hash<std::thread::id>()(std::this_thread::get_id()));
  std::vector<std::string> args = {cxx};
  args.insert(args.end(), flags.begin(), flags.end());
  args.insert(args.end(), {"-o", tmp, dir + "/unit.cpp"});
  std::string log;
  if (!runCompiler(args, tmp + ".log", &log)) {
    std::remove(tmp.c_str());
    *error = "the host compiler (" + cxx + ") failed on the emulated module " + dir + "/module.cu:\n" + log;
    return "";
  }
  std::remove((tmp + ".log").c_str());
  if (std::rename(tmp.c_str(), library.c_str()) != 0) {
    *error = "cannot move the emulated module into the cache: " + std::string(std::strerror(errno));
    return "";
  }
  return library;
}

CUresult emuModuleLoadData(CUmodule* module, const void* image) {
  if (CUresult r = needContext()) return r;
  if (!module || !image) return kInvalidValue;
  const char* text = static_cast<const char*>(image);
  const size_t magic = sizeof kEmulatedSourceMagic - 1;
  if (std::strncmp(text, kEmulatedSourceMagic, magic) != 0)
    return failWith(kInvalidImage, "the emulator loads CUDA C++ source only (not a cubin or PTX)");
  const std::string source(text + magic);
  std::vector<std::pair<std::string, bool>> kernels = findKernels(source);
  for (const auto& [name, cooperative] : kernels)
    if (!validIdentifier(name)) return failWith(kInvalidImage, "kernel name '" + name + "' is not an identifier");
  std::string error;
  const std::string path = compileModule(source, kernels, &error);
  if (path.empty()) {
    std::fprintf(stderr, "nnc cuda emulator: %s\n", error.c_str());
    return failWith(kInvalidImage, error);
  }
  void* library = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!library) {
    const char* why = dlerror();
    return failWith(kInvalidImage, "dlopen " + path + ": " + (why ? why : "failed"));
  }
  auto bind = reinterpret_cast<void (*)(const nnc_emu_hooks*)>(dlsym(library, "nnc_emu_bind"));
  if (!bind) return failWith(kInvalidImage, path + " lacks nnc_emu_bind");
  bind(&kHooks);
  auto m = std::make_unique<Module>();
  m->library = library;
  for (const auto& [name, cooperative] : kernels) {
    auto describe = reinterpret_cast<const nnc_emu_kernel* (*)()>(dlsym(library, ("nnc_emu_kernel_" + name).c_str()));
    if (!describe) return failWith(kInvalidImage, path + " lacks kernel " + name);
    auto f = std::make_unique<Function>();
    f->name = name;
    f->kernel = describe();
    f->cooperative = cooperative;
    m->functions[name] = std::move(f);
  }
  std::lock_guard<std::mutex> lock(state().mutex);
  for (auto& [name, f] : m->functions) state().functions.insert(f.get());
  *module = m.get();
  state().modules.insert(m.release());
  return kCudaSuccess;
}
// The shared object stays loaded: dlopen reference-counts it, and other modules of the same source
// share it.
CUresult emuModuleUnload(CUmodule module) {
  if (CUresult r = needContext()) return r;
  std::lock_guard<std::mutex> lock(state().mutex);
  if (!state().modules.erase(module)) return failWith(kInvalidHandle, "cuModuleUnload of an unknown module");
  auto* m = static_cast<Module*>(module);
  for (auto& [name, f] : m->functions) state().functions.erase(f.get());
  delete m;
  return kCudaSuccess;
}
CUresult emuModuleGetFunction(CUfunction* function, CUmodule module, const char* name) {
  if (CUresult r = needContext()) return r;
  if (!function || !name) return kInvalidValue;
  std::lock_guard<std::mutex> lock(state().mutex);
  if (!state().modules.count(module)) return failWith(kInvalidHandle, "cuModuleGetFunction on an unknown module");
  auto* m = static_cast<Module*>(module);
  auto it = m->functions.find(name);
  if (it == m->functions.end()) return failWith(kNotFound, std::string("the module has no kernel '") + name + "'");
  *function = it->second.get();
  return kCudaSuccess;
}

CUresult emuLaunchKernel(CUfunction function, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                         unsigned bz, unsigned sharedBytes, CUstream stream, void** params, void** extra) {
  if (CUresult r = needContext()) return r;
  const Function* f;
  {
    std::lock_guard<std::mutex> lock(state().mutex);
    if (!state().functions.count(function)) return failWith(kInvalidHandle, "cuLaunchKernel of an unknown function");
    f = static_cast<const Function*>(function);
  }
  const std::string what = "cuLaunchKernel '" + f->name + "': ";
  if (gx == 0 || gy == 0 || gz == 0 || bx == 0 || by == 0 || bz == 0)
    return failWith(kInvalidValue, what + "a zero grid or block dimension");
  if (gx > 2147483647u || gy > 65535u || gz > 65535u)
    return failWith(kInvalidValue, what + "the grid exceeds 2^31-1 x 65535 x 65535 blocks");
  if (bx > 1024u || by > 1024u || bz > 64u || static_cast<uint64_t>(bx) * by * bz > 1024u)
    return failWith(kInvalidValue, what + "more than 1024 threads per block (or a dimension beyond 1024x1024x64)");
  if (sharedBytes != 0) return failWith(kInvalidValue, what + "dynamic shared memory is not emulated");
  if (extra) return failWith(kInvalidValue, what + "the extra argument is not emulated");
  if (f->kernel->paramCount > 0 && !params) return failWith(kInvalidValue, what + "no kernelParams");
  // The arguments are copied now, as the driver does: the caller's values may change after the launch.
  auto args = std::make_shared<std::vector<std::vector<unsigned char>>>();
  for (int i = 0; i < f->kernel->paramCount; ++i) {
    if (!params[i]) return failWith(kInvalidValue, what + "kernelParams[" + std::to_string(i) + "] is null");
    const auto* bytes = static_cast<const unsigned char*>(params[i]);
    args->emplace_back(bytes, bytes + f->kernel->paramSizes[i]);
  }
  const nnc_emu_dim3 grid{gx, gy, gz}, block{bx, by, bz};
  return enqueue(stream, [f, grid, block, args](std::string* error) {
    auto copy = *args;  // a graph replays the same arguments; the kernel may not change them
    return runGrid(*f, grid, block, copy, error);
  });
}

}  // namespace

void addModuleEntryPoints(DriverApi& a) {
  a.cuModuleLoadData = emuModuleLoadData;
  a.cuModuleUnload = emuModuleUnload;
  a.cuModuleGetFunction = emuModuleGetFunction;
  a.cuLaunchKernel = emuLaunchKernel;
}

}  // namespace nnc::rt::cuda::emu::detail
