// The op classes of PopulationMatmul and PopulationConv2D (see
// population_ops.cc).
//
// Active rows are bucketed by network (a stable sort, population_rows.h),
// every bucket becomes one GEMM (population_gemm.h) whose A and C rows are
// addressed through row pointers, and the buckets are cut into work units
// that run on the intra-op thread pool; each unit's rows get the epilogue
// (bias, ReLU) right after their GEMM. The GEMM's build (AVX-512, AVX2 + FMA
// or the SSE baseline) is the one the process runs (population_isa.h), so
// the library runs on any x86-64 CPU whatever flags TensorFlow was built
// with.
//
// Weights come as float32 or bfloat16. bfloat16 halves the bytes that a step
// streams through a population's dense layers (one weight read per network
// per step is what bounds them on a CPU).
//
// PopulationConv2D with input_dtype = "bfloat16" (bfloat16 kernels only) also
// rounds its input to bfloat16 and accumulates in float32: by rounding the
// active rows' images into a scratch copy that the float32 GEMM then reads;
// in a build with the AMX option (TFRL_BUILD_AMX=1, off by default) on CPUs
// with AMX-BF16, in AMX tiles instead (population_amx.{h,cc}).

#pragma GCC optimize("fp-contract=fast")

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

#include "tensorflow/core/framework/op_kernel.h"
#include "tensorflow/core/framework/tensor.h"
#include "tensorflow/core/framework/tensor_shape.h"
#include "tensorflow/core/platform/threadpool.h"
#include "population_gemm.h"
#include "population_isa.h"
#include "population_rows.h"
#include "population_simd.h"
#if TFRL_POPULATION_AMX
#include "population_amx.h"
#endif

