// The emulated CUDA driver API (see emulator.h): the entry points of DriverApi, with the driver's
// C ABI and error codes, on host memory, host threads and kernels compiled by the host compiler.
#include <dlfcn.h>
#include <fcntl.h>
#include <pthread.h>
#include <spawn.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <ucontext.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <sstream>
#include <thread>
#include <vector>

#include "runtime/cuda/emulator.h"
#include "targets/cuda/emulator/emulation_abi.h"
#include "targets/cuda/emulator/emulation_embed.h"

#if defined(__SANITIZE_ADDRESS__)
#define NNC_EMU_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define NNC_EMU_ASAN 1
#endif
#endif
#ifdef NNC_EMU_ASAN
#include <sanitizer/asan_interface.h>
#include <sanitizer/common_interface_defs.h>
#endif

extern char** environ;

#if defined(__SANITIZE_THREAD__)
// ThreadSanitizer's dynamic annotations (libtsan).
extern "C" {
void AnnotateIgnoreReadsBegin(const char* file, int line);
void AnnotateIgnoreReadsEnd(const char* file, int line);
void AnnotateIgnoreWritesBegin(const char* file, int line);
void AnnotateIgnoreWritesEnd(const char* file, int line);
void AnnotateIgnoreSyncBegin(const char* file, int line);
void AnnotateIgnoreSyncEnd(const char* file, int line);
void AnnotateHappensBefore(const char* file, int line, const volatile void* token);
void AnnotateHappensAfter(const char* file, int line, const volatile void* token);
}
#endif

