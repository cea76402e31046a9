// CPU kernel of PopulationDeltaConv2D (see population_ops.cc): one step of
// incremental inference of one population convolution or dense layer (the
// row machinery is in population_delta_row.h).

#pragma GCC optimize("fp-contract=fast")

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>
#include <vector>

#include "tensorflow/core/framework/op_kernel.h"
#include "tensorflow/core/framework/tensor.h"
#include "tensorflow/core/framework/tensor_shape.h"
#include "tensorflow/core/platform/threadpool.h"
#include "population_delta_row.h"
#include "population_simd.h"

namespace tensorflow {
namespace {

using population_delta::Change;
using population_delta::Covering;
using population_delta::DeltaGeometry;
using population_delta::DeltaRow;
using population_delta::DeltaRunImpl;
using population_delta::DeltaScratch;
using population_delta::kRunRows;
using population_delta::NetworkRuns;
using population_delta::RowRuns;
using population_simd::CountCall;
using population_simd::Isa;
using population_simd::KernelRows;
using population_simd::OutputShape;
using population_simd::PickByIsa;
using population_simd::Storage;
using population_simd::WeightData;

#if TFRL_X86
template <typename TX, typename TW>
__attribute__((target("avx512f,avx512dq,avx512bw,avx2,fma"))) void DeltaRunAvx512(
    const DeltaGeometry& g, const DeltaRow<TX, TW>* rows, int count, DeltaScratch* s,
    Change* const* windows) {
  DeltaRunImpl<16>(g, rows, count, s, windows);
}
template <typename TX, typename TW>
__attribute__((target("avx2,fma"))) void DeltaRunAvx2(const DeltaGeometry& g,
                                                     const DeltaRow<TX, TW>* rows, int count,
                                                     DeltaScratch* s, Change* const* windows) {
  DeltaRunImpl<8>(g, rows, count, s, windows);
}
#endif
template <typename TX, typename TW>
void DeltaRunBaseline(const DeltaGeometry& g, const DeltaRow<TX, TW>* rows, int count,
                      DeltaScratch* s, Change* const* windows) {
  DeltaRunImpl<4>(g, rows, count, s, windows);
}

template <typename TX, typename TW>
using DeltaRunFn = void (*)(const DeltaGeometry&, const DeltaRow<TX, TW>*, int, DeltaScratch*,
                            Change* const*);

// The build TFRL_POPULATION_ISA (or the CPU) chose, into *fn and *isa.
template <typename TX, typename TW>
Status PickDeltaRun(DeltaRunFn<TX, TW>* fn, Isa* isa) {
#if TFRL_X86
  return PickByIsa<DeltaRunFn<TX, TW>>(&DeltaRunAvx512<TX, TW>, &DeltaRunAvx2<TX, TW>,
                                       &DeltaRunBaseline<TX, TW>, fn, isa);
#else
  return PickByIsa<DeltaRunFn<TX, TW>>(&DeltaRunBaseline<TX, TW>, &DeltaRunBaseline<TX, TW>,
                                       &DeltaRunBaseline<TX, TW>, fn, isa);
#endif
}

template <typename T, typename TX>
class PopulationDeltaConv2DOp : public OpKernel {
  typedef typename Storage<T>::type TW;

 public:
  explicit PopulationDeltaConv2DOp(OpKernelConstruction* ctx) : OpKernel(ctx) {
    OP_REQUIRES_OK(ctx, PickDeltaRun<TX, TW>(&run_fn_, &isa_));
    OP_REQUIRES_OK(ctx, ctx->GetAttr("kernel_size", &kernel_size_));
    OP_REQUIRES_OK(ctx, ctx->GetAttr("stride", &stride_));
    OP_REQUIRES_OK(ctx, ctx->GetAttr("input_scale", &input_scale_));
    OP_REQUIRES_OK(ctx, ctx->GetAttr("input_relu", &input_relu_));
    OP_REQUIRES(ctx, kernel_size_ >= 1 && stride_ >= 1,
                errors::InvalidArgument("kernel_size and stride must be >= 1, got ",
                                        kernel_size_, " and ", stride_));
  }