namespace tensorflow {
namespace {

using tfrl::population::AmxActive;
using tfrl::population::ApplyEpilogue;
using tfrl::population::BucketRows;
using tfrl::population::Buckets;
using tfrl::population::CheckConvAttrs;
using tfrl::population::CheckConvInput;
using tfrl::population::CheckConvKernel;
using tfrl::population::CheckIndexAndActive;
using tfrl::population::CheckRank;
using tfrl::population::CountCall;
using tfrl::population::Epilogue;
using tfrl::population::GemmArgs;
using tfrl::population::GemmFn;
using tfrl::population::GemmPath;
using tfrl::population::Isa;
using tfrl::population::KernelRows;
using tfrl::population::kNumPaths;
using tfrl::population::OutputShape;
using tfrl::population::Path;
using tfrl::population::PickGemm;
using tfrl::population::Storage;
using tfrl::population::WeightData;
#if TFRL_POPULATION_AMX
using tfrl::population::ConvGeometry;
using tfrl::population::RunAmxConv;
#endif

Status ParseEpilogue(OpKernelConstruction* ctx, bool* add_bias, bool* relu) {
  std::string epilogue;
  TF_RETURN_IF_ERROR(ctx->GetAttr("epilogue", &epilogue));
  if (epilogue != "none" && epilogue != "bias" && epilogue != "relu" && epilogue != "bias_relu")
    return errors::InvalidArgument("epilogue must be 'none', 'bias', 'relu' or 'bias_relu', got '",
                                   epilogue, "'");
  *add_bias = epilogue == "bias" || epilogue == "bias_relu";
  *relu = epilogue == "relu" || epilogue == "bias_relu";
  return OkStatus();
}

// The epilogue of the op's inputs: bias (input 4) must be [P, N] if added.
Status MakeEpilogue(OpKernelContext* ctx, bool add_bias, bool relu, int64_t pop, int64_t n,
                    Epilogue* out) {
  out->relu = relu;
  if (!add_bias) return OkStatus();
  const Tensor& bias = ctx->input(4);
  if (bias.dims() != 2 || bias.dim_size(0) != pop || bias.dim_size(1) != n)
    return errors::InvalidArgument("bias must be [P, N] = [", pop, ", ", n,
                                   "] (one row per network of w) for this epilogue, got shape ",
                                   bias.shape().DebugString());
  out->bias = bias.flat<float>().data();
  return OkStatus();
}

// Validates the active rows' network indices, buckets them by network and
// runs one grouped GEMM per network on the intra-op threads. `row(b, i)` is
// the start of A row i (of m) of batch row b; C rows are y + (b * m + i) * n.
// Each unit's rows get the epilogue right after their GEMM. Inactive rows of
// y are zeroed.
template <typename TW, typename RowFn>
void RunGrouped(OpKernelContext* ctx, GemmFn<TW> gemm, const Tensor& index,
                const Tensor& active, int64_t pop, int64_t m, GemmArgs<TW> geo,
                const TW* w, float* y, RowFn row, const Epilogue& epilogue = Epilogue()) {
  const int64_t batch = index.dim_size(0);
  const int64_t n = geo.n, k = geo.k;
  const auto act = active.flat<bool>();
  Buckets buckets;
  OP_REQUIRES_OK(ctx, BucketRows(index, active, pop, &buckets));
  for (int64_t b = 0; b < batch; ++b) {
    if (y != nullptr && (!act(b) || k == 0)) std::memset(y + b * m * n, 0, sizeof(float) * m * n);
  }
  if (m == 0 || n == 0) return;
  if (k == 0) {  // y = 0 @ w: only the epilogue is left.
    if (!epilogue.Any()) return;
    for (int64_t b = 0; b < batch; ++b) {
      if (!act(b)) continue;
      for (int64_t i = 0; i < m; ++i) {
        float* c = y + (b * m + i) * n;
        ApplyEpilogue(epilogue, index.flat<int32>()(b), n, &c, 1);
      }
    }
    return;
  }
  const std::vector<int64_t>& order = buckets.order;
  const int64_t num_active = static_cast<int64_t>(order.size());
  if (num_active == 0) return;
  // Row pointers grouped by network: a bucket's rows [begin, end) own
  // [begin * m, end * m).
  std::vector<const float*> arows(num_active * m);
  std::vector<float*> crows(num_active * m);
  for (int64_t r = 0; r < num_active; ++r) {
    const int64_t b = order[r];
    for (int64_t i = 0; i < m; ++i) {
      arows[r * m + i] = row(b, i);
      crows[r * m + i] = y + (b * m + i) * n;
    }
  }
  // Work units: chunks of one bucket's rows, enough of them to balance.
  const int num_threads =
      ctx->device()->tensorflow_cpu_worker_threads()->num_threads;
  const int64_t total_rows = num_active * m;
  int64_t chunk =
      std::max<int64_t>(8, total_rows / (8 * std::max(1, num_threads)));
  chunk = (chunk + 47) / 48 * 48;  // a multiple of both micro-kernel heights
  struct Unit {
    int64_t p, begin, end;
  };
  std::vector<Unit> units;
  for (const Buckets::Bucket& bucket : buckets.buckets) {
    const int64_t begin = bucket.begin * m, end = bucket.end * m;
    for (int64_t s = begin; s < end; s += chunk)
      units.push_back({bucket.p, s, std::min(end, s + chunk)});
  }
  int64_t gemm_calls[kNumPaths] = {};  // one GEMM call per unit, by strategy
  for (const Unit& un : units) ++gemm_calls[static_cast<int>(GemmPath(un.end - un.begin, n))];
  for (Path path : {Path::kGemmStreamed, Path::kGemmKChunked, Path::kGemmTiles}) {
    if (gemm_calls[static_cast<int>(path)]) CountCall(path, gemm_calls[static_cast<int>(path)]);
  }
  const int64_t cost = std::max<int64_t>(1, total_rows * k * n / units.size());
  auto work = [&](int64_t first, int64_t last) {
    for (int64_t u = first; u < last; ++u) {
      const Unit& un = units[u];
      GemmArgs<TW> g = geo;
      g.a = arows.data() + un.begin;
      g.c = crows.data() + un.begin;
      g.rows = un.end - un.begin;
      g.b = w + un.p * k * n;
      gemm(g);
      if (epilogue.Any()) ApplyEpilogue(epilogue, un.p, n, g.c, g.rows);
    }
  };
  ctx->device()->tensorflow_cpu_worker_threads()->workers->ParallelFor(
      static_cast<int64_t>(units.size()), cost, work);
}

template <typename T>
class PopulationMatmulOp : public OpKernel {
  typedef typename Storage<T>::type TW;

 public:
  explicit PopulationMatmulOp(OpKernelConstruction* ctx) : OpKernel(ctx) {
    OP_REQUIRES_OK(ctx, PickGemm<TW>(&gemm_, &isa_));
    OP_REQUIRES_OK(ctx, ParseEpilogue(ctx, &add_bias_, &relu_));
  }