namespace nnc::rt::cuda::emu {
namespace {

// CUresult values (cuda.h) the emulator returns.
constexpr CUresult kInvalidValue = 1;
constexpr CUresult kNotInitialized = 3;
constexpr CUresult kInvalidDevice = 101;
constexpr CUresult kInvalidImage = 200;
constexpr CUresult kInvalidContext = 201;
constexpr CUresult kInvalidHandle = 400;
constexpr CUresult kIllegalState = 401;
constexpr CUresult kNotFound = 500;
constexpr CUresult kIllegalAddress = 700;
constexpr CUresult kLaunchFailed = 719;
constexpr CUresult kCaptureUnsupported = 900;
constexpr CUresult kCaptureInvalidated = 901;
constexpr CUresult kUnknown = 999;

const char* errorName(CUresult r) {
  switch (r) {
    case kCudaSuccess: return "CUDA_SUCCESS";
    case kInvalidValue: return "CUDA_ERROR_INVALID_VALUE";
    case kCudaErrorOutOfMemory: return "CUDA_ERROR_OUT_OF_MEMORY";
    case kNotInitialized: return "CUDA_ERROR_NOT_INITIALIZED";
    case kInvalidDevice: return "CUDA_ERROR_INVALID_DEVICE";
    case kInvalidImage: return "CUDA_ERROR_INVALID_IMAGE";
    case kInvalidContext: return "CUDA_ERROR_INVALID_CONTEXT";
    case kInvalidHandle: return "CUDA_ERROR_INVALID_HANDLE";
    case kIllegalState: return "CUDA_ERROR_ILLEGAL_STATE";
    case kNotFound: return "CUDA_ERROR_NOT_FOUND";
    case kIllegalAddress: return "CUDA_ERROR_ILLEGAL_ADDRESS";
    case kLaunchFailed: return "CUDA_ERROR_LAUNCH_FAILED";
    case kCaptureUnsupported: return "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED";
    case kCaptureInvalidated: return "CUDA_ERROR_STREAM_CAPTURE_INVALIDATED";
    default: return nullptr;
  }
}

// The emulator's own explanation of the last failure with each code (cuGetErrorString returns it,
// so the executor's messages carry it). Interned: the returned pointers stay valid.
std::mutex gReasonsMutex;
std::map<CUresult, const std::string*> gReasons;
std::deque<std::string> gReasonStore;

CUresult failWith(CUresult r, const std::string& reason) {
  std::lock_guard<std::mutex> lock(gReasonsMutex);
  gReasonStore.push_back(reason);
  gReasons[r] = &gReasonStore.back();
  return r;
}

// ---------------------------------------------------------------------------------------------
// Device memory: host allocations, 256-byte aligned like cuMemAlloc's, between two guard zones. New
// memory is filled with 0xff bytes (NaN for floats) so that a read of never-written device memory
// shows in results instead of reading zeros by luck.

constexpr size_t kGuardBytes = 256;
constexpr unsigned char kGuardByte = 0xa5;
constexpr size_t kEmulatedDeviceBytes = size_t{16} << 30;

struct Allocation {
  unsigned char* base = nullptr;  // what was allocated: guard, user bytes, guard
  size_t size = 0;                // the user's bytes
};

// Everything the emulated driver keeps, under one mutex (launches run under another, see below).
struct State {
  std::mutex mutex;
  bool initialized = false;
  int primaryRetains = 0;
  std::map<uint64_t, Allocation> allocations;  // by user pointer
  size_t allocatedBytes = 0;
  std::set<void*> streams, modules, functions, graphs, graphExecs;
};
State& state() {
  static State* s = new State();  // never destroyed: other static destructors may still free memory
  return *s;
}

// Serialises all device work: one kernel (one block) runs at a time in the process, which keeps
// __shared__ statics per block and the modules' thread-locals simple.
std::mutex& workMutex() {
  static std::mutex* m = new std::mutex();
  return *m;
}

// Which allocation holds [ptr, ptr + bytes); null when none does. Caller holds state().mutex.
const Allocation* findAllocation(State& s, uint64_t ptr, uint64_t* start) {
  auto it = s.allocations.upper_bound(ptr);
  if (it == s.allocations.begin()) return nullptr;
  --it;
  if (ptr - it->first > it->second.size) return nullptr;
  *start = it->first;
  return &it->second;
}

std::string hex(uint64_t v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "0x%llx", static_cast<unsigned long long>(v));
  return buf;
}

// The first guard byte that changed, described; empty when both guards are intact. Under ASan the
// guards are poisoned (an access is reported where it happens) and not read here.
std::string checkGuards([[maybe_unused]] uint64_t start, [[maybe_unused]] const Allocation& a) {
#ifndef NNC_EMU_ASAN
  for (size_t i = 0; i < kGuardBytes; ++i) {
    if (a.base[kGuardBytes - 1 - i] != kGuardByte)
      return "a write " + std::to_string(i + 1) + " bytes before the " + std::to_string(a.size) +
             "-byte device allocation at " + hex(start);
    if (a.base[kGuardBytes + a.size + i] != kGuardByte)
      return "a write " + std::to_string(i) + " bytes past the end of the " + std::to_string(a.size) +
             "-byte device allocation at " + hex(start);
  }
#endif
  return "";
}

std::string checkAllGuards() {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  for (const auto& [start, a] : s.allocations)
    if (std::string why = checkGuards(start, a); !why.empty()) return why;
  return "";
}

// ---------------------------------------------------------------------------------------------
// Contexts: one device, one primary context; the current-context stack is per thread.

thread_local int tlsContextDepth = 0;
thread_local void* tlsCapturingStream = nullptr;  // capture mode thread-local: this thread's capture
char gPrimaryContext;

CUresult needContext() {
  if (!state().initialized) return kNotInitialized;
  return tlsContextDepth > 0 ? kCudaSuccess : kInvalidContext;
}

// ---------------------------------------------------------------------------------------------
// Streams and graphs. A stream runs its work as it is enqueued; while capturing, it records it.

using Work = std::function<bool(std::string* error)>;

struct Stream {
  bool capturing = false;
  bool captureInvalidated = false;
  std::vector<Work> captured;
  CUresult stickyError = kCudaSuccess;  // the first failure, reported by every later call
};
struct Graph {
  std::vector<Work> work;
};

// The NULL stream (and CU_STREAM_LEGACY = 1, CU_STREAM_PER_THREAD = 2): all work runs in order anyway.
Stream gDefaultStream;

Stream* findStream(State& s, CUstream h) {
  if (reinterpret_cast<uintptr_t>(h) <= 2) return &gDefaultStream;
  return s.streams.count(h) ? static_cast<Stream*>(h) : nullptr;
}

// Runs work now (under the work mutex); a failure becomes the stream's sticky error.
CUresult runWork(Stream* stream, const Work& work) {
  std::string error;
  bool ok;
  {
    std::lock_guard<std::mutex> lock(workMutex());
    ok = work(&error);
  }
  if (ok) return kCudaSuccess;
  std::fprintf(stderr, "nnc cuda emulator: %s\n", error.c_str());
  CUresult code = error.rfind("illegal address", 0) == 0 ? kIllegalAddress : kLaunchFailed;
  stream->stickyError = failWith(code, error);
  return kCudaSuccess;  // asynchronous: the error shows at the next synchronisation
}

CUresult enqueueWork(CUstream h, Work work) {
  State& s = state();
  Stream* stream;
  {
    std::lock_guard<std::mutex> lock(s.mutex);
    stream = findStream(s, h);
    if (!stream) return failWith(kInvalidHandle, "not a stream of the emulated driver");
    if (stream->stickyError != kCudaSuccess) return stream->stickyError;
    if (stream->capturing) {
      stream->captured.push_back(std::move(work));
      return kCudaSuccess;
    }
  }
  return runWork(stream, work);
}

// A capture is invalidated by an operation it cannot record, made by the capturing thread.
CUresult refuseDuringCapture(const char* what) {
  if (!tlsCapturingStream) return kCudaSuccess;
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  if (Stream* stream = findStream(s, tlsCapturingStream)) stream->captureInvalidated = true;
  return failWith(kCaptureUnsupported, std::string(what) + " is not allowed while this thread captures a stream");
}

// ---------------------------------------------------------------------------------------------
// Modules: the CUDA C++ source compiled by the host compiler into a shared object (cached on disk
// by a hash of everything that goes into it), dlopen'ed.

struct Function {
  std::string name;
  const nnc_emu_kernel* kernel = nullptr;
  bool cooperative = false;  // uses barriers, shuffles or shared memory: threads run concurrently
};
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

// ---------------------------------------------------------------------------------------------
// Running a grid. A block of a cooperative kernel runs its threads as OS threads from a pool (a
// barrier really waits; ThreadSanitizer sees real threads), the others run thread after thread.

struct BlockFailure {};  // thrown out of a hook: the block failed, unwind the thread

// Under ThreadSanitizer the emulator's own locks must not order the emulated threads' memory
// accesses (a GPU's threads synchronise only at __syncthreads): its bookkeeping runs inside an
// IgnoreTsan scope (neither its accesses nor its locks are seen), and the orderings a GPU does give —
// a barrier, the launch before its threads, the threads before what follows the launch — are
// annotated explicitly (happensBefore/After on a token). No-ops in other builds.
#if defined(__SANITIZE_THREAD__)
struct IgnoreTsan {
  IgnoreTsan() {
    AnnotateIgnoreReadsBegin(__FILE__, __LINE__);
    AnnotateIgnoreWritesBegin(__FILE__, __LINE__);
    AnnotateIgnoreSyncBegin(__FILE__, __LINE__);
  }
  ~IgnoreTsan() {
    AnnotateIgnoreSyncEnd(__FILE__, __LINE__);
    AnnotateIgnoreWritesEnd(__FILE__, __LINE__);
    AnnotateIgnoreReadsEnd(__FILE__, __LINE__);
  }
  IgnoreTsan(const IgnoreTsan&) = delete;
  IgnoreTsan& operator=(const IgnoreTsan&) = delete;
};
void happensBefore(const void* token) { AnnotateHappensBefore(__FILE__, __LINE__, token); }
void happensAfter(const void* token) { AnnotateHappensAfter(__FILE__, __LINE__, token); }
#else
struct IgnoreTsan {
  IgnoreTsan() {}  // user-provided: a scope variable of this type is not "unused"
  ~IgnoreTsan() {}
};
void happensBefore(const void*) {}
void happensAfter(const void*) {}
#endif

struct WarpState {
  std::condition_variable cv;
  unsigned arrived = 0;  // lanes that entered the current shuffle
  unsigned mask = 0;     // the mask of the current shuffle (every lane must pass the same)
  bool draining = false;
  int readers = 0;
  uint64_t generation = 0;
  unsigned long long values[32] = {};
  int waitingLaneMask = 0;
};

struct BlockState;
void yieldFiber();  // the fiber runner's: back to its scheduler until this fiber is resumed

struct BlockState {
  bool fibers = false;    // the threads are fibers of one OS thread (else OS threads)
  uint64_t progress = 0;  // waits that ended and threads that returned (the fiber scheduler's check)
  std::mutex mutex;
  std::condition_variable barrier;
  std::string kernel;
  int threads = 0;
  int arrived = 0;  // at the current __syncthreads
  uint64_t barrierGeneration = 0;
  char barrierTokens[2] = {};  // ThreadSanitizer: the barrier's ordering, by generation parity
  int blocked = 0;             // waiting at a barrier or shuffle
  int exited = 0;
  bool failed = false;
  std::string failure;
  std::vector<std::unique_ptr<WarpState>> warps;

