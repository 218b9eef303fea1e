// Device memory (see emulator.h): guarded host allocations, and the driver's memory entry points.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>

#include "targets/cuda/emulator/emulator_internal.h"

#ifdef NNC_EMU_ASAN
#include <sanitizer/asan_interface.h>
#endif

namespace nnc::rt::cuda::emu::detail {

std::string hex(uint64_t v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "0x%llx", static_cast<unsigned long long>(v));
  return buf;
}

namespace {

// Device memory: host allocations, 256-byte aligned like cuMemAlloc's, between two guard zones. New
// memory is filled with 0xff bytes (NaN for floats) so that a read of never-written device memory
// shows in results instead of reading zeros by luck.

constexpr size_t kGuardBytes = 256;
constexpr unsigned char kGuardByte = 0xa5;
constexpr size_t kEmulatedDeviceBytes = size_t{16} << 30;

// Which allocation holds [ptr, ptr + bytes); null when none does. Caller holds state().mutex.
const Allocation* findAllocation(State& s, uint64_t ptr, uint64_t* start) {
  auto it = s.allocations.upper_bound(ptr);
  if (it == s.allocations.begin()) return nullptr;
  --it;
  if (ptr - it->first > it->second.size) return nullptr;
  *start = it->first;
  return &it->second;
}

// The first guard byte that changed, described; empty when both guards are intact. Under ASan the
// guards are poisoned (an access is reported where it happens) and not read here.
std::string checkGuards([[maybe_unused]] uint64_t start, [[maybe_unused]] const Allocation& a) {
#ifndef NNC_EMU_ASAN
  for (size_t i = 0; i < kGuardBytes; ++i) {
    if (a.base[kGuardBytes - 1 - i] != kGuardByte)
      return "a write " + std::to_string(i + 1) + " bytes before the " + std::to_string(a.size) +
             "-byte device allocation at " + hex(start);
    if (a.base[kGuardBytes + a.size + i] != kGuardByte)
      return "a write " + std::to_string(i) + " bytes past the end of the " + std::to_string(a.size) +
             "-byte device allocation at " + hex(start);
  }
#endif
  return "";
}

}  // namespace

std::string checkAllGuards() {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  for (const auto& [start, a] : s.allocations)
    if (std::string why = checkGuards(start, a); !why.empty()) return why;
  return "";
}

