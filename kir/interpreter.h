// A plain interpreter of kernel IR: the executable specification every backend is checked against.
#pragma once

#include <vector>

#include "kir/kernel_ir.h"
#include "nnc/status.h"
#include "nnc/tensor.h"

namespace nnc::kir {

// buffers[slot] must match params[slot] in dtype and element count; output buffers are written.
// Out-of-range loads or stores are reported as an error (never performed).
Status interpret(const Kernel& kernel, std::vector<Tensor*> buffers);

}  // namespace nnc::kir
