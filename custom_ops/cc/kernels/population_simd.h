// Helpers shared by the population kernels (population_kernels.cc and
// population_delta.cc): GCC vector types, float32 / bfloat16 weight loads
// (a bfloat16 is the high half of a float32, so widening is exact), and the
// weights' storage type.

#ifndef TFRL_CUSTOM_OPS_POPULATION_SIMD_H_
#define TFRL_CUSTOM_OPS_POPULATION_SIMD_H_

#include <cstdint>
#include <cstring>

#include "tensorflow/core/framework/tensor.h"

namespace tensorflow {
namespace population_simd {

#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
#define TFRL_X86 1
#define TFRL_INLINE inline __attribute__((always_inline))
#else
#define TFRL_X86 0
#define TFRL_INLINE inline
#endif

template <int W>
struct Vec {
  typedef float type __attribute__((vector_size(W * sizeof(float))));
  typedef uint16_t half __attribute__((vector_size(W * sizeof(uint16_t))));
  typedef uint32_t wide __attribute__((vector_size(W * sizeof(uint32_t))));
};

TFRL_INLINE float Widen(float v) { return v; }
TFRL_INLINE float Widen(uint16_t v) {
  const uint32_t u = static_cast<uint32_t>(v) << 16;
  float f;
  std::memcpy(&f, &u, sizeof(f));
  return f;
}

template <typename V>
TFRL_INLINE V LoadU(const float* p) {
  V v;
  std::memcpy(&v, p, sizeof(V));
  return v;
}

template <typename V>
TFRL_INLINE void StoreU(float* p, const V& v) {
  std::memcpy(p, &v, sizeof(V));
}

// W weights as a float32 vector.
template <int W>
TFRL_INLINE typename Vec<W>::type LoadW(const float* p) {
  return LoadU<typename Vec<W>::type>(p);
}
template <int W>
TFRL_INLINE typename Vec<W>::type LoadW(const uint16_t* p) {
  typename Vec<W>::half h;
  std::memcpy(&h, p, sizeof(h));
  const typename Vec<W>::wide u =
      __builtin_convertvector(h, typename Vec<W>::wide) << 16;
  typename Vec<W>::type f;
  std::memcpy(&f, &u, sizeof(f));
  return f;
}

// The weights' storage type in the GEMM: float, or bfloat16 as its bits.
template <typename T>
struct Storage {
  typedef float type;
};
template <>
struct Storage<bfloat16> {
  typedef uint16_t type;
};

template <typename T>
const typename Storage<T>::type* WeightData(const Tensor& w) {
  static_assert(sizeof(T) == sizeof(typename Storage<T>::type), "storage");
  return reinterpret_cast<const typename Storage<T>::type*>(w.flat<T>().data());
}

// The widest of three builds of a kernel that this CPU runs: AVX-512,
// AVX2 + FMA, or the baseline (each compiled with its own target attribute,
// so the library loads on any x86-64 CPU).
template <typename Fn>
Fn PickByIsa(Fn avx512, Fn avx2, Fn baseline) {
#if TFRL_X86
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw")) return avx512;
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return avx2;
#endif
  (void)avx512;
  (void)avx2;
  return baseline;
}

}  // namespace population_simd
}  // namespace tensorflow

#endif  // TFRL_CUSTOM_OPS_POPULATION_SIMD_H_