  void Compute(OpKernelContext* ctx) override {
    const Tensor& x = ctx->input(0);
    const Tensor& x_prev = ctx->input(1);
    const Tensor& acc_prev = ctx->input(2);
    const Tensor& w = ctx->input(3);
    const Tensor& index = ctx->input(4);
    const Tensor& fresh = ctx->input(5);
    const Tensor& input_bias = ctx->input(6);
    OP_REQUIRES(ctx, x.dims() == 4,
                errors::InvalidArgument("x must be rank 4 [B, H, W, C], got shape ",
                                        x.shape().DebugString()));
    OP_REQUIRES(ctx, x_prev.shape() == x.shape(),
                errors::InvalidArgument("x_prev must have the shape of x ",
                                        x.shape().DebugString(), ", got ",
                                        x_prev.shape().DebugString()));
    OP_REQUIRES(ctx, w.dims() == 3,
                errors::InvalidArgument("w must be rank 3 [P, K, N], got shape ",
                                        w.shape().DebugString()));
    const int64_t batch = x.dim_size(0);
    DeltaGeometry g{x.dim_size(1), x.dim_size(2), x.dim_size(3), kernel_size_, stride_,
                    0, 0, w.dim_size(2), input_scale_, input_relu_, nullptr, nullptr};
    const int64_t pop = w.dim_size(0);
    OP_REQUIRES(ctx, g.h >= g.ks && g.w >= g.ks,
                errors::InvalidArgument("x spatial size ", g.h, "x", g.w,
                                        " is smaller than kernel_size ", g.ks));
    int64_t k;
    OP_REQUIRES_OK(ctx, KernelRows(g.ks, g.c, &k));
    OP_REQUIRES(ctx, w.dim_size(1) == k,
                errors::InvalidArgument(
                    "w.shape[1] must be kernel_size^2 * C = ", k, ": got w shape ",
                    w.shape().DebugString(), " for x shape ", x.shape().DebugString(),
                    " and kernel_size ", g.ks));
    g.out_h = (g.h - g.ks) / g.stride + 1;
    g.out_w = (g.w - g.ks) / g.stride + 1;
    TensorShape out_shape;
    OP_REQUIRES_OK(ctx, OutputShape({batch, g.out_h, g.out_w, g.n}, "acc", &out_shape));
    OP_REQUIRES(ctx, acc_prev.shape() == out_shape,
                errors::InvalidArgument("acc_prev must be the output's shape ",
                                        out_shape.DebugString(), ", got ",
                                        acc_prev.shape().DebugString()));
    OP_REQUIRES(ctx, index.dims() == 1 && index.dim_size(0) == batch,
                errors::InvalidArgument("index must be [B] = [", batch, "], got shape ",
                                        index.shape().DebugString()));
    OP_REQUIRES(ctx, fresh.dims() == 1 && fresh.dim_size(0) == batch,
                errors::InvalidArgument("fresh must be [B] = [", batch, "], got shape ",
                                        fresh.shape().DebugString()));
    const bool no_bias = input_bias.shape() == TensorShape({0, 0});
    OP_REQUIRES(ctx, no_bias || (input_bias.dims() == 2 && input_bias.dim_size(0) == pop &&
                                 input_bias.dim_size(1) == g.c),
                errors::InvalidArgument("input_bias must be [P, C] = [", pop, ", ", g.c,
                                        "], or [0, 0] for none, got shape ",
                                        input_bias.shape().DebugString()));
    const bool has_bias = input_bias.NumElements() > 0;
    const auto idx = index.flat<int32>();
    for (int64_t b = 0; b < batch; ++b) {
      OP_REQUIRES(ctx, idx(b) >= 0 && idx(b) < pop,
                  errors::InvalidArgument("index[", b, "] = ", idx(b),
                                          " is out of range: expected a value in [0, ", pop,
                                          ") (w.shape[0] = P)"));
    }
    Tensor* acc = nullptr;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(0, out_shape, &acc));
    if (acc->NumElements() == 0) return;
    CountCall(isa_);
    const int64_t image = g.h * g.w * g.c, out_size = g.out_h * g.out_w * g.n;
    const TX* xd = x.flat<TX>().data();
    const TX* pd = x_prev.flat<TX>().data();
    const float* ad = acc_prev.flat<float>().data();
    float* od = acc->flat<float>().data();
    const auto fr = fresh.flat<bool>();
    if (k == 0) {  // no input channels: nothing changes (x may be [B, 2^40, 1, 0])
      for (int64_t b = 0; b < batch; ++b) {
        if (fr(b)) {
          std::memset(od + b * out_size, 0, sizeof(float) * out_size);
        } else {
          std::memcpy(od + b * out_size, ad + b * out_size, sizeof(float) * out_size);
        }
      }
      return;
    }
    const TW* wd = WeightData<T>(w);
    std::vector<int64_t> ox_lo(g.w), ox_hi(g.w);
    for (int64_t x = 0; x < g.w; ++x) Covering(x, g.ks, g.stride, g.out_w, &ox_lo[x], &ox_hi[x]);
    g.ox_lo = ox_lo.data();
    g.ox_hi = ox_hi.data();
    const float* bd = has_bias ? input_bias.flat<float>().data() : nullptr;
    // Only a dense layer's rows form runs of more than one (a convolution's
    // kernel is small enough to stay in cache from row to row, and a run is
    // one shard of the thread pool).
    const bool dense = g.out_h * g.out_w == 1;
    const RowRuns runs = NetworkRuns(batch, idx, fr, /*join=*/dense);
    const std::vector<int64_t>& order = runs.order;
    const std::vector<int64_t>& run_start = runs.start;
    auto work = [&](int64_t first_run, int64_t last_run) {
      DeltaScratch scratch(g);
      std::vector<float> row_bias(g.w * g.c, 0.f);
      int64_t bias_of = -1;
      // A dense run's rows keep their change lists until the run is summed.
      std::vector<std::unique_ptr<Change[]>> window_store;
      Change* windows[kRunRows] = {};
      if (dense) {
        for (int r = 0; r < kRunRows; ++r) {
          window_store.emplace_back(new Change[k]);
          windows[r] = window_store.back().get();
        }
      }
      DeltaRow<TX, TW> rows[kRunRows];
      for (int64_t run = first_run; run < last_run; ++run) {
        const int64_t p = idx(order[run_start[run]]);
        if (bd != nullptr && p != bias_of) {
          for (int64_t e = 0; e < g.w * g.c; ++e) row_bias[e] = bd[p * g.c + e % g.c];
          bias_of = p;
        }
        int count = 0;
        for (int64_t u = run_start[run]; u < run_start[run + 1]; ++u) {
          const int64_t b = order[u];
          float* out = od + b * out_size;
          if (fr(b)) {
            std::memset(out, 0, sizeof(float) * out_size);
          } else {
            std::memcpy(out, ad + b * out_size, sizeof(float) * out_size);
          }
          rows[count++] = {xd + b * image, pd + b * image, out, wd + p * k * g.n,
                           row_bias.data(), fr(b)};
        }
        run_fn_(g, rows, count, &scratch, windows);
      }
    };
    // A changed row costs a small part of its full convolution (a fresh one
    // all of it); either is enough for the pool to give each run a shard.
    const int64_t cost = std::max<int64_t>(1, out_size * k / 16);
    auto* workers = ctx->device()->tensorflow_cpu_worker_threads()->workers;
    workers->ParallelFor(runs.count(), cost, work);
  }

 private:
  DeltaRunFn<TX, TW> run_fn_ = nullptr;
  Isa isa_ = Isa::kBaseline;
  int kernel_size_ = 1;
  int stride_ = 1;
  float input_scale_ = 1.0f;
  bool input_relu_ = false;
};

#define TFRL_REGISTER(T, TX)                                   \
  REGISTER_KERNEL_BUILDER(Name("PopulationDeltaConv2D")        \
                              .Device(DEVICE_CPU)              \
                              .TypeConstraint<T>("T")          \
                              .TypeConstraint<TX>("TX"),       \
                          PopulationDeltaConv2DOp<T, TX>);
TFRL_REGISTER(float, float)
TFRL_REGISTER(float, uint8)
TFRL_REGISTER(bfloat16, float)
TFRL_REGISTER(bfloat16, uint8)
#undef TFRL_REGISTER

}  // namespace
}  // namespace tensorflow
