#include "runtime/cpu_features.h"

#if defined(__x86_64__)
#include <cpuid.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

#include <cerrno>
#include <cstring>
#include <mutex>

namespace nnc::rt {

namespace {

#if defined(__x86_64__)
struct Cpuid {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
};
Cpuid cpuid(unsigned leaf, unsigned sub) {
  Cpuid r;
  if (!__get_cpuid_count(leaf, sub, &r.eax, &r.ebx, &r.ecx, &r.edx)) return Cpuid{};
  return r;
}
// The OS saves the state a feature needs (XCR0): AVX's YMM, AVX-512's opmask and ZMM, AMX's tiles.
uint64_t enabledStateComponents() {
  if (!(cpuid(1, 0).ecx & (1u << 27))) return 0;  // OSXSAVE
  unsigned lo = 0, hi = 0;
  __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  return (static_cast<uint64_t>(hi) << 32) | lo;
}
constexpr uint64_t kAvxState = 0x6, kAvx512State = 0xe0 | kAvxState, kAmxState = 0x60000;  // XTILECFG, XTILEDATA
#endif

}  // namespace

bool hostHasCpuFeature(const std::string& f) {
#if defined(__x86_64__)
  const Cpuid l1 = cpuid(1, 0), l7 = cpuid(7, 0), l7s1 = cpuid(7, 1);
  const uint64_t xcr0 = enabledStateComponents();
  const bool avx = (xcr0 & kAvxState) == kAvxState, avx512 = (xcr0 & kAvx512State) == kAvx512State;
  // AMX: the OS must be able to save the tiles (XCR0 bits 17 and 18); permission is asked separately.
  const bool amx = (xcr0 & kAmxState) == kAmxState;
  if (f == "sse4.2") return l1.ecx & (1u << 20);
  if (f == "avx") return avx && (l1.ecx & (1u << 28));
  if (f == "fma") return avx && (l1.ecx & (1u << 12));
  if (f == "f16c") return avx && (l1.ecx & (1u << 29));
  if (f == "avx2") return avx && (l7.ebx & (1u << 5));
  if (f == "avx512f") return avx512 && (l7.ebx & (1u << 16));
  if (f == "avx512bw") return avx512 && (l7.ebx & (1u << 30));
  if (f == "avx512vl") return avx512 && (l7.ebx & (1u << 31));
  if (f == "avx512bf16") return avx512 && (l7s1.eax & (1u << 5));
  if (f == "avx512fp16") return avx512 && (l7.edx & (1u << 23));
  if (f == "amx-bf16") return amx && (l7.edx & (1u << 22));
  if (f == "amx-tile") return amx && (l7.edx & (1u << 24));
  if (f == "amx-int8") return amx && (l7.edx & (1u << 25));
#endif
  (void)f;
  return false;
}

bool enableAmxTiles(std::string* error) {
#if defined(__x86_64__) && defined(__linux__)
  static std::once_flag once;
  static bool granted = false;
  static std::string reason;
  std::call_once(once, [] {
    if (!hostHasCpuFeature("amx-tile")) {
      reason = "this host has no AMX tiles (or its OS does not save them)";
      return;
    }
    constexpr long kArchReqXcompPerm = 0x1023, kXfeatureXtiledata = 18;
    if (syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) != 0) {
      reason =
          std::string("Linux refused the AMX tile state (arch_prctl ARCH_REQ_XCOMP_PERM): ") + std::strerror(errno);
      return;
    }
    granted = true;
  });
  if (!granted && error) *error = reason;
  return granted;
#else
  if (error) *error = "AMX needs Linux on x86-64";
  return false;
#endif
}

bool ensureCpuFeatures(const std::vector<std::string>& features, std::string* error) {
  std::string missing;
  bool amx = false;
  for (const std::string& f : features) {
    if (!hostHasCpuFeature(f)) missing += (missing.empty() ? "" : ", ") + f;
    amx = amx || f.rfind("amx-", 0) == 0;
  }
  if (!missing.empty()) {
    if (error) {
      std::string all;
      for (const std::string& f : features) all += (all.empty() ? "" : ", ") + f;
      *error = "this host's CPU lacks " + missing + " (the model's kernels need " + all +
               "; recompile it on this host, or without --precision=bf16)";
    }
    return false;
  }
  return !amx || enableAmxTiles(error);
}

}  // namespace nnc::rt
