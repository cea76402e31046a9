// Which ISA build the population kernels run (chosen once per process: by
// the first SelectIsa, the PopulationSelectIsa op, or else the first kernel,
// with the environment variable TFRL_POPULATION_ISA as an override; see
// population_isa.h), the count of op calls on each path, and the kernels of
// PopulationKernelInfo and PopulationSelectIsa, which report both (see
// population_ops.cc).

#include <atomic>
#include <cstdlib>
#include <mutex>
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
constexpr char kNoAmxVar[] = "TFRL_POPULATION_NO_AMX";
constexpr char kNames[] = "auto, amx, avx512, avx2, sse or portable";

struct IsaChoice {
  Isa isa = Isa::kBaseline;
  bool amx = false;  // the bfloat16-input convolution runs in AMX tiles
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

bool AmxUsable() {
#if TFRL_POPULATION_AMX
  return AmxBf16Usable();  // false when TFRL_POPULATION_NO_AMX is set
#else
  return false;  // not in this build (TFRL_BUILD_AMX=1 compiles it in)
#endif
}

// The override variable's value, or nullptr when it is unset or empty.
const char* Override() {
  const char* value = std::getenv(kEnvVar);
  return value != nullptr && *value != '\0' ? value : nullptr;
}

// The choice `value` names ("" or "auto": the widest the CPU runs, AMX tiles
// where usable); `what` names the value in errors.
IsaChoice Resolve(const std::string& value, const std::string& what) {
  IsaChoice choice;
  if (value.empty() || value == "auto") {
    for (int i = kNumIsas - 1; i >= 0; --i) {  // the widest the CPU runs
      if (CpuRunsIsa(static_cast<Isa>(i))) {
        choice.isa = static_cast<Isa>(i);
        break;
      }
    }
    choice.amx = choice.isa == Isa::kAvx512 && AmxUsable();
    return choice;
  }
  Isa wanted;
  if (value == "amx" || value == "avx512") {
    wanted = Isa::kAvx512;
  } else if (value == "avx2") {
    wanted = Isa::kAvx2;
  } else if (value == "sse" || value == "portable") {
    wanted = Isa::kBaseline;
  } else {
    choice.status = errors::InvalidArgument(
        what, " must be one of ", kNames, " (sse and portable both name the baseline "
        "build), got '", value, "'");
    return choice;
  }
  if (!CpuRunsIsa(wanted)) {
    choice.status = errors::InvalidArgument(
        what, "=", value, " asks for the ", IsaName(wanted),
        " build of the population kernels, which this CPU cannot run; builds it runs: ",
        CpuIsaList(), " (or auto for the widest)");
    return choice;
  }
  choice.isa = wanted;
  if (value == "amx") {
    choice.amx = AmxUsable();
#if !TFRL_POPULATION_AMX
    choice.status = errors::InvalidArgument(
        what, "=amx needs a library built with the AMX option (TFRL_BUILD_AMX=1)");
#else
    // TFRL_POPULATION_NO_AMX overrides the request; otherwise tiles the CPU
    // or the OS refuses are an error, not a quiet fallback.
    if (!choice.amx && std::getenv(kNoAmxVar) == nullptr) {
      choice.status = errors::InvalidArgument(
          what, "=amx asks for AMX tiles, which this CPU (or its OS) does not grant; "
          "builds it runs: ", CpuIsaList());
    }
#endif
  }
  return choice;
}

// The choice of `requested`, or the override's when the variable is set.
IsaChoice Choose(const std::string& requested) {
  const char* forced = Override();
  if (forced != nullptr) return Resolve(forced, kEnvVar);
  return Resolve(requested, "--kernel_isa");
}

std::mutex g_choice_mu;
std::atomic<const IsaChoice*> g_choice{nullptr};

// The process's choice, made now from `requested` if none was made yet.
const IsaChoice& Decide(const std::string& requested) {
  const IsaChoice* choice = g_choice.load(std::memory_order_acquire);
  if (choice != nullptr) return *choice;
  std::lock_guard<std::mutex> lock(g_choice_mu);
  choice = g_choice.load(std::memory_order_relaxed);
  if (choice == nullptr) {
    choice = new IsaChoice(Choose(requested));
    g_choice.store(choice, std::memory_order_release);
  }
  return *choice;
}

// "amx" when the tiles run beside the AVX-512 build, else the build's name.
std::string EffectiveName(const IsaChoice& choice) {
  return choice.amx ? "amx" : IsaName(choice.isa);
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
  const IsaChoice& choice = Decide("auto");
  *isa = choice.isa;
  return choice.status;
}

Status SelectIsa(const std::string& requested, std::string* running) {
  // A bad request is refused before it chooses anything for the process.
  const bool overridden = Override() != nullptr;
  const IsaChoice wanted = Resolve(requested, "--kernel_isa");
  if (!overridden && !wanted.status.ok()) return wanted.status;
  const IsaChoice& choice = Decide(requested);
  if (!choice.status.ok()) return choice.status;
  *running = EffectiveName(choice);
  const bool any = requested.empty() || requested == "auto";
  if (!overridden && !any && EffectiveName(wanted) != *running) {
    return errors::FailedPrecondition(
        "the population kernels of this process already run the ", *running,
        " build (chosen by the first population op or selection); --kernel_isa=", requested,
        " must be chosen before any population op runs, or in a new process");
  }
  return Status();
}

bool AmxActive(Isa isa) {
  const IsaChoice& choice = Decide("auto");
  return isa == Isa::kAvx512 && choice.isa == Isa::kAvx512 && choice.amx;
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
    // Only beside the AVX-512 build, and not when amx was not chosen.
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

class PopulationSelectIsaOp : public OpKernel {
 public:
  explicit PopulationSelectIsaOp(OpKernelConstruction* ctx) : OpKernel(ctx) {
    OP_REQUIRES_OK(ctx, ctx->GetAttr("isa", &isa_));
  }

  void Compute(OpKernelContext* ctx) override {
    std::string running;
    OP_REQUIRES_OK(ctx, tfrl::population::SelectIsa(isa_, &running));
    Tensor* out = nullptr;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(0, TensorShape({}), &out));
    out->scalar<tstring>()() = running;
  }

 private:
  std::string isa_;
};

REGISTER_KERNEL_BUILDER(Name("PopulationSelectIsa").Device(DEVICE_CPU), PopulationSelectIsaOp);

}  // namespace
}  // namespace tensorflow
