// Which build of the population kernels runs, shared by every population op
// (population_gemm.cc, population_delta_net.cc, population_delta_conv2d.cc):
//
// Each kernel is compiled three times, each build with its own target
// attribute so that the library loads on any x86-64 CPU: AVX-512 (F, DQ, BW,
// with AVX2 and FMA), AVX2 + FMA, and the baseline (SSE2 vectors of 4 floats
// on x86-64, GCC's generic vectors elsewhere). IsaBuilds makes the three
// builds of a kernel and PickBuild chooses one, the same one for every
// kernel of the process (ActiveIsa, population_isa.cc). CountCall records
// which path each op call took, for PopulationKernelInfo.

#ifndef TFRL_CUSTOM_OPS_POPULATION_ISA_H_
#define TFRL_CUSTOM_OPS_POPULATION_ISA_H_

#include <cstdint>
#include <string>
#include <vector>

#include "tensorflow/core/platform/status.h"
#include "population_simd.h"

namespace tfrl {
namespace population {

enum class Isa : int { kBaseline = 0, kAvx2 = 1, kAvx512 = 2 };
constexpr int kNumIsas = 3;

// The paths PopulationKernelInfo counts: op calls on each of the three ISA
// builds and on the AMX tiles of the bfloat16-input convolution; GEMM calls
// (one per work unit: a network's rows of a layer, or a chunk of them) on
// each strategy of the grouped GEMM (population_gemm.h): B streamed,
// K-chunked tiles, tiles over all of K; and PopulationDeltaNet calls with a
// compact block-circulant kernel.
enum class Path : int {
  kBaseline = 0, kAvx2 = 1, kAvx512 = 2, kAmx = 3,
  kGemmStreamed = 4, kGemmKChunked = 5, kGemmTiles = 6, kDeltaCirculant = 7
};
constexpr int kNumPaths = 8;

// "avx512", "avx2", and "sse" for the baseline on x86-64 ("portable"
// elsewhere); "amx"; "gemm_streamed", "gemm_k_chunked", "gemm_tiles";
// "delta_circulant".
const char* IsaName(Isa isa);
const char* PathName(Path path);

// Whether this CPU (and OS) runs the build.
bool CpuRunsIsa(Isa isa);

// The build every population kernel of this process runs, decided once per
// process: by the first SelectIsa, else by the first kernel built (auto).
// The environment variable TFRL_POPULATION_ISA, when set, overrides the
// requested build (avx512, avx2, sse or portable - the last two both mean
// the baseline -, amx or auto; the widest the CPU runs by default). An
// unknown name, or a build the CPU cannot run, is an InvalidArgument error
// (the kernels then refuse to run instead of silently running another build).
tensorflow::Status ActiveIsa(Isa* isa);

// Chooses the process's build from `requested` (one of the names above) if
// none is chosen yet, and sets *running to the one that runs ("amx" when the
// bfloat16-input convolution runs in AMX tiles beside the AVX-512 build).
// A bad request chooses nothing (InvalidArgument); a request other than auto
// after another build was chosen is FailedPrecondition (unless the
// environment variable overrides both).
tensorflow::Status SelectIsa(const std::string& requested, std::string* running);

// Whether the bfloat16-input convolution runs in AMX tiles beside build
// `isa`: only in a library built with the AMX option (TFRL_POPULATION_AMX),
// only beside the AVX-512 build (the tiles' conversions are AVX-512
// instructions), only where AmxBf16Usable() (population_amx.h), and only
// when the chosen build is auto or amx (avx512 chooses no tiles).
bool AmxActive(Isa isa);

// The optional parts compiled into this library, off by default: "amx"
// (TFRL_BUILD_AMX=1) and "delta_conv2d" (TFRL_BUILD_DELTA_CONV2D=1).
std::vector<std::string> BuildOptions();

// Counts one op call on `path` (PopulationKernelInfo reports the counts, so
// that tests can assert which path ran).
void CountCall(Path path, int64_t calls = 1);
int64_t CallCount(Path path);

TFRL_INLINE void CountCall(Isa isa) { CountCall(static_cast<Path>(isa)); }

// The build of a kernel that ActiveIsa() chose, into *fn (and *isa).
template <typename Fn>
tensorflow::Status PickByIsa(Fn avx512, Fn avx2, Fn baseline, Fn* fn, Isa* isa) {
  const tensorflow::Status status = ActiveIsa(isa);
  if (!status.ok()) return status;
  switch (*isa) {
    case Isa::kAvx512: *fn = avx512; break;
    case Isa::kAvx2: *fn = avx2; break;
    default: *fn = baseline; break;
  }
  return status;
}

// The three builds of a kernel `Kernel::Run<W>(args...)`, W floats per
// vector: Run (always inlined, as everything it calls) is compiled into each
// build with that build's target attribute.
template <typename Kernel>
struct IsaBuilds {
#if TFRL_X86
  template <typename... Args>
  static __attribute__((target("avx512f,avx512dq,avx512bw,avx2,fma"))) void Avx512(
      Args... args) {
    Kernel::template Run<16>(args...);
  }
  template <typename... Args>
  static __attribute__((target("avx2,fma"))) void Avx2(Args... args) {
    Kernel::template Run<8>(args...);
  }
#endif
  template <typename... Args>
  static void Baseline(Args... args) {
    Kernel::template Run<4>(args...);
  }
};

// Kernel's build for this process (see ActiveIsa) into *fn, and *isa.
template <typename Kernel, typename... Args>
tensorflow::Status PickBuild(void (**fn)(Args...), Isa* isa) {
  typedef void (*Fn)(Args...);
  typedef IsaBuilds<Kernel> Builds;
#if TFRL_X86
  return PickByIsa<Fn>(&Builds::template Avx512<Args...>, &Builds::template Avx2<Args...>,
                       &Builds::template Baseline<Args...>, fn, isa);
#else
  return PickByIsa<Fn>(&Builds::template Baseline<Args...>,
                       &Builds::template Baseline<Args...>,
                       &Builds::template Baseline<Args...>, fn, isa);
#endif
}

}  // namespace population
}  // namespace tfrl

#endif  // TFRL_CUSTOM_OPS_POPULATION_ISA_H_
