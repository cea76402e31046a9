// Vector helpers shared by the population kernels (population_gemm.cc and
// the delta rows of population_delta_row.h): GCC vector types, float32 /
// bfloat16 weight loads (a bfloat16 is the high half of a float32, so
// widening is exact) and the weights' storage type. Which build of a kernel
// runs (AVX-512, AVX2 or the baseline) is population_isa.h's.

#ifndef TFRL_CUSTOM_OPS_POPULATION_SIMD_H_
#define TFRL_CUSTOM_OPS_POPULATION_SIMD_H_

#include <cstdint>
#include <cstring>

#include "tensorflow/core/framework/tensor.h"

namespace tfrl {
namespace population {

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
struct Storage<tensorflow::bfloat16> {
  typedef uint16_t type;
};

template <typename T>
const typename Storage<T>::type* WeightData(const tensorflow::Tensor& w) {
  static_assert(sizeof(T) == sizeof(typename Storage<T>::type), "storage");
  return reinterpret_cast<const typename Storage<T>::type*>(w.flat<T>().data());
}

}  // namespace population
}  // namespace tfrl

#endif  // TFRL_CUSTOM_OPS_POPULATION_SIMD_H_
