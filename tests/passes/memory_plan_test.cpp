// Arena planning: reuse across disjoint lifetimes, no byte overlap between live buffers, alignment
// and minimal sizes on cases small enough to work out by hand.
#include "passes/memory_plan.h"

#include <gtest/gtest.h>

#include <random>

namespace nnc::passes {
namespace {

bool overlapInTime(const BufferLifetime& a, const BufferLifetime& b) {
  return a.firstStep <= b.lastStep && b.firstStep <= a.lastStep;
}

// No two buffers live at the same step share a byte; every offset is aligned; all fit in size.
void expectValid(const std::vector<BufferLifetime>& bufs, const ArenaLayout& layout, uint64_t alignment) {
  ASSERT_EQ(layout.offsets.size(), bufs.size());
  for (size_t i = 0; i < bufs.size(); ++i) {
    EXPECT_EQ(layout.offsets[i] % alignment, 0u) << "buffer " << i;
    EXPECT_LE(layout.offsets[i] + bufs[i].bytes, layout.size) << "buffer " << i;
    for (size_t j = i + 1; j < bufs.size(); ++j) {
      if (!overlapInTime(bufs[i], bufs[j]) || bufs[i].bytes == 0 || bufs[j].bytes == 0) continue;
      const bool disjoint = layout.offsets[i] + bufs[i].bytes <= layout.offsets[j] ||
                            layout.offsets[j] + bufs[j].bytes <= layout.offsets[i];
      EXPECT_TRUE(disjoint) << "buffers " << i << " [" << layout.offsets[i] << ", +" << bufs[i].bytes << ") and " << j
                            << " [" << layout.offsets[j] << ", +" << bufs[j].bytes << ") are both live";
    }
  }
}

TEST(MemoryPlan, EmptyPlanHasSizeZero) {
  ArenaLayout layout = planArena({});
  EXPECT_TRUE(layout.offsets.empty());
  EXPECT_EQ(layout.size, 0u);
}

TEST(MemoryPlan, DisjointLifetimesShareOffsets) {
  // A chain: each buffer is written at step i and read at step i+1. Buffers two steps apart never
  // overlap in time, so two slots suffice.
  std::vector<BufferLifetime> bufs = {{1000, 0, 1}, {1000, 1, 2}, {1000, 2, 3}, {1000, 3, 4}};
  ArenaLayout layout = planArena(bufs, 64);
  expectValid(bufs, layout, 64);
  EXPECT_EQ(layout.offsets[0], layout.offsets[2]);
  EXPECT_EQ(layout.offsets[1], layout.offsets[3]);
  EXPECT_NE(layout.offsets[0], layout.offsets[1]);
  EXPECT_EQ(layout.size, 2048u);  // two slots of 1000 bytes rounded to 1024
}

TEST(MemoryPlan, AllLiveAtOnceAreStacked) {
  std::vector<BufferLifetime> bufs = {{100, 0, 5}, {300, 1, 4}, {64, 2, 3}};
  ArenaLayout layout = planArena(bufs, 64);
  expectValid(bufs, layout, 64);
  // Largest first: 300 -> [0, 320), 100 -> [320, 448), 64 -> [448, 512).
  EXPECT_EQ(layout.offsets[1], 0u);
  EXPECT_EQ(layout.offsets[0], 320u);
  EXPECT_EQ(layout.offsets[2], 448u);
  EXPECT_EQ(layout.size, 512u);
}

TEST(MemoryPlan, SmallBufferFillsAGapBetweenLiveOnes) {
  // A and C (steps 0..2) are live throughout; B (step 0), D (step 2) and E (step 1) each live
  // with them only. The minimal size is the peak live bytes: 256 + 256 + 128 at every step.
  std::vector<BufferLifetime> bufs = {{256, 0, 2}, {128, 0, 0}, {256, 0, 2}, {128, 2, 2}, {128, 1, 1}};
  ArenaLayout layout = planArena(bufs, 64);
  expectValid(bufs, layout, 64);
  EXPECT_EQ(layout.size, 640u);
  // B, D and E are never live together: they share one slot.
  EXPECT_EQ(layout.offsets[1], layout.offsets[3]);
  EXPECT_EQ(layout.offsets[1], layout.offsets[4]);
}

TEST(MemoryPlan, AlignmentIsRespected) {
  std::vector<BufferLifetime> bufs = {{1, 0, 3}, {3, 0, 3}, {17, 0, 3}, {5, 1, 2}};
  for (uint64_t alignment : {1u, 8u, 64u, 256u, 4096u}) {
    ArenaLayout layout = planArena(bufs, alignment);
    expectValid(bufs, layout, alignment);
    EXPECT_EQ(layout.size % alignment, 0u) << alignment;
  }
  // With alignment 1, four simultaneously live buffers pack exactly.
  EXPECT_EQ(planArena(bufs, 1).size, 26u);
  // With 4096, each takes a page.
  EXPECT_EQ(planArena(bufs, 4096).size, 4u * 4096);
}

TEST(MemoryPlan, ZeroByteBuffersAreHarmless) {
  std::vector<BufferLifetime> bufs = {{0, 0, 3}, {128, 0, 3}, {0, 1, 1}};
  ArenaLayout layout = planArena(bufs, 64);
  expectValid(bufs, layout, 64);
  EXPECT_EQ(layout.size, 128u);
}

TEST(MemoryPlan, RandomisedNeverOverlapsAndNeverExceedsTheSum) {
  std::mt19937 rng(1234);
  for (int trial = 0; trial < 500; ++trial) {
    const int n = 1 + static_cast<int>(rng() % 40);
    const int steps = 1 + static_cast<int>(rng() % 20);
    const uint64_t alignment = uint64_t{1} << (rng() % 8);
    std::vector<BufferLifetime> bufs;
    for (int i = 0; i < n; ++i) {
      int a = static_cast<int>(rng() % steps), b = static_cast<int>(rng() % steps);
      bufs.push_back({rng() % 5000, std::min(a, b), std::max(a, b)});
    }
    ArenaLayout layout = planArena(bufs, alignment);
    expectValid(bufs, layout, alignment);
    // Never worse than giving every buffer its own aligned slot; never below the peak live bytes.
    uint64_t sum = 0;
    for (const BufferLifetime& b : bufs) sum += (b.bytes + alignment - 1) / alignment * alignment;
    EXPECT_LE(layout.size, sum);
    for (int s = 0; s < steps; ++s) {
      uint64_t live = 0;
      for (const BufferLifetime& b : bufs)
        if (b.firstStep <= s && s <= b.lastStep) live += b.bytes;
      EXPECT_GE(layout.size, live);
    }
    if (HasFailure()) {
      ADD_FAILURE() << "first failing trial " << trial;
      return;
    }
  }
}

}  // namespace
}  // namespace nnc::passes
