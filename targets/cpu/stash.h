// Stashing a reduction's body: a kernel whose inner loop recomputes, element by element, what one of
// its reductions folded (softmax: sum of exp(x - max) over the row, then exp(x - max) / sum again)
// computes it once. The reduction stores each body value into the kernel's output where the inner
// loop will store that element, and the inner loop loads it back (the store then overwrites it).
#pragma once

#include "kir/kernel_ir.h"

namespace nnc::kir {

// Applies the rewrite where it is safe and pays: one inner store, to an f32/f64 output of the body's
// dtype, not read by the kernel; a reduction (not ArgMax/ArgMin) over the inner loop's extents whose
// body contains a transcendental, a division or a square root and reappears in the stored value with
// the inner variables in place of its own. Returns whether the kernel changed. Targets whose code
// generation implements Reduction::stashSlot call it (cpu); the kernel's meaning is unchanged.
bool stashReductionBodies(Kernel& kernel);

}  // namespace nnc::kir
