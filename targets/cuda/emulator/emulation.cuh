// What the generated CUDA C++ needs from CUDA, for the host C++ compiler: the CUDA emulator
// (targets/cuda/emulator/emulated_driver.cpp) compiles a module as this header + the module's source, verbatim
// (the text NVRTC compiles) + one NNC_EMU_KERNEL(name) line per kernel, into a shared object.
// Embedded into the runtime at build time after emulation_abi.h (targets/cuda/codegen/embed_prelude.cmake).
//
// threadIdx/blockIdx/blockDim/gridDim are thread-locals set before each emulated thread runs;
// __syncthreads and the warp shuffles call back into the emulator (nnc_emu_bind), which runs the
// threads of a block as OS threads, checks that every thread reaches each barrier and that every
// lane a shuffle's mask names takes part, and reports what went wrong. __shared__ variables are
// function-local statics: the emulator runs one block at a time per process, so they are per block.
//
// No standard headers: they are most of a small module's compile time (libstdc++'s <math.h> is
// <cmath>, whose special-function templates alone take ~0.25 s of a ~0.35 s compile), and the emulator
// compiles one module per generated program. The C math functions the generated code calls (the names
// targets/cuda/codegen/scalar_ops.cpp emits, float and double) are declared here instead; memcpy and
// is_trivially_copyable are compiler builtins.
// clang-format off
#define NNC_EMU_MATH1(name) float name##f(float) noexcept; double name(double) noexcept;
#define NNC_EMU_MATH2(name) float name##f(float, float) noexcept; double name(double, double) noexcept;
extern "C" {
NNC_EMU_MATH1(fabs) NNC_EMU_MATH1(exp) NNC_EMU_MATH1(log) NNC_EMU_MATH1(sqrt) NNC_EMU_MATH1(sin)
NNC_EMU_MATH1(cos) NNC_EMU_MATH1(tan) NNC_EMU_MATH1(asin) NNC_EMU_MATH1(acos) NNC_EMU_MATH1(atan)
NNC_EMU_MATH1(sinh) NNC_EMU_MATH1(cosh) NNC_EMU_MATH1(tanh) NNC_EMU_MATH1(asinh) NNC_EMU_MATH1(acosh)
NNC_EMU_MATH1(atanh) NNC_EMU_MATH1(erf) NNC_EMU_MATH1(floor) NNC_EMU_MATH1(ceil) NNC_EMU_MATH1(rint)
NNC_EMU_MATH1(trunc) NNC_EMU_MATH2(fmod) NNC_EMU_MATH2(pow)
}
#undef NNC_EMU_MATH1
#undef NNC_EMU_MATH2
// clang-format on

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __shared__ static
#define __align__(n) alignas(n)

// (emulation_abi.h precedes this text in the embedded header: nnc_emu_dim3, nnc_emu_thread,
// nnc_emu_hooks, nnc_emu_kernel.)

namespace {
const nnc_emu_hooks* nnc_emu_h = nullptr;
thread_local nnc_emu_dim3 threadIdx, blockIdx, blockDim, gridDim;

template <class T>
T nnc_emu_bits_as(const void* bits) {
  T v;
  __builtin_memcpy(&v, bits, sizeof v);
  return v;
}

// std::index_sequence, without <utility>.
template <unsigned... I>
struct nnc_emu_indices {};
template <unsigned N, unsigned... I>
struct nnc_emu_make_indices : nnc_emu_make_indices<N - 1, N - 1, I...> {};
template <unsigned... I>
struct nnc_emu_make_indices<0, I...> {
  using type = nnc_emu_indices<I...>;
};
// A kernel's parameters are values (the emitter writes no references; a function type has no
// top-level const): each is read from its slot.
template <class... A, unsigned... I>
void nnc_emu_call(void (*kernel)(A...), void** params, nnc_emu_indices<I...>) {
  kernel(*static_cast<A*>(params[I])...);
}
template <class... A>
void nnc_emu_invoke(void (*kernel)(A...), void** params) {
  nnc_emu_call(kernel, params, typename nnc_emu_make_indices<sizeof...(A)>::type());
}

void nnc_emu_enter(const nnc_emu_thread* w) {
  threadIdx = w->thread;
  blockIdx = w->block;
  blockDim = w->blockDim;
  gridDim = w->gridDim;
}

template <class... A>
constexpr nnc_emu_kernel nnc_emu_describe(void (*)(A...), void (*run)(const nnc_emu_thread*, void**)) {
  static_assert(sizeof...(A) <= NNC_EMU_MAX_PARAMS, "too many kernel parameters for the emulator");
  nnc_emu_kernel k{run, nnc_emu_enter, static_cast<int>(sizeof...(A)), {}};
  int i = 0;
  ((k.paramSizes[i++] = sizeof(A)), ...);
  return k;
}
}  // namespace

inline void __syncthreads() { nnc_emu_h->syncthreads(); }

template <class T>
inline T __shfl_xor_sync(unsigned mask, T value, int laneMask, int width = 32) {
  static_assert(sizeof(T) <= 8 && __is_trivially_copyable(T), "shuffles move at most 8 bytes");
  unsigned long long bits = 0;
  __builtin_memcpy(&bits, &value, sizeof value);
  bits = nnc_emu_h->shfl_xor(mask, bits, laneMask, width);
  return nnc_emu_bits_as<T>(&bits);
}

inline float __int_as_float(int x) { return nnc_emu_bits_as<float>(&x); }
inline float __uint_as_float(unsigned x) { return nnc_emu_bits_as<float>(&x); }
inline int __float_as_int(float x) { return nnc_emu_bits_as<int>(&x); }
inline unsigned __float_as_uint(float x) { return nnc_emu_bits_as<unsigned>(&x); }
inline double __longlong_as_double(long long x) { return nnc_emu_bits_as<double>(&x); }
inline long long __double_as_longlong(double x) { return nnc_emu_bits_as<long long>(&x); }

extern "C" __attribute__((visibility("default"))) void nnc_emu_bind(const nnc_emu_hooks* hooks) { nnc_emu_h = hooks; }

// One per kernel, after the module's source: extern "C" const nnc_emu_kernel* nnc_emu_kernel_<name>().
#define NNC_EMU_KERNEL(name)                                                                                \
  extern "C" __attribute__((visibility("default"))) const nnc_emu_kernel* nnc_emu_kernel_##name() {         \
    static const nnc_emu_kernel nnc_emu_k = nnc_emu_describe(&name, [](const nnc_emu_thread* w, void** p) { \
      nnc_emu_enter(w);                                                                                     \
      nnc_emu_invoke(&name, p);                                                                             \
    });                                                                                                     \
    return &nnc_emu_k;                                                                                      \
  }