  void Compute(OpKernelContext* ctx) override {
    const Tensor& x = ctx->input(0);
    const Tensor& w = ctx->input(1);
    const Tensor& index = ctx->input(2);
    const Tensor& active = ctx->input(3);
    OP_REQUIRES_OK(ctx, CheckRank(x, 3, "x", "[B, M, K]"));
    OP_REQUIRES_OK(ctx, CheckRank(w, 3, "w", "[P, K, N]"));
    const int64_t batch = x.dim_size(0), m = x.dim_size(1), k = x.dim_size(2);
    const int64_t pop = w.dim_size(0), n = w.dim_size(2);
    OP_REQUIRES_OK(ctx, CheckIndexAndActive(index, active, batch));
    OP_REQUIRES(ctx, w.dim_size(1) == k,
                errors::InvalidArgument(
                    "w.shape[1] must equal x.shape[2] (K): got w shape ",
                    w.shape().DebugString(), ", expected [P, ", k,
                    ", N] for x shape ", x.shape().DebugString()));
    Epilogue epilogue;
    OP_REQUIRES_OK(ctx, MakeEpilogue(ctx, add_bias_, relu_, pop, n, &epilogue));
    TensorShape y_shape;
    OP_REQUIRES_OK(ctx, OutputShape({batch, m, n}, "y", &y_shape));
    Tensor* y = nullptr;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(0, y_shape, &y));
    if (y->NumElements() == 0) {
      // Still validate the indices of active rows.
      RunGrouped<TW>(ctx, gemm_, index, active, pop, 0, GemmArgs<TW>{},
                     static_cast<const TW*>(nullptr), nullptr,
                     [](int64_t, int64_t) { return static_cast<const float*>(nullptr); });
      return;
    }
    CountCall(isa_);
    const float* xp = x.flat<float>().data();
    GemmArgs<TW> geo{nullptr, nullptr, 0, nullptr, k, n, k, 1, 0};
    RunGrouped(ctx, gemm_, index, active, pop, m, geo, WeightData<T>(w),
               y->flat<float>().data(),
               [xp, m, k](int64_t b, int64_t i) { return xp + (b * m + i) * k; },
               epilogue);
  }