  void reset(const std::string& name, int n, bool asFibers) {
    fibers = asFibers;
    kernel = name;
    threads = n;
    arrived = blocked = exited = 0;
    failed = false;
    failure.clear();
    const size_t warpCount = static_cast<size_t>((n + 31) / 32);
    while (warps.size() < warpCount) warps.push_back(std::make_unique<WarpState>());
    for (auto& w : warps) {
      w->arrived = w->mask = 0;
      w->draining = false;
      w->readers = 0;
    }
  }
  // Under `lock` (of mutex): returns when `ready()`; an OS thread sleeps on `cv`, a fiber yields.
  template <class Ready>
  void waitUntil(std::unique_lock<std::mutex>& lock, std::condition_variable& cv, Ready ready) {
    if (fibers) {
      while (!ready()) {
        lock.unlock();
        yieldFiber();
        lock.lock();
      }
    } else {
      cv.wait(lock, ready);
    }
    ++progress;
  }
  // Under mutex.
  void fail(const std::string& why) {
    if (!failed) failure = why;
    failed = true;
    barrier.notify_all();
    for (auto& w : warps) w->cv.notify_all();
  }
  void threadReturned() {
    IgnoreTsan ignore;
    std::lock_guard<std::mutex> lock(mutex);
    ++exited;
    ++progress;
    checkDeadlock();
  }
  // Under mutex: every thread is waiting or gone, and some wait: nothing can ever wake them.
  void checkDeadlock() {
    if (blocked == 0 || blocked + exited < threads) return;
    std::string why = "the block can never finish: ";
    why += std::to_string(arrived) + " of " + std::to_string(threads) + " threads wait at __syncthreads";
    for (size_t w = 0; w < warps.size(); ++w)
      if (warps[w]->arrived)
        why += "; lanes " + hex(warps[w]->arrived) + " of warp " + std::to_string(w) + " wait at a shuffle with mask " +
               hex(warps[w]->mask);
    why += "; " + std::to_string(exited) + " returned";
    fail(why);
  }
};

thread_local BlockState* tlsBlock = nullptr;  // null: running sequentially
thread_local int tlsThread = 0;               // linear thread index within the block
thread_local const char* tlsKernel = "";

[[noreturn]] void notCooperative(const char* what) {
  throw std::runtime_error(std::string("kernel '") + tlsKernel + "' calls " + what +
                           ", but the emulator found no barrier, shuffle or shared memory in its source");
}

void syncthreads(BlockState* b);

// Everything each thread did before the barrier happens before everything any thread does after it
// (for ThreadSanitizer: a token per generation parity, so a thread already at the next barrier adds
// nothing to this one).
void hookSyncthreads() {
  BlockState* b = tlsBlock;
  if (!b) notCooperative("__syncthreads");
  const void* token;
  {
    IgnoreTsan ignore;
    std::lock_guard<std::mutex> lock(b->mutex);
    token = &b->barrierTokens[b->barrierGeneration & 1];
  }
  happensBefore(token);
  syncthreads(b);
  happensAfter(token);
}

void syncthreads(BlockState* b) {
  IgnoreTsan ignore;
  std::unique_lock<std::mutex> lock(b->mutex);
  if (b->failed) throw BlockFailure();
  if (++b->arrived == b->threads) {
    b->arrived = 0;
    ++b->barrierGeneration;
    b->blocked -= b->threads - 1;
    b->barrier.notify_all();
    return;
  }
  const uint64_t generation = b->barrierGeneration;
  ++b->blocked;
  b->checkDeadlock();
  b->waitUntil(lock, b->barrier, [&] { return b->failed || b->barrierGeneration != generation; });
  if (b->barrierGeneration == generation) throw BlockFailure();
}

// A shuffle exchanges registers; it orders no memory accesses (ThreadSanitizer sees none).
unsigned long long hookShflXor(unsigned mask, unsigned long long bits, int laneMask, int width) {
  BlockState* b = tlsBlock;
  if (!b) notCooperative("a warp shuffle");
  IgnoreTsan ignore;
  const int lane = tlsThread % 32;
  const size_t warp = static_cast<size_t>(tlsThread / 32);
  const int lanesInWarp = std::min(32, b->threads - static_cast<int>(warp) * 32);
  const unsigned present = lanesInWarp == 32 ? 0xffffffffu : ((1u << lanesInWarp) - 1u);
  std::unique_lock<std::mutex> lock(b->mutex);
  if (b->failed) throw BlockFailure();
  auto where = [&] { return "thread " + std::to_string(tlsThread) + ": __shfl_xor_sync"; };
  if (width < 1 || width > 32 || (width & (width - 1)) != 0) {
    b->fail(where() + " with width " + std::to_string(width) + " (must be a power of two up to 32)");
    throw BlockFailure();
  }
  if (!((mask >> lane) & 1u)) {
    b->fail(where() + " with mask " + hex(mask) + ", which does not name the calling lane " + std::to_string(lane));
    throw BlockFailure();
  }
  if (mask & ~present) {
    b->fail(where() + " with mask " + hex(mask) + " names lanes the block does not have (its last warp has " +
            std::to_string(lanesInWarp) + " lanes)");
    throw BlockFailure();
  }
  WarpState& w = *b->warps[warp];
  b->waitUntil(lock, w.cv, [&] { return b->failed || !w.draining; });
  if (b->failed) throw BlockFailure();
  if (w.arrived != 0 && w.mask != mask) {
    b->fail(where() + ": the lanes of warp " + std::to_string(warp) + " disagree on the mask (" + hex(w.mask) +
            " and " + hex(mask) + ")");
    throw BlockFailure();
  }
  w.mask = mask;
  w.values[lane] = bits;
  w.arrived |= 1u << lane;
  const uint64_t generation = w.generation;
  if (w.arrived == mask) {
    w.draining = true;
    w.readers = std::popcount(mask);
    b->blocked -= w.readers - 1;
    w.cv.notify_all();
  } else {
    ++b->blocked;
    b->checkDeadlock();
    b->waitUntil(lock, w.cv, [&] { return b->failed || (w.draining && w.generation == generation); });
    if (!(w.draining && w.generation == generation)) throw BlockFailure();
  }
  const int source = (lane & ~(width - 1)) | ((lane ^ laneMask) & (width - 1));
  if (!((mask >> source) & 1u)) {
    b->fail(where() + ": lane " + std::to_string(lane) + " reads lane " + std::to_string(source) + ", which the mask " +
            hex(mask) + " does not name");
    throw BlockFailure();
  }
  const unsigned long long value = w.values[source];
  if (--w.readers == 0) {
    w.draining = false;
    w.arrived = 0;
    ++w.generation;
    w.cv.notify_all();
  }
  return value;
}

const nnc_emu_hooks kHooks = {NNC_EMU_HOOKS_VERSION, hookSyncthreads, hookShflXor};

// Runs one emulated thread; false with *error when it threw.
bool runThread(const Function& f, const nnc_emu_thread& where, void** params, std::string* error) {
  try {
    f.kernel->run(&where, params);
    return true;
  } catch (const BlockFailure&) {
    return false;  // the block's failure says why
  } catch (const std::exception& e) {
    *error = e.what();
    return false;
  }
}

// Runs a cooperative block's threads as OS threads from a pool (grown on demand): what
// ThreadSanitizer needs to see the races a missing __syncthreads leaves. The workers are joined at
// exit, before LeakSanitizer's exit-time check (which cannot stop hundreds of waiting threads). A
// forked child starts a pool of its own (its parent's threads do not exist there; the old pool is
// abandoned, never touched again).
class ThreadBlockRunner {
 public:
  static ThreadBlockRunner& get() {
    static ThreadBlockRunner*& runner = []() -> ThreadBlockRunner*& {
      static ThreadBlockRunner* r = new ThreadBlockRunner();
      std::atexit([] { get().stop(); });
      pthread_atfork(nullptr, nullptr, [] { r = new ThreadBlockRunner(); });
      return r;
    }();
    return *runner;
  }

