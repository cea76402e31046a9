// Helpers shared by the population kernels (population_kernels.cc,
// population_delta.cc and population_delta_net.cc): GCC vector types,
// float32 / bfloat16 weight loads (a bfloat16 is the high half of a float32,
// so widening is exact), the weights' storage type, and the choice of ISA
// build (population_isa.cc).

#ifndef TFRL_CUSTOM_OPS_POPULATION_SIMD_H_
#define TFRL_CUSTOM_OPS_POPULATION_SIMD_H_

#include <cstdint>
#include <cstring>
#include <initializer_list>

#include "absl/strings/str_join.h"

#include "tensorflow/core/framework/tensor.h"
#include "tensorflow/core/framework/tensor_shape.h"
#include "tensorflow/core/platform/errors.h"
#include "tensorflow/core/platform/status.h"
#include "tensorflow/core/util/overflow.h"

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

// The three builds of each kernel (each compiled with its own target
// attribute, so the library loads on any x86-64 CPU): AVX-512 (F, DQ, BW,
// with AVX2 and FMA), AVX2 + FMA, and the baseline (SSE2 vectors of 4 floats
// on x86-64, GCC's generic vectors elsewhere).
enum class Isa : int { kBaseline = 0, kAvx2 = 1, kAvx512 = 2 };
constexpr int kNumIsas = 3;

// The paths whose op calls PopulationKernelInfo counts: the three ISA
// builds, and the AMX tiles of the bfloat16-input convolution.
enum class Path : int { kBaseline = 0, kAvx2 = 1, kAvx512 = 2, kAmx = 3 };
constexpr int kNumPaths = 4;

// "avx512", "avx2", and "sse" for the baseline on x86-64 ("portable"
// elsewhere); "amx" for Path::kAmx.
const char* IsaName(Isa isa);
const char* PathName(Path path);

// Whether this CPU (and OS) runs the build.
bool CpuRunsIsa(Isa isa);

// The build every population kernel of this process runs, decided once per
// process: the one the environment variable TFRL_POPULATION_ISA names
// (avx512, avx2, sse or portable - the last two both mean the baseline - or
// auto), else the widest the CPU runs. An unknown name, or a build the CPU
// cannot run, is an InvalidArgument error (the kernels then refuse to run
// instead of silently running another build).
Status ActiveIsa(Isa* isa);

// Counts one op call on `path` (PopulationKernelInfo reports the counts, so
// that tests can assert which path ran).
void CountCall(Path path);
int64_t CallCount(Path path);

TFRL_INLINE void CountCall(Isa isa) { CountCall(static_cast<Path>(isa)); }

// The shape `dims` of an output called `what`, or InvalidArgument when its
// size does not fit in int64 (empty inputs may have huge dimensions, e.g. x
// of shape [1, 2^40, 2^40, 0]; TensorShape's constructor would abort).
inline Status OutputShape(std::initializer_list<int64_t> dims, const char* what,
                          TensorShape* shape) {
  const Status status = TensorShape::BuildTensorShape(dims, shape);
  if (status.ok()) return status;
  return errors::InvalidArgument(what, " would have shape [", absl::StrJoin(dims, ", "),
                                 "], too many elements: ", status.message());
}

// *k = kernel_size^2 * C, a kernel's rows, or InvalidArgument when that
// overflows int64 (possible only for an empty x, whose dimensions may be
// huge).
inline Status KernelRows(int64_t ks, int64_t c, int64_t* k) {
  *k = MultiplyWithoutOverflow(MultiplyWithoutOverflow(ks, ks), c);
  if (*k >= 0) return OkStatus();
  return errors::InvalidArgument("kernel_size^2 * C = ", ks, "^2 * ", c,
                                 " does not fit in int64");
}

// The build of a kernel that ActiveIsa() chose, into *fn (and *isa).
template <typename Fn>
Status PickByIsa(Fn avx512, Fn avx2, Fn baseline, Fn* fn, Isa* isa) {
  const Status status = ActiveIsa(isa);
  if (!status.ok()) return status;
  switch (*isa) {
    case Isa::kAvx512: *fn = avx512; break;
    case Isa::kAvx2: *fn = avx2; break;
    default: *fn = baseline; break;
  }
  return status;
}

}  // namespace population_simd
}  // namespace tensorflow

#endif  // TFRL_CUSTOM_OPS_POPULATION_SIMD_H_
