// A small thread pool for parallel loops. Workers poll briefly, then sleep on a condition variable;
// work is cut into chunks, a contiguous span of them per thread, and a thread that has run its own
// span steals from the back of the others', so a thread that loses its core to another process
// delays only its current chunk: the others take the rest. After a chunk held for milliseconds
// past the caller's share, the pool runs the next jobs on the caller alone for a while.
#pragma once

#include <cstdint>
#include <functional>

namespace nnc::rt {

class ThreadPool {
 public:
  explicit ThreadPool(int numThreads);  // includes the calling thread
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;
  int numThreads() const;
  // Calls fn(begin, end) over [0, total) in chunks of at least minChunk; returns when all are done.
  // Where [0, total) holds at least two groups of `granule` points per thread, chunks are whole
  // groups (points of a group share data one thread should keep in its cache).
  void parallelFor(int64_t total, int64_t minChunk, const std::function<void(int64_t, int64_t)>& fn) {
    parallelFor(total, minChunk, 1, fn);
  }
  void parallelFor(int64_t total, int64_t minChunk, int64_t granule, const std::function<void(int64_t, int64_t)>& fn);

 private:
  struct Impl;
  Impl* impl_;
};

}  // namespace nnc::rt
