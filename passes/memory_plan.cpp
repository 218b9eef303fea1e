// Arena planning, greedy by size. Placed buffers that overlap in time with the new one are sorted by
// offset, and the new buffer goes into the first gap that fits (or after the last one).
#include "passes/memory_plan.h"

#include <algorithm>
#include <numeric>

namespace nnc::passes {

namespace {

uint64_t alignUp(uint64_t x, uint64_t a) { return (x + a - 1) / a * a; }

bool overlapInTime(const BufferLifetime& a, const BufferLifetime& b) {
  return a.firstStep <= b.lastStep && b.firstStep <= a.lastStep;
}

}  // namespace

ArenaLayout planArena(const std::vector<BufferLifetime>& buffers, uint64_t alignment) {
  ArenaLayout layout;
  layout.offsets.assign(buffers.size(), 0);
  std::vector<size_t> order(buffers.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return buffers[a].bytes > buffers[b].bytes; });
  std::vector<size_t> placed;
  for (size_t i : order) {
    std::vector<std::pair<uint64_t, uint64_t>> busy;  // [begin, end) of time-overlapping buffers
    for (size_t j : placed)
      if (overlapInTime(buffers[i], buffers[j]))
        busy.emplace_back(layout.offsets[j], layout.offsets[j] + buffers[j].bytes);
    std::sort(busy.begin(), busy.end());
    uint64_t offset = 0;
    for (const auto& [begin, end] : busy) {
      if (offset + buffers[i].bytes <= begin) break;
      offset = std::max(offset, alignUp(end, alignment));
    }
    layout.offsets[i] = offset;
    layout.size = std::max(layout.size, alignUp(offset + buffers[i].bytes, alignment));
    placed.push_back(i);
  }
  return layout;
}

}  // namespace nnc::passes
