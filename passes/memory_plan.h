// Memory planning: places every intermediate buffer in one arena so that buffers whose lifetimes
// overlap never share bytes, and buffers whose lifetimes don't may reuse the same bytes.
#pragma once

#include <cstdint>
#include <vector>

namespace nnc::passes {

struct BufferLifetime {
  uint64_t bytes;
  int firstStep;  // the step that writes it
  int lastStep;   // the last step that reads it (>= firstStep)
};

struct ArenaLayout {
  std::vector<uint64_t> offsets;  // one per BufferLifetime, aligned
  uint64_t size = 0;
};

// Greedy by decreasing size: each buffer takes the lowest aligned offset that does not collide with
// an already placed buffer live at the same time (the "greedy by size" planner of TFLite's arena).
ArenaLayout planArena(const std::vector<BufferLifetime>& buffers, uint64_t alignment = 64);

}  // namespace nnc::passes
