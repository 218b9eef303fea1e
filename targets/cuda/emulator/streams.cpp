// Streams (see emulator.h): work run in order as it is enqueued, stream capture into graphs, graph replay.
#include <cstdint>
#include <cstdio>
#include <functional>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "targets/cuda/emulator/emulator_internal.h"

namespace nnc::rt::cuda::emu::detail {
namespace {

// Streams and graphs. A stream runs its work as it is enqueued; while capturing, it records it.

// Serialises all device work: one kernel (one block) runs at a time in the process, which keeps
// __shared__ statics per block and the modules' thread-locals simple.
std::mutex& workMutex() {
  static std::mutex* m = new std::mutex();
  return *m;
}

thread_local void* tlsCapturingStream = nullptr;  // capture mode thread-local: this thread's capture

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

}  // namespace

// A capture is invalidated by an operation it cannot record, made by the capturing thread.
CUresult refuseDuringCapture(const char* what) {
  if (!tlsCapturingStream) return kCudaSuccess;
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  if (Stream* stream = findStream(s, tlsCapturingStream)) stream->captureInvalidated = true;
  return failWith(kCaptureUnsupported, std::string(what) + " is not allowed while this thread captures a stream");
}

namespace {

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
    if (CUresult r = enqueue(stream, std::move(w))) return r;
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

}  // namespace

void addStreamEntryPoints(DriverApi& a) {
  a.cuStreamCreate = emuStreamCreate;
  a.cuStreamDestroy = emuStreamDestroy;
  a.cuStreamSynchronize = emuStreamSynchronize;
  a.cuStreamBeginCapture = emuStreamBeginCapture;
  a.cuStreamEndCapture = emuStreamEndCapture;
  a.cuGraphInstantiateWithFlags = emuGraphInstantiate;
  a.cuGraphLaunch = emuGraphLaunch;
  a.cuGraphExecDestroy = emuGraphExecDestroy;
  a.cuGraphDestroy = emuGraphDestroy;
}

}  // namespace nnc::rt::cuda::emu::detail

namespace nnc::rt::cuda::emu {

CUresult enqueue(CUstream h, std::function<bool(std::string* error)> work) {
  using namespace detail;
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

}  // namespace nnc::rt::cuda::emu