namespace {

CUresult emuMemAlloc(CUdeviceptr* ptr, size_t bytes) {
  if (CUresult r = needContext()) return r;
  if (CUresult r = refuseDuringCapture("cuMemAlloc")) return r;
  if (!ptr || bytes == 0) return kInvalidValue;
  State& s = state();
  {
    std::lock_guard<std::mutex> lock(s.mutex);
    if (bytes > kEmulatedDeviceBytes - s.allocatedBytes) return kCudaErrorOutOfMemory;
  }
  const size_t total = kGuardBytes + ((bytes + kGuardBytes - 1) / kGuardBytes) * kGuardBytes + kGuardBytes;
  auto* base = static_cast<unsigned char*>(std::aligned_alloc(kGuardBytes, total));
  if (!base) return kCudaErrorOutOfMemory;
  std::memset(base, kGuardByte, total);
  std::memset(base + kGuardBytes, 0xff, bytes);
#ifdef NNC_EMU_ASAN
  ASAN_POISON_MEMORY_REGION(base, kGuardBytes);
  ASAN_POISON_MEMORY_REGION(base + kGuardBytes + bytes, total - kGuardBytes - bytes);
#endif
  const uint64_t user = reinterpret_cast<uintptr_t>(base + kGuardBytes);
  std::lock_guard<std::mutex> lock(s.mutex);
  s.allocations[user] = Allocation{base, bytes};
  s.allocatedBytes += bytes;
  *ptr = user;
  return kCudaSuccess;
}
CUresult emuMemFree(CUdeviceptr ptr) {
  if (CUresult r = needContext()) return r;
  if (CUresult r = refuseDuringCapture("cuMemFree")) return r;
  State& s = state();
  Allocation a;
  {
    std::lock_guard<std::mutex> lock(s.mutex);
    auto it = s.allocations.find(ptr);
    if (it == s.allocations.end())
      return failWith(kInvalidValue, "cuMemFree of " + hex(ptr) + ", which is not the start of a device allocation");
    a = it->second;
    s.allocatedBytes -= a.size;
    s.allocations.erase(it);
  }
  const std::string why = checkGuards(ptr, a);
#ifdef NNC_EMU_ASAN
  ASAN_UNPOISON_MEMORY_REGION(a.base,
                              kGuardBytes + ((a.size + kGuardBytes - 1) / kGuardBytes) * kGuardBytes + kGuardBytes);
#endif
  std::free(a.base);
  if (!why.empty()) return failWith(kIllegalAddress, "illegal address: " + why);
  return kCudaSuccess;
}
CUresult emuMemGetInfo(size_t* freeBytes, size_t* totalBytes) {
  if (CUresult r = needContext()) return r;
  if (!freeBytes || !totalBytes) return kInvalidValue;
  std::lock_guard<std::mutex> lock(state().mutex);
  *totalBytes = kEmulatedDeviceBytes;
  *freeBytes = kEmulatedDeviceBytes - state().allocatedBytes;
  return kCudaSuccess;
}

CUresult checkDeviceRange(uint64_t ptr, size_t bytes, const char* call, const char* which) {
  std::string why;
  if (isDeviceRange(ptr, bytes, &why)) return kCudaSuccess;
  return failWith(kInvalidValue, std::string(call) + ": the " + which + " " + why);
}

CUresult emuMemcpyHtoDAsync(CUdeviceptr dst, const void* src, size_t bytes, CUstream stream) {
  if (CUresult r = needContext()) return r;
  if (CUresult r = checkDeviceRange(dst, bytes, "cuMemcpyHtoDAsync", "destination")) return r;
  if (!src && bytes) return kInvalidValue;
  return enqueue(stream, [=](std::string*) {
    if (bytes) std::memcpy(reinterpret_cast<void*>(static_cast<uintptr_t>(dst)), src, bytes);
    return true;
  });
}
CUresult emuMemcpyDtoHAsync(void* dst, CUdeviceptr src, size_t bytes, CUstream stream) {
  if (CUresult r = needContext()) return r;
  if (CUresult r = checkDeviceRange(src, bytes, "cuMemcpyDtoHAsync", "source")) return r;
  if (!dst && bytes) return kInvalidValue;
  return enqueue(stream, [=](std::string*) {
    if (bytes) std::memcpy(dst, reinterpret_cast<const void*>(static_cast<uintptr_t>(src)), bytes);
    return true;
  });
}
CUresult emuMemcpyDtoDAsync(CUdeviceptr dst, CUdeviceptr src, size_t bytes, CUstream stream) {
  if (CUresult r = needContext()) return r;
  if (CUresult r = checkDeviceRange(dst, bytes, "cuMemcpyDtoDAsync", "destination")) return r;
  if (CUresult r = checkDeviceRange(src, bytes, "cuMemcpyDtoDAsync", "source")) return r;
  return enqueue(stream, [=](std::string*) {
    if (bytes)
      std::memmove(reinterpret_cast<void*>(static_cast<uintptr_t>(dst)),
                   reinterpret_cast<const void*>(static_cast<uintptr_t>(src)), bytes);
    return true;
  });
}
CUresult emuPointerGetAttribute(void* data, int attribute, CUdeviceptr ptr) {
  if (!state().initialized) return kNotInitialized;
  if (!data) return kInvalidValue;
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  uint64_t start = 0;
  const Allocation* a = findAllocation(s, ptr, &start);
  if (!a || ptr == start + a->size) return kInvalidValue;  // host memory, as the driver answers for it
  switch (attribute) {
    case kPointerAttributeMemoryType: *static_cast<unsigned*>(data) = kMemoryTypeDevice; break;
    case kPointerAttributeDeviceOrdinal: *static_cast<int*>(data) = 0; break;
    case kPointerAttributeRangeStart: *static_cast<CUdeviceptr*>(data) = start; break;
    case kPointerAttributeRangeSize: *static_cast<size_t*>(data) = a->size; break;
    default: return failWith(kInvalidValue, "the emulator knows no pointer attribute " + std::to_string(attribute));
  }
  return kCudaSuccess;
}

}  // namespace

void addMemoryEntryPoints(DriverApi& a) {
  a.cuMemAlloc = emuMemAlloc;
  a.cuMemFree = emuMemFree;
  a.cuMemGetInfo = emuMemGetInfo;
  a.cuMemcpyHtoDAsync = emuMemcpyHtoDAsync;
  a.cuMemcpyDtoHAsync = emuMemcpyDtoHAsync;
  a.cuMemcpyDtoDAsync = emuMemcpyDtoDAsync;
  a.cuPointerGetAttribute = emuPointerGetAttribute;
}

}  // namespace nnc::rt::cuda::emu::detail

namespace nnc::rt::cuda::emu {

bool isDeviceRange(uint64_t ptr, uint64_t bytes, std::string* why) {
  using namespace detail;
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  uint64_t start = 0;
  const Allocation* a = findAllocation(s, ptr, &start);
  if (!a) {
    if (why) *why = "pointer " + hex(ptr) + " is not device memory";
    return false;
  }
  if (bytes > a->size - (ptr - start)) {
    if (why)
      *why = "range of " + std::to_string(bytes) + " bytes at " + hex(ptr) + " overruns its " +
             std::to_string(a->size) + "-byte device allocation at " + hex(start) + " by " +
             std::to_string(bytes - (a->size - (ptr - start))) + " bytes";
    return false;
  }
  return true;
}

}  // namespace nnc::rt::cuda::emu