 private:
  GemmFn<TW> gemm_ = nullptr;
  Isa isa_ = Isa::kBaseline;
  bool add_bias_ = false;
  bool relu_ = false;
};

// Rounds a float32 to the nearest bfloat16 (ties to even), as tf.cast does,
// and widens it back: NaN stays NaN (quiet), overflow goes to infinity.
inline float RoundToBfloat16(float v) {
  uint32_t u;
  std::memcpy(&u, &v, sizeof(u));
  if ((u & 0x7fffffffu) > 0x7f800000u) {
    u = (u | 0x00400000u) & 0xffff0000u;
  } else {
    u = (u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u;
  }
  std::memcpy(&v, &u, sizeof(v));
  return v;
}

// x (float32 or uint8) as float32 times `scale`, rounded to bfloat16 (held
// as float32) if `round`: the active rows into `out`, inactive ones skipped.
template <typename TX>
void ConvertInput(OpKernelContext* ctx, const TX* x, const Tensor& active, int64_t image,
                  float scale, bool round, float* out) {
  const auto act = active.flat<bool>();
  ctx->device()->tensorflow_cpu_worker_threads()->workers->ParallelFor(
      active.dim_size(0), image * 4, [&](int64_t first, int64_t last) {
        for (int64_t b = first; b < last; ++b) {
          if (!act(b)) continue;
          const TX* src = x + b * image;
          float* dst = out + b * image;
          if (round) {
            for (int64_t i = 0; i < image; ++i)
              dst[i] = RoundToBfloat16(static_cast<float>(src[i]) * scale);
          } else {
            for (int64_t i = 0; i < image; ++i) dst[i] = static_cast<float>(src[i]) * scale;
          }
        }
      });
}

template <typename T, typename TX>
class PopulationConv2DOp : public OpKernel {
  typedef typename Storage<T>::type TW;

 public:
  explicit PopulationConv2DOp(OpKernelConstruction* ctx) : OpKernel(ctx) {
    OP_REQUIRES_OK(ctx, PickGemm<TW>(&gemm_, &isa_));
    OP_REQUIRES_OK(ctx, ParseEpilogue(ctx, &add_bias_, &relu_));
    OP_REQUIRES_OK(ctx, ctx->GetAttr("input_scale", &input_scale_));
    OP_REQUIRES_OK(ctx, ctx->GetAttr("kernel_size", &kernel_size_));
    OP_REQUIRES_OK(ctx, ctx->GetAttr("stride", &stride_));
    OP_REQUIRES_OK(ctx, CheckConvAttrs(kernel_size_, stride_));
    std::string input_dtype;
    OP_REQUIRES_OK(ctx, ctx->GetAttr("input_dtype", &input_dtype));
    OP_REQUIRES(ctx, input_dtype == "float32" || input_dtype == "bfloat16",
                errors::InvalidArgument("input_dtype must be 'float32' or 'bfloat16', got '",
                                        input_dtype, "'"));
    round_input_ = input_dtype == "bfloat16";
    constexpr bool kBf16Kernels = std::is_same<T, bfloat16>::value;
    OP_REQUIRES(ctx, !round_input_ || kBf16Kernels,
                errors::InvalidArgument("input_dtype 'bfloat16' needs bfloat16 kernels "
                                        "(T = bfloat16), got T = ",
                                        DataTypeString(DataTypeToEnum<T>::v())));
    use_amx_ = round_input_ && AmxActive(isa_);
  }

  void Compute(OpKernelContext* ctx) override {
    const Tensor& x = ctx->input(0);
    const Tensor& w = ctx->input(1);
    const Tensor& index = ctx->input(2);
    const Tensor& active = ctx->input(3);
    OP_REQUIRES_OK(ctx, CheckRank(x, 4, "x", "[B, H, W, C]"));
    OP_REQUIRES_OK(ctx, CheckRank(w, 3, "w", "[P, K, N]"));
    const int64_t batch = x.dim_size(0), h = x.dim_size(1), wd = x.dim_size(2),
                  c = x.dim_size(3);
    const int64_t ks = kernel_size_, st = stride_;
    const int64_t pop = w.dim_size(0), n = w.dim_size(2);
    OP_REQUIRES_OK(ctx, CheckIndexAndActive(index, active, batch));
    OP_REQUIRES_OK(ctx, CheckConvInput(h, wd, ks));
    int64_t k;
    OP_REQUIRES_OK(ctx, KernelRows(ks, c, &k));
    OP_REQUIRES_OK(ctx, CheckConvKernel(x, w, ks, k));
    Epilogue epilogue;
    OP_REQUIRES_OK(ctx, MakeEpilogue(ctx, add_bias_, relu_, pop, n, &epilogue));
    const int64_t oh = (h - ks) / st + 1, ow = (wd - ks) / st + 1;
    TensorShape y_shape;
    OP_REQUIRES_OK(ctx, OutputShape({batch, oh, ow, n}, "y", &y_shape));
    Tensor* y = nullptr;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(0, y_shape, &y));
    if (y->NumElements() == 0) {
      // Still validate the indices of active rows.
      Buckets unused;
      OP_REQUIRES_OK(ctx, BucketRows(index, active, pop, &unused));
      return;
    }
    const TX* xin = x.flat<TX>().data();
    const float* xp = reinterpret_cast<const float*>(xin);  // used only if TX = float
    // The GEMM reads float32 patches in place: a uint8 or scaled input is
    // converted first, and on the portable path a bfloat16 input is rounded
    // (the AMX path rounds while packing).
    const bool round = round_input_ && !use_amx_;
    Tensor converted;
    if (!std::is_same<TX, float>::value || input_scale_ != 1.0f || round) {
      OP_REQUIRES_OK(ctx, ctx->allocate_temp(DT_FLOAT, x.shape(), &converted));
      float* cp = converted.flat<float>().data();
      ConvertInput(ctx, xin, active, h * wd * c, input_scale_, round, cp);
      xp = cp;
    }
    CountCall(use_amx_ && k > 0 ? Path::kAmx : static_cast<Path>(isa_));
#if TFRL_POPULATION_AMX
    if (use_amx_ && k > 0) {
      const ConvGeometry g{h, wd, c, ks, st, ow, oh * ow, k, n};
      RunAmxConv(ctx, g, index, active, pop,
                 reinterpret_cast<const uint16_t*>(WeightData<T>(w)), xp,
                 y->flat<float>().data(), epilogue);
      return;
    }
#endif
    GemmArgs<TW> geo{nullptr, nullptr, 0, nullptr, k, n, ks * c, ks, wd * c};
    RunGrouped(ctx, gemm_, index, active, pop, oh * ow, geo,
               WeightData<T>(w), y->flat<float>().data(),
               [=](int64_t b, int64_t i) {
                 const int64_t oi = i / ow, oj = i % ow;
                 return xp + ((b * h + oi * st) * wd + oj * st) * c;
               },
               epilogue);
  }

 private:
  GemmFn<TW> gemm_ = nullptr;
  Isa isa_ = Isa::kBaseline;
  int kernel_size_ = 1;
  int stride_ = 1;
  float input_scale_ = 1.0f;
  bool round_input_ = false;
  bool use_amx_ = false;
  bool add_bias_ = false;
  bool relu_ = false;
};

#define TFRL_REGISTER(T)                                                  \
  REGISTER_KERNEL_BUILDER(                                                \
      Name("PopulationMatmul").Device(DEVICE_CPU).TypeConstraint<T>("T"),   \
      PopulationMatmulOp<T>);                                             \
  REGISTER_KERNEL_BUILDER(Name("PopulationConv2D")                        \
                              .Device(DEVICE_CPU)                         \
                              .TypeConstraint<T>("T")                     \
                              .TypeConstraint<float>("TX"),               \
                          PopulationConv2DOp<T, float>);                  \
  REGISTER_KERNEL_BUILDER(Name("PopulationConv2D")                        \
                              .Device(DEVICE_CPU)                         \
                              .TypeConstraint<T>("T")                     \
                              .TypeConstraint<uint8>("TX"),               \
                          PopulationConv2DOp<T, uint8>);
TFRL_REGISTER(float)
TFRL_REGISTER(bfloat16)
#undef TFRL_REGISTER

}  // namespace
}  // namespace tensorflow
