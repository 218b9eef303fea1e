// Test helpers for the CPU backend: JIT a kernel, run it over its outer range in one call and in
// pieces, and check it against the kernel-IR interpreter.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "kir/interpreter.h"
#include "kir/kernel_ir.h"
#include "nnc/tensor.h"
#include "targets/cpu/codegen/cpu_backend.h"

namespace nnc::codegen::testing {

inline Tensor deepCopy(const Tensor& t) { return Tensor::fromBytes(t.dtype(), t.shape(), t.data(), t.byteSize()); }

inline std::vector<Tensor> deepCopies(const std::vector<Tensor>& ts) {
  std::vector<Tensor> out;
  for (const Tensor& t : ts) out.push_back(deepCopy(t));
  return out;
}

// Calls fn on consecutive ranges [cuts[i], cuts[i+1]).
inline void callInPieces(rt::KernelFn fn, std::vector<Tensor>& bufs, const std::vector<int64_t>& cuts) {
  std::vector<void*> ptrs;
  for (Tensor& t : bufs) ptrs.push_back(t.mutableData());
  for (size_t i = 0; i + 1 < cuts.size(); ++i) fn(ptrs.data(), cuts[i], cuts[i + 1]);
}

inline bool nearlyEqual(double a, double b, double relTol, double absTol) {
  if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b);
  if (std::isinf(a) || std::isinf(b)) return a == b;
  return std::fabs(a - b) <= absTol + relTol * std::max(std::fabs(a), std::fabs(b));
}

// Every element of `got` against `want` (floats within the tolerances, NaN matching NaN; integers
// exactly).
inline void expectTensorsNear(const Tensor& got, const Tensor& want, double relTol, double absTol,
                              const std::string& what) {
  ASSERT_EQ(got.dtype(), want.dtype()) << what;
  ASSERT_EQ(got.numel(), want.numel()) << what;
  for (int64_t i = 0; i < got.numel(); ++i) {
    if (isFloat(got.dtype())) {
      EXPECT_TRUE(nearlyEqual(got.getDouble(i), want.getDouble(i), relTol, absTol))
          << what << " element " << i << ": got " << got.getDouble(i) << ", want " << want.getDouble(i);
    } else {
      EXPECT_EQ(got.getInt(i), want.getInt(i)) << what << " element " << i;
    }
  }
}

inline rt::KernelFn jitKernel(const kir::Kernel& k, std::unique_ptr<JitKernels>* holder) {
  auto mod = CpuModule::build({k}, CpuTargetOptions{});
  EXPECT_TRUE(mod.isOk()) << mod.status().message();
  if (!mod.isOk()) return nullptr;
  auto jit = mod.value()->jit();
  EXPECT_TRUE(jit.isOk()) << jit.status().message();
  if (!jit.isOk()) return nullptr;
  *holder = std::move(jit.value());
  auto fn = (*holder)->lookup(k.name);
  EXPECT_TRUE(fn.isOk()) << fn.status().message();
  return fn.isOk() ? fn.value() : nullptr;
}

// Runs `k` on copies of `init` through the JIT in one call, in two halves and in uneven pieces
// (all must agree bitwise), and through the interpreter (must agree within the tolerances).
// Returns the buffers after the one-call JIT run.
inline std::vector<Tensor> runChecked(const kir::Kernel& k, const std::vector<Tensor>& init, double relTol = 0,
                                      double absTol = 0) {
  std::unique_ptr<JitKernels> holder;
  rt::KernelFn fn = jitKernel(k, &holder);
  if (!fn) return {};
  const int64_t n = k.outer.size();
  std::vector<Tensor> whole = deepCopies(init);
  callInPieces(fn, whole, {0, n});
  std::vector<Tensor> halves = deepCopies(init);
  callInPieces(fn, halves, {0, n / 2, n});
  std::vector<Tensor> pieces = deepCopies(init);
  std::vector<int64_t> cuts = {0};
  for (int64_t c = 1; c < n; c += 1 + c % 5) cuts.push_back(c);  // uneven, crossing row boundaries
  cuts.push_back(n);
  callInPieces(fn, pieces, cuts);
  std::vector<Tensor> interp = deepCopies(init);
  std::vector<Tensor*> ptrs;
  for (Tensor& t : interp) ptrs.push_back(&t);
  Status st = kir::interpret(k, ptrs);
  EXPECT_TRUE(st.isOk()) << st.message();
  for (size_t s = 0; s < init.size(); ++s) {
    if (!k.params[s].isOutput) continue;
    EXPECT_TRUE(whole[s].bitwiseEqual(halves[s])) << k.name << " param " << s << ": halves differ";
    EXPECT_TRUE(whole[s].bitwiseEqual(pieces[s])) << k.name << " param " << s << ": pieces differ";
    expectTensorsNear(whole[s], interp[s], relTol, absTol, k.name + " vs interpreter, param " + std::to_string(s));
  }
  return whole;
}

}  // namespace nnc::codegen::testing
