// What the host CPU can run, for the features a plan's kernels need (rt::Plan::cpuFeatures): checked
// when a model is created, so that a model.so compiled for AMX fails with a message on a host
// without it instead of dying of SIGILL in its first kernel.
#pragma once

#include <string>
#include <vector>

namespace nnc::rt {

// The LLVM feature names the runtime knows how to check ("avx2", "avx512f", "avx512bf16", "amx-tile",
// "amx-bf16", ...). Whether this host has `feature`; false for a name it does not know.
bool hostHasCpuFeature(const std::string& feature);

// Every feature of `features` is present, and the AMX tile state is granted to this process where
// one of them is an AMX feature (Linux hands it out on request: arch_prctl(ARCH_REQ_XCOMP_PERM,
// XFEATURE_XTILEDATA), once per process, before any thread executes a tile instruction). Else false
// with "this host lacks amx-bf16 (the model was compiled for ...)" or the kernel's refusal.
bool ensureCpuFeatures(const std::vector<std::string>& features, std::string* error);

// Asks Linux for the AMX tile state (idempotent). False with the reason where it is refused or the
// CPU has no AMX.
bool enableAmxTiles(std::string* error);

}  // namespace nnc::rt
