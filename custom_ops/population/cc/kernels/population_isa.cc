// Which ISA build the population kernels run (TFRL_POPULATION_ISA, read once
// per process; see population_isa.h), the count of op calls on each path,
// and the kernel of PopulationKernelInfo, which reports both (see
// population_ops.cc).

#include <atomic>
#include <cstdlib>
#include <string>
#include <vector>

#include "tensorflow/core/framework/op_kernel.h"
#include "tensorflow/core/framework/tensor.h"
#include "tensorflow/core/framework/tensor_shape.h"
#include "population_isa.h"
#if TFRL_POPULATION_AMX
#include "population_amx.h"
#endif

namespace tfrl {
namespace population {

namespace {

using tensorflow::Status;
namespace errors = tensorflow::errors;

constexpr char kEnvVar[] = "TFRL_POPULATION_ISA";

struct IsaChoice {
  Isa isa = Isa::kBaseline;
  Status status;
};

std::string CpuIsaList() {
  std::string list;
  for (int i = kNumIsas - 1; i >= 0; --i) {
    const Isa isa = static_cast<Isa>(i);
    if (!CpuRunsIsa(isa)) continue;
    if (!list.empty()) list += ", ";
    list += IsaName(isa);
  }
  return list;
}

IsaChoice Choose() {
  IsaChoice choice;
  for (int i = kNumIsas - 1; i >= 0; --i) {  // the widest the CPU runs
    if (CpuRunsIsa(static_cast<Isa>(i))) {
      choice.isa = static_cast<Isa>(i);
      break;
    }
  }
  const char* env = std::getenv(kEnvVar);
  const std::string value = env == nullptr ? "" : env;
  if (value.empty() || value == "auto") return choice;
  Isa wanted;
  if (value == "avx512") {
    wanted = Isa::kAvx512;
  } else if (value == "avx2") {
    wanted = Isa::kAvx2;
  } else if (value == "sse" || value == "portable") {
    wanted = Isa::kBaseline;
  } else {
    choice.status = errors::InvalidArgument(
        kEnvVar, " must be one of auto, avx512, avx2, sse or portable (sse and portable "
        "both name the baseline build), got '", value, "'");
    return choice;
  }
  if (!CpuRunsIsa(wanted)) {
    choice.status = errors::InvalidArgument(
        kEnvVar, "=", value, " asks for the ", IsaName(wanted),
        " build of the population kernels, which this CPU cannot run; builds it runs: ",
        CpuIsaList(), " (or unset the variable for the widest)");
    return choice;
  }
  choice.isa = wanted;
  return choice;
}

std::atomic<int64_t> g_calls[kNumPaths];

}  // namespace

const char* IsaName(Isa isa) {
  switch (isa) {
    case Isa::kAvx512: return "avx512";
    case Isa::kAvx2: return "avx2";
    default: return TFRL_X86 ? "sse" : "portable";
  }
}

const char* PathName(Path path) {
  switch (path) {
    case Path::kAmx: return "amx";
    case Path::kGemmStreamed: return "gemm_streamed";
    case Path::kGemmKChunked: return "gemm_k_chunked";
    case Path::kGemmTiles: return "gemm_tiles";
    case Path::kDeltaCirculant: return "delta_circulant";
    default: return IsaName(static_cast<Isa>(path));
  }
}

bool CpuRunsIsa(Isa isa) {
#if TFRL_X86
  __builtin_cpu_init();
  const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  switch (isa) {
    case Isa::kAvx512:  // the AVX-512 build's target attribute names all five
      return avx2 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq") &&
             __builtin_cpu_supports("avx512bw");
    case Isa::kAvx2: return avx2;
    default: return true;
  }
#else
  return isa == Isa::kBaseline;
#endif
}

Status ActiveIsa(Isa* isa) {
  static const IsaChoice* choice = new IsaChoice(Choose());
  *isa = choice->isa;
  return choice->status;
}

bool AmxActive(Isa isa) {
#if TFRL_POPULATION_AMX
  return isa == Isa::kAvx512 && AmxBf16Usable();
#else
  (void)isa;
  return false;  // not in this build (TFRL_BUILD_AMX=1 compiles it in)
#endif
}

std::vector<std::string> BuildOptions() {
  std::vector<std::string> options;
#if TFRL_POPULATION_AMX
  options.push_back("amx");
#endif
#if TFRL_POPULATION_DELTA_CONV2D
  options.push_back("delta_conv2d");
#endif
  return options;
}

void CountCall(Path path, int64_t calls) {
  g_calls[static_cast<int>(path)].fetch_add(calls, std::memory_order_relaxed);
}

int64_t CallCount(Path path) {
  return g_calls[static_cast<int>(path)].load(std::memory_order_relaxed);
}

}  // namespace population
}  // namespace tfrl

namespace tensorflow {
namespace {

using tfrl::population::Isa;
using tfrl::population::kNumIsas;
using tfrl::population::kNumPaths;
using tfrl::population::Path;

class PopulationKernelInfoOp : public OpKernel {
 public:
  using OpKernel::OpKernel;

  void Compute(OpKernelContext* ctx) override {
    Isa isa;
    OP_REQUIRES_OK(ctx, tfrl::population::ActiveIsa(&isa));
    std::vector<Isa> cpu;
    for (int i = kNumIsas - 1; i >= 0; --i)
      if (tfrl::population::CpuRunsIsa(static_cast<Isa>(i))) cpu.push_back(static_cast<Isa>(i));
    Tensor* out = nullptr;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(0, TensorShape({}), &out));
    out->scalar<tstring>()() = tfrl::population::IsaName(isa);
    OP_REQUIRES_OK(ctx, ctx->allocate_output(
                            1, TensorShape({static_cast<int64_t>(cpu.size())}), &out));
    for (size_t i = 0; i < cpu.size(); ++i)
      out->vec<tstring>()(i) = tfrl::population::IsaName(cpu[i]);
    OP_REQUIRES_OK(ctx, ctx->allocate_output(2, TensorShape({}), &out));
    // A narrower TFRL_POPULATION_ISA turns the AMX tiles off.
    out->scalar<bool>()() = tfrl::population::AmxActive(isa);
    Tensor* names = nullptr;
    Tensor* calls = nullptr;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(3, TensorShape({kNumPaths}), &names));
    OP_REQUIRES_OK(ctx, ctx->allocate_output(4, TensorShape({kNumPaths}), &calls));
    for (int i = 0; i < kNumPaths; ++i) {
      names->vec<tstring>()(i) = tfrl::population::PathName(static_cast<Path>(i));
      calls->vec<int64_t>()(i) = tfrl::population::CallCount(static_cast<Path>(i));
    }
    const std::vector<std::string> options = tfrl::population::BuildOptions();
    OP_REQUIRES_OK(ctx, ctx->allocate_output(
                            5, TensorShape({static_cast<int64_t>(options.size())}), &out));
    for (size_t i = 0; i < options.size(); ++i) out->vec<tstring>()(i) = options[i];
  }
};

REGISTER_KERNEL_BUILDER(Name("PopulationKernelInfo").Device(DEVICE_CPU), PopulationKernelInfoOp);

}  // namespace
}  // namespace tensorflow