  // Runs every thread of the block described by `where` (its thread field ignored); false with
  // *error when the block failed.
  bool run(const Function& f, const nnc_emu_thread& where, void** params, std::string* error) {
    const int threads = static_cast<int>(where.blockDim.x * where.blockDim.y * where.blockDim.z);
    happensBefore(&startToken_);  // the launch before its threads
    std::string failure;
    {
      IgnoreTsan ignore;  // the pool's handshakes are not the kernel's synchronisation
      std::unique_lock<std::mutex> lock(mutex_);
      while (static_cast<int>(workers_.size()) < threads) {
        const int index = static_cast<int>(workers_.size());
        workers_.emplace_back([this, index] { work(index); });
      }
      block_.reset(f.name, threads, false);
      function_ = &f;
      where_ = where;
      params_ = params;
      threads_ = threads;
      remaining_ = threads;
      threadErrors_.clear();
      ++job_;
      start_.notify_all();
      done_.wait(lock, [&] { return remaining_ == 0; });
      function_ = nullptr;
      failure = threadErrors_;
      std::lock_guard<std::mutex> blockLock(block_.mutex);
      if (failure.empty() && block_.failed) failure = block_.failure;
    }
    happensAfter(&doneToken_);  // the threads before what follows the launch
    if (failure.empty()) return true;
    *error = failure;
    return false;
  }

 private:
  void stop() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stopping_ = true;
      start_.notify_all();
    }
    for (std::thread& t : workers_) t.join();
    workers_.clear();
  }

  void work(int index) {
    uint64_t seen = 0;
    for (;;) {
      const Function* f = nullptr;
      nnc_emu_thread where{};
      void** params = nullptr;
      {
        IgnoreTsan ignore;
        std::unique_lock<std::mutex> lock(mutex_);
        start_.wait(lock, [&] { return stopping_ || job_ != seen; });
        if (stopping_) return;
        seen = job_;
        if (index >= threads_) continue;
        f = function_;
        where = where_;
        params = params_;
      }
      happensAfter(&startToken_);
      const unsigned bx = where.blockDim.x, by = where.blockDim.y;
      where.thread = {static_cast<unsigned>(index) % bx, static_cast<unsigned>(index) / bx % by,
                      static_cast<unsigned>(index) / (bx * by)};
      tlsBlock = &block_;
      tlsThread = index;
      tlsKernel = f->name.c_str();
      std::string error;
      const bool ok = runThread(*f, where, params, &error);
      tlsBlock = nullptr;
      block_.threadReturned();
      happensBefore(&doneToken_);
      IgnoreTsan ignore;
      std::lock_guard<std::mutex> lock(mutex_);
      if (!ok && !error.empty() && threadErrors_.empty()) threadErrors_ = error;
      if (--remaining_ == 0) done_.notify_all();
    }
  }

  char startToken_ = 0, doneToken_ = 0;  // ThreadSanitizer: the orderings the pool stands for
  std::mutex mutex_;
  std::condition_variable start_, done_;
  std::vector<std::thread> workers_;
  bool stopping_ = false;
  uint64_t job_ = 0;
  BlockState block_;
  const Function* function_ = nullptr;
  nnc_emu_thread where_{};
  void** params_ = nullptr;
  int threads_ = 0;
  int remaining_ = 0;
  std::string threadErrors_;
};

// Runs a cooperative block's threads as fibers (ucontext) on the launching thread, round-robin: a
// thread runs until it waits at a barrier or shuffle or returns. Orders of magnitude cheaper than
// waking OS threads for every shuffle; the default except under ThreadSanitizer.
class FiberBlockRunner {
 public:
  static FiberBlockRunner& get() {
    static FiberBlockRunner* runner = new FiberBlockRunner();
    return *runner;
  }

  bool run(const Function& f, const nnc_emu_thread& where, void** params, std::string* error) {
    const int threads = static_cast<int>(where.blockDim.x * where.blockDim.y * where.blockDim.z);
    while (static_cast<int>(fibers_.size()) < threads) {
      auto fiber = std::make_unique<Fiber>();
      // A guard page below each stack turns an overflow into a fault, not corruption.
      void* stack = mmap(nullptr, kStackBytes + kPageBytes, PROT_READ | PROT_WRITE,
                         MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
      if (stack == MAP_FAILED) {
        *error = "cannot map an emulated thread's stack";
        return false;
      }
      mprotect(stack, kPageBytes, PROT_NONE);
      fiber->stack = static_cast<char*>(stack) + kPageBytes;
      fibers_.push_back(std::move(fiber));
    }
    block_.reset(f.name, threads, true);
    function_ = &f;
    params_ = params;
    threadError_.clear();
    const unsigned bx = where.blockDim.x, by = where.blockDim.y;
    for (int i = 0; i < threads; ++i) {
      Fiber& fb = *fibers_[i];
      fb.where = where;
      const unsigned u = static_cast<unsigned>(i);
      fb.where.thread = {u % bx, u / bx % by, u / (bx * by)};
      fb.done = false;
      getcontext(&fb.context);
      fb.context.uc_stack.ss_sp = fb.stack;
      fb.context.uc_stack.ss_size = kStackBytes;
      fb.context.uc_link = nullptr;
      makecontext(&fb.context, &FiberBlockRunner::entry, 0);
    }
    tlsBlock = &block_;
    tlsKernel = f.name.c_str();
    for (int unfinished = threads; unfinished > 0;) {
      const uint64_t before = block_.progress;
      unfinished = 0;
      for (int i = 0; i < threads; ++i) {
        Fiber& fb = *fibers_[i];
        if (fb.done) continue;
        current_ = i;
        tlsThread = i;
        f.kernel->enter(&fb.where);  // the module's threadIdx & co. are per OS thread: this fiber's now
        switchTo(&scheduler_, &fb.context, fb.stack, kStackBytes, false);
        unfinished += fb.done ? 0 : 1;
      }
      if (unfinished > 0 && block_.progress == before) {
        std::lock_guard<std::mutex> lock(block_.mutex);
        block_.fail("no thread can proceed (an emulator bug: its deadlock check missed it)");
      }
    }
    tlsBlock = nullptr;
    function_ = nullptr;
    if (!threadError_.empty()) {
      *error = threadError_;
      return false;
    }
    if (block_.failed) {
      *error = block_.failure;
      return false;
    }
    return true;
  }

  void yield() {
    Fiber& fb = *fibers_[current_];
    switchTo(&fb.context, &scheduler_, schedulerStack_, schedulerStackBytes_, false);
  }

 private:
  static constexpr size_t kStackBytes = size_t{256} << 10;
  static constexpr size_t kPageBytes = 4096;
  struct Fiber {
    ucontext_t context;
    char* stack = nullptr;
    bool done = false;
    nnc_emu_thread where{};
  };

  // AddressSanitizer must know which stack is live (its fiber annotations); `dying`: the fiber we
  // leave never runs again.
  void switchTo(ucontext_t* from, ucontext_t* to, const void* toStack, size_t toBytes, bool dying) {
#ifdef NNC_EMU_ASAN
    void* fakeStack = nullptr;
    __sanitizer_start_switch_fiber(dying ? nullptr : &fakeStack, toStack, toBytes);
#else
    (void)toStack, (void)toBytes, (void)dying;
#endif
    swapcontext(from, to);
#ifdef NNC_EMU_ASAN
    __sanitizer_finish_switch_fiber(fakeStack, nullptr, nullptr);
#endif
  }

  static void entry() {
    FiberBlockRunner& r = get();
#ifdef NNC_EMU_ASAN
    __sanitizer_finish_switch_fiber(nullptr, &r.schedulerStack_, &r.schedulerStackBytes_);
#endif
    Fiber& fb = *r.fibers_[r.current_];
    std::string error;
    if (!runThread(*r.function_, fb.where, r.params_, &error) && !error.empty() && r.threadError_.empty())
      r.threadError_ = error;
    r.block_.threadReturned();
    fb.done = true;
    r.switchTo(&fb.context, &r.scheduler_, r.schedulerStack_, r.schedulerStackBytes_, true);
  }

  std::vector<std::unique_ptr<Fiber>> fibers_;
  ucontext_t scheduler_{};
  const void* schedulerStack_ = nullptr;
  size_t schedulerStackBytes_ = 0;
  BlockState block_;
  const Function* function_ = nullptr;
  void** params_ = nullptr;
  int current_ = 0;
  std::string threadError_;
};

void yieldFiber() { FiberBlockRunner::get().yield(); }

// Fibers, unless NNC_EMULATE_THREADS=os (read at each launch) or this is a ThreadSanitizer build.
bool useOsThreads() {
#if defined(__SANITIZE_THREAD__)
  return true;
#else
  const char* v = std::getenv("NNC_EMULATE_THREADS");
  return v && std::strcmp(v, "os") == 0;
#endif
}

bool runGrid(const Function& f, const nnc_emu_dim3& grid, const nnc_emu_dim3& block,
             std::vector<std::vector<unsigned char>>& args, std::string* error) {
  void* params[NNC_EMU_MAX_PARAMS];
  for (size_t i = 0; i < args.size(); ++i) params[i] = args[i].data();
  nnc_emu_thread where{};
  where.blockDim = block;
  where.gridDim = grid;
  const std::string context = "kernel '" + f.name + "'";
  const bool osThreads = f.cooperative && useOsThreads();  // once per launch, not per block
  for (unsigned z = 0; z < grid.z; ++z)
    for (unsigned y = 0; y < grid.y; ++y)
      for (unsigned x = 0; x < grid.x; ++x) {
        where.block = {x, y, z};
        std::string why;
        if (f.cooperative) {
          const bool ok = osThreads ? ThreadBlockRunner::get().run(f, where, params, &why)
                                    : FiberBlockRunner::get().run(f, where, params, &why);
          if (!ok) {
            *error = context + " block (" + std::to_string(x) + "," + std::to_string(y) + "," + std::to_string(z) +
                     "): " + why;
            return false;
          }
          continue;
        }
        tlsKernel = f.name.c_str();
        for (unsigned tz = 0; tz < block.z; ++tz)
          for (unsigned ty = 0; ty < block.y; ++ty)
            for (unsigned tx = 0; tx < block.x; ++tx) {
              where.thread = {tx, ty, tz};
              if (!runThread(f, where, params, &why)) {
                *error = context + ": " + why;
                return false;
              }
            }
      }
  return true;
}

// ---------------------------------------------------------------------------------------------
// The entry points.

CUresult emuInit(unsigned flags) {
  if (flags != 0) return failWith(kInvalidValue, "cuInit takes flags 0");
  std::lock_guard<std::mutex> lock(state().mutex);
  state().initialized = true;
  return kCudaSuccess;
}
CUresult emuDriverGetVersion(int* version) {
  if (!version) return kInvalidValue;
  *version = 13000;
  return kCudaSuccess;
}
CUresult emuDeviceGetCount(int* count) {
  if (!state().initialized) return kNotInitialized;
  if (!count) return kInvalidValue;
  *count = 1;
  return kCudaSuccess;
}
CUresult emuDeviceGet(CUdevice* device, int ordinal) {
  if (!state().initialized) return kNotInitialized;
  if (!device) return kInvalidValue;
  if (ordinal != 0) return kInvalidDevice;
  *device = 0;
  return kCudaSuccess;
}
CUresult emuDeviceGetName(char* name, int length, CUdevice device) {
  if (!state().initialized) return kNotInitialized;
  if (device != 0) return kInvalidDevice;
  if (!name || length <= 0) return kInvalidValue;
  std::snprintf(name, static_cast<size_t>(length), "%s", "nnc CUDA emulator (CPU)");
  return kCudaSuccess;
}
CUresult emuDeviceGetAttribute(int* value, int attribute, CUdevice device) {
  if (!state().initialized) return kNotInitialized;
  if (device != 0) return kInvalidDevice;
  if (!value) return kInvalidValue;
  if (attribute == kAttrComputeCapabilityMajor)
    *value = 9;
  else if (attribute == kAttrComputeCapabilityMinor)
    *value = 0;
  else
    return failWith(kInvalidValue, "the emulator knows no device attribute " + std::to_string(attribute));
  return kCudaSuccess;
}
CUresult emuPrimaryCtxRetain(CUcontext* context, CUdevice device) {
  if (!state().initialized) return kNotInitialized;
  if (device != 0) return kInvalidDevice;
  if (!context) return kInvalidValue;
  std::lock_guard<std::mutex> lock(state().mutex);
  ++state().primaryRetains;
  *context = &gPrimaryContext;
  return kCudaSuccess;
}
CUresult emuPrimaryCtxRelease(CUdevice device) {
  if (!state().initialized) return kNotInitialized;
  if (device != 0) return kInvalidDevice;
  std::lock_guard<std::mutex> lock(state().mutex);
  if (state().primaryRetains == 0) return failWith(kInvalidContext, "cuDevicePrimaryCtxRelease without a retain");
  --state().primaryRetains;
  return kCudaSuccess;
}
CUresult emuCtxPushCurrent(CUcontext context) {
  if (!state().initialized) return kNotInitialized;
  if (context != &gPrimaryContext) return failWith(kInvalidContext, "not the emulated device's primary context");
  ++tlsContextDepth;
  return kCudaSuccess;
}
CUresult emuCtxPopCurrent(CUcontext* context) {
  if (!state().initialized) return kNotInitialized;
  if (tlsContextDepth == 0) return failWith(kInvalidContext, "cuCtxPopCurrent with no context current");
  --tlsContextDepth;
  if (context) *context = &gPrimaryContext;
  return kCudaSuccess;
}

CUresult emuStreamCreate(CUstream* stream, unsigned flags) {
  if (CUresult r = needContext()) return r;
  if (!stream || (flags & ~kStreamNonBlocking)) return kInvalidValue;
  auto* s = new Stream();
  std::lock_guard<std::mutex> lock(state().mutex);
  state().streams.insert(s);
  *stream = s;
  return kCudaSuccess;
}
CUresult emuStreamDestroy(CUstream stream) {
  if (CUresult r = needContext()) return r;
  std::lock_guard<std::mutex> lock(state().mutex);
  if (!state().streams.erase(stream)) return failWith(kInvalidHandle, "cuStreamDestroy of an unknown stream");
  delete static_cast<Stream*>(stream);
  return kCudaSuccess;
}
CUresult emuStreamSynchronize(CUstream stream) {
  if (CUresult r = needContext()) return r;
  State& s = state();
  {
    std::lock_guard<std::mutex> lock(s.mutex);
    Stream* st = findStream(s, stream);
    if (!st) return failWith(kInvalidHandle, "cuStreamSynchronize of an unknown stream");
    if (st->capturing) {
      st->captureInvalidated = true;
      return failWith(kCaptureUnsupported, "cuStreamSynchronize of a capturing stream");
    }
    if (st->stickyError != kCudaSuccess) return st->stickyError;
  }
  if (std::string why = checkAllGuards(); !why.empty()) {
    std::lock_guard<std::mutex> lock(s.mutex);
    findStream(s, stream)->stickyError = failWith(kIllegalAddress, "illegal address: " + why);
    std::fprintf(stderr, "nnc cuda emulator: illegal address: %s\n", why.c_str());
    return kIllegalAddress;
  }
  return kCudaSuccess;
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

CUresult emuMemAlloc(CUdeviceptr* ptr, size_t bytes) {
  if (CUresult r = needContext()) return r;
  if (CUresult r = refuseDuringCapture("cuMemAlloc")) return r;
  if (!ptr || bytes == 0) return kInvalidValue;
  State& s = state();
  {
    std::lock_guard<std::mutex> lock(s.mutex);
    if (bytes > kEmulatedDeviceBytes - s.allocatedBytes) return kCudaErrorOutOfMemory;
  }
  const size_t total = kGuardBytes + ((bytes + kGuardBytes - 1) / kGuardBytes) * kGuardBytes + kGuardBytes;
  auto* base = static_cast<unsigned char*>(std::aligned_alloc(kGuardBytes, total));
  if (!base) return kCudaErrorOutOfMemory;
  std::memset(base, kGuardByte, total);
  std::memset(base + kGuardBytes, 0xff, bytes);
#ifdef NNC_EMU_ASAN
  ASAN_POISON_MEMORY_REGION(base, kGuardBytes);
  ASAN_POISON_MEMORY_REGION(base + kGuardBytes + bytes, total - kGuardBytes - bytes);
#endif
  const uint64_t user = reinterpret_cast<uintptr_t>(base + kGuardBytes);
  std::lock_guard<std::mutex> lock(s.mutex);
  s.allocations[user] = Allocation{base, bytes};
  s.allocatedBytes += bytes;
  *ptr = user;
  return kCudaSuccess;
}
CUresult emuMemFree(CUdeviceptr ptr) {
  if (CUresult r = needContext()) return r;
  if (CUresult r = refuseDuringCapture("cuMemFree")) return r;
  State& s = state();
  Allocation a;
  {
    std::lock_guard<std::mutex> lock(s.mutex);
    auto it = s.allocations.find(ptr);
    if (it == s.allocations.end())
      return failWith(kInvalidValue, "cuMemFree of " + hex(ptr) + ", which is not the start of a device allocation");
    a = it->second;
    s.allocatedBytes -= a.size;
    s.allocations.erase(it);
  }
  const std::string why = checkGuards(ptr, a);
#ifdef NNC_EMU_ASAN
  ASAN_UNPOISON_MEMORY_REGION(a.base,
                              kGuardBytes + ((a.size + kGuardBytes - 1) / kGuardBytes) * kGuardBytes + kGuardBytes);
#endif
  std::free(a.base);
  if (!why.empty()) return failWith(kIllegalAddress, "illegal address: " + why);
  return kCudaSuccess;
}
CUresult emuMemGetInfo(size_t* freeBytes, size_t* totalBytes) {
  if (CUresult r = needContext()) return r;
  if (!freeBytes || !totalBytes) return kInvalidValue;
  std::lock_guard<std::mutex> lock(state().mutex);
  *totalBytes = kEmulatedDeviceBytes;
  *freeBytes = kEmulatedDeviceBytes - state().allocatedBytes;
  return kCudaSuccess;
}

CUresult checkDeviceRange(uint64_t ptr, size_t bytes, const char* call, const char* which) {
  std::string why;
  if (isDeviceRange(ptr, bytes, &why)) return kCudaSuccess;
  return failWith(kInvalidValue, std::string(call) + ": the " + which + " " + why);
}

CUresult emuMemcpyHtoDAsync(CUdeviceptr dst, const void* src, size_t bytes, CUstream stream) {
  if (CUresult r = needContext()) return r;
  if (CUresult r = checkDeviceRange(dst, bytes, "cuMemcpyHtoDAsync", "destination")) return r;
  if (!src && bytes) return kInvalidValue;
  return enqueueWork(stream, [=](std::string*) {
    if (bytes) std::memcpy(reinterpret_cast<void*>(static_cast<uintptr_t>(dst)), src, bytes);
    return true;
  });
}
CUresult emuMemcpyDtoHAsync(void* dst, CUdeviceptr src, size_t bytes, CUstream stream) {
  if (CUresult r = needContext()) return r;
  if (CUresult r = checkDeviceRange(src, bytes, "cuMemcpyDtoHAsync", "source")) return r;
  if (!dst && bytes) return kInvalidValue;
  return enqueueWork(stream, [=](std::string*) {
    if (bytes) std::memcpy(dst, reinterpret_cast<const void*>(static_cast<uintptr_t>(src)), bytes);
    return true;
  });
}
CUresult emuMemcpyDtoDAsync(CUdeviceptr dst, CUdeviceptr src, size_t bytes, CUstream stream) {
  if (CUresult r = needContext()) return r;
  if (CUresult r = checkDeviceRange(dst, bytes, "cuMemcpyDtoDAsync", "destination")) return r;
  if (CUresult r = checkDeviceRange(src, bytes, "cuMemcpyDtoDAsync", "source")) return r;
  return enqueueWork(stream, [=](std::string*) {
    if (bytes)
      std::memmove(reinterpret_cast<void*>(static_cast<uintptr_t>(dst)),
                   reinterpret_cast<const void*>(static_cast<uintptr_t>(src)), bytes);
    return true;
  });
}
CUresult emuPointerGetAttribute(void* data, int attribute, CUdeviceptr ptr) {
  if (!state().initialized) return kNotInitialized;
  if (!data) return kInvalidValue;
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  uint64_t start = 0;
  const Allocation* a = findAllocation(s, ptr, &start);
  if (!a || ptr == start + a->size) return kInvalidValue;  // host memory, as the driver answers for it
  switch (attribute) {
    case kPointerAttributeMemoryType: *static_cast<unsigned*>(data) = kMemoryTypeDevice; break;
    case kPointerAttributeDeviceOrdinal: *static_cast<int*>(data) = 0; break;
    case kPointerAttributeRangeStart: *static_cast<CUdeviceptr*>(data) = start; break;
    case kPointerAttributeRangeSize: *static_cast<size_t*>(data) = a->size; break;
    default: return failWith(kInvalidValue, "the emulator knows no pointer attribute " + std::to_string(attribute));
  }
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
  return enqueueWork(stream, [f, grid, block, args](std::string* error) {
    auto copy = *args;  // a graph replays the same arguments; the kernel may not change them
    return runGrid(*f, grid, block, copy, error);
  });
}

CUresult emuGetErrorString(CUresult result, const char** text) {
  if (!text) return kInvalidValue;
  {
    std::lock_guard<std::mutex> lock(gReasonsMutex);
    if (auto it = gReasons.find(result); it != gReasons.end()) {
      *text = it->second->c_str();
      return kCudaSuccess;
    }
  }
  *text = errorName(result) ? "the CUDA emulator reports this error" : nullptr;
  return *text ? kCudaSuccess : kInvalidValue;
}
CUresult emuGetErrorName(CUresult result, const char** name) {
  if (!name) return kInvalidValue;
  *name = errorName(result);
  return *name ? kCudaSuccess : kInvalidValue;
}

CUresult emuStreamBeginCapture(CUstream stream, int mode) {
  if (CUresult r = needContext()) return r;
  if (mode < 0 || mode > 2) return kInvalidValue;
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  Stream* st = findStream(s, stream);
  if (!st) return failWith(kInvalidHandle, "cuStreamBeginCapture of an unknown stream");
  if (st->capturing) return failWith(kIllegalState, "cuStreamBeginCapture of a stream that is already capturing");
  if (tlsCapturingStream) return failWith(kIllegalState, "this thread already captures another stream");
  st->capturing = true;
  st->captureInvalidated = false;
  st->captured.clear();
  tlsCapturingStream = stream;
  return kCudaSuccess;
}
CUresult emuStreamEndCapture(CUstream stream, CUgraph* graph) {
  if (CUresult r = needContext()) return r;
  if (!graph) return kInvalidValue;
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  Stream* st = findStream(s, stream);
  if (!st) return failWith(kInvalidHandle, "cuStreamEndCapture of an unknown stream");
  if (!st->capturing) return failWith(kIllegalState, "cuStreamEndCapture of a stream that is not capturing");
  st->capturing = false;
  if (tlsCapturingStream == stream) tlsCapturingStream = nullptr;
  *graph = nullptr;
  if (st->captureInvalidated) return kCaptureInvalidated;
  auto* g = new Graph{std::move(st->captured)};
  st->captured.clear();
  s.graphs.insert(g);
  *graph = g;
  return kCudaSuccess;
}
CUresult emuGraphInstantiate(CUgraphExec* exec, CUgraph graph, unsigned long long flags) {
  if (CUresult r = needContext()) return r;
  if (!exec || flags != 0) return kInvalidValue;
  std::lock_guard<std::mutex> lock(state().mutex);
  if (!state().graphs.count(graph)) return failWith(kInvalidHandle, "cuGraphInstantiate of an unknown graph");
  auto* e = new Graph{static_cast<Graph*>(graph)->work};
  state().graphExecs.insert(e);
  *exec = e;
  return kCudaSuccess;
}
CUresult emuGraphLaunch(CUgraphExec exec, CUstream stream) {
  if (CUresult r = needContext()) return r;
  std::vector<Work> work;
  {
    std::lock_guard<std::mutex> lock(state().mutex);
    if (!state().graphExecs.count(exec)) return failWith(kInvalidHandle, "cuGraphLaunch of an unknown graph");
    work = static_cast<Graph*>(exec)->work;
  }
  for (Work& w : work)
    if (CUresult r = enqueueWork(stream, std::move(w))) return r;
  return kCudaSuccess;
}
CUresult emuGraphExecDestroy(CUgraphExec exec) {
  if (CUresult r = needContext()) return r;
  std::lock_guard<std::mutex> lock(state().mutex);
  if (!state().graphExecs.erase(exec)) return failWith(kInvalidHandle, "cuGraphExecDestroy of an unknown graph");
  delete static_cast<Graph*>(exec);
  return kCudaSuccess;
}
CUresult emuGraphDestroy(CUgraph graph) {
  if (CUresult r = needContext()) return r;
  std::lock_guard<std::mutex> lock(state().mutex);
  if (!state().graphs.erase(graph)) return failWith(kInvalidHandle, "cuGraphDestroy of an unknown graph");
  delete static_cast<Graph*>(graph);
  return kCudaSuccess;
}

DriverApi makeApi() {
  DriverApi a{};
  a.cuInit = emuInit;
  a.cuDriverGetVersion = emuDriverGetVersion;
  a.cuDeviceGetCount = emuDeviceGetCount;
  a.cuDeviceGet = emuDeviceGet;
  a.cuDeviceGetName = emuDeviceGetName;
  a.cuDeviceGetAttribute = emuDeviceGetAttribute;
  a.cuDevicePrimaryCtxRetain = emuPrimaryCtxRetain;
  a.cuDevicePrimaryCtxRelease = emuPrimaryCtxRelease;
  a.cuCtxPushCurrent = emuCtxPushCurrent;
  a.cuCtxPopCurrent = emuCtxPopCurrent;
  a.cuStreamCreate = emuStreamCreate;
  a.cuStreamDestroy = emuStreamDestroy;
  a.cuStreamSynchronize = emuStreamSynchronize;
  a.cuModuleLoadData = emuModuleLoadData;
  a.cuModuleUnload = emuModuleUnload;
  a.cuModuleGetFunction = emuModuleGetFunction;
  a.cuMemAlloc = emuMemAlloc;
  a.cuMemFree = emuMemFree;
  a.cuMemGetInfo = emuMemGetInfo;
  a.cuMemcpyHtoDAsync = emuMemcpyHtoDAsync;
  a.cuMemcpyDtoHAsync = emuMemcpyDtoHAsync;
  a.cuMemcpyDtoDAsync = emuMemcpyDtoDAsync;
  a.cuPointerGetAttribute = emuPointerGetAttribute;
  a.cuLaunchKernel = emuLaunchKernel;
  a.cuGetErrorString = emuGetErrorString;
  a.cuGetErrorName = emuGetErrorName;
  a.cuStreamBeginCapture = emuStreamBeginCapture;
  a.cuStreamEndCapture = emuStreamEndCapture;
  a.cuGraphInstantiateWithFlags = emuGraphInstantiate;
  a.cuGraphLaunch = emuGraphLaunch;
  a.cuGraphExecDestroy = emuGraphExecDestroy;
  a.cuGraphDestroy = emuGraphDestroy;
  a.emulated = true;
  return a;
}

}  // namespace

const DriverApi* emulatedDriver() {
  static const DriverApi api = makeApi();
  return &api;
}

CUresult enqueue(CUstream stream, std::function<bool(std::string* error)> op) {
  return enqueueWork(stream, std::move(op));
}

bool isDeviceRange(uint64_t ptr, uint64_t bytes, std::string* why) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  uint64_t start = 0;
  const Allocation* a = findAllocation(s, ptr, &start);
  if (!a) {
    if (why) *why = "pointer " + hex(ptr) + " is not device memory";
    return false;
  }
  if (bytes > a->size - (ptr - start)) {
    if (why)
      *why = "range of " + std::to_string(bytes) + " bytes at " + hex(ptr) + " overruns its " +
             std::to_string(a->size) + "-byte device allocation at " + hex(start) + " by " +
             std::to_string(bytes - (a->size - (ptr - start))) + " bytes";
    return false;
  }
  return true;
}

}  // namespace nnc::rt::cuda::emu

#define NNC_EMU_EXPORT extern "C" __attribute__((visibility("default")))
NNC_EMU_EXPORT const nnc::rt::cuda::DriverApi* nnc_cuda_emulator_driver() {
  return nnc::rt::cuda::emu::emulatedDriver();
}
NNC_EMU_EXPORT const nnc::rt::cuda::CublasLtApi* nnc_cuda_emulator_cublaslt() {
  return nnc::rt::cuda::emu::emulatedCublasLt();
}
NNC_EMU_EXPORT unsigned long nnc_cuda_emulator_abi() { return nnc::rt::cuda::emu::emulatorAbi(); }
