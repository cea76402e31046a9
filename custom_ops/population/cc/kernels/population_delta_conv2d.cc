// CPU kernel of PopulationDeltaConv2D (population_delta_conv2d_ops.cc): one
// step of incremental inference of one population convolution or dense layer
// (the row machinery it shares with PopulationDeltaNet is in
// population_delta_row.h). Built only with TFRL_BUILD_DELTA_CONV2D=1:
// production runs PopulationDeltaNet, which chains these layers in one op
// with bitwise the same results; benchmarks/delta_layers.py compares the two
// on the same work.

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
#include "population_delta_op.h"
#include "population_delta_row.h"
#include "population_isa.h"
#include "population_rows.h"
#include "population_simd.h"

namespace tfrl {
namespace population {
namespace {

// One row that is not fresh: its changes by position, then each reached
// output from the changes in its window, so that the result depends only on
// the row's own inputs.
template <int W, typename TX, typename TW>
TFRL_INLINE void DeltaRowImpl(const DeltaGeometry& g, const DeltaRow<TX, TW>& r,
                              DeltaScratch* s) {
  if (r.fresh) return FreshRowImpl<W>(g, r, s->window.get());
  CollectRow(g, r, s);
  Change* window = s->window.get();
  for (int64_t t = 0; t < s->num_touched; ++t) {
    const int32_t o = s->touched_list[t];
    AccumulateWindow<W>(r.acc + o * g.n, window, WindowOf(g, *s, o, window), r.w, g);
    RecomputeIfNotFinite<W>(g, r, o, window);
  }
  ResetScratch(s);
}

template <int W, typename TX, typename TW>
TFRL_INLINE void DenseRunImpl(const DeltaGeometry& g, const DeltaRow<TX, TW>* rows, int count,
                              DeltaScratch* s, Change* const* windows) {
  int64_t size[kRunRows];
  for (int r = 0; r < count; ++r) {
    CollectRow(g, rows[r], s);
    size[r] = s->num_touched > 0 ? WindowOf(g, *s, 0, windows[r]) : 0;
    ResetScratch(s);
  }
  SumDenseRun<W>(g, rows, count, windows, size);
  for (int r = 0; r < count; ++r)
    if (size[r] > 0) RecomputeIfNotFinite<W>(g, rows[r], 0, s->window.get());
}

template <int W, typename TX, typename TW>
TFRL_INLINE void DeltaRunImpl(const DeltaGeometry& g, const DeltaRow<TX, TW>* rows, int count,
                              DeltaScratch* s, Change* const* windows) {
  if (g.out_h * g.out_w == 1 && !rows[0].fresh)
    return DenseRunImpl<W>(g, rows, count, s, windows);
  for (int r = 0; r < count; ++r) DeltaRowImpl<W>(g, rows[r], s);
}

// DeltaRunImpl for the ISA builds.
struct DeltaRunKernel {
  template <int W, typename TX, typename TW>
  static TFRL_INLINE void Run(const DeltaGeometry& g, const DeltaRow<TX, TW>* rows, int count,
                              DeltaScratch* s, Change* const* windows) {
    DeltaRunImpl<W>(g, rows, count, s, windows);
  }
};

namespace errors = tensorflow::errors;

// One run of the per-layer op's rows (a dense layer's rows of one network
// summed together, else each row alone).
template <typename TX, typename TW>
using DeltaRunFn = void (*)(const DeltaGeometry&, const DeltaRow<TX, TW>*, int, DeltaScratch*,
                            Change* const*);

template <typename T, typename TX>
class PopulationDeltaConv2DOp : public tensorflow::OpKernel {
  typedef typename Storage<T>::type TW;

 public:
  explicit PopulationDeltaConv2DOp(tensorflow::OpKernelConstruction* ctx) : OpKernel(ctx) {
    OP_REQUIRES_OK(ctx, PickBuild<DeltaRunKernel>(&run_fn_, &isa_));
    OP_REQUIRES_OK(ctx, ctx->GetAttr("kernel_size", &kernel_size_));
    OP_REQUIRES_OK(ctx, ctx->GetAttr("stride", &stride_));
    OP_REQUIRES_OK(ctx, ctx->GetAttr("input_scale", &input_scale_));
    OP_REQUIRES_OK(ctx, ctx->GetAttr("input_relu", &input_relu_));
    OP_REQUIRES_OK(ctx, CheckConvAttrs(kernel_size_, stride_));
  }

  void Compute(tensorflow::OpKernelContext* ctx) override {
    const tensorflow::Tensor& x = ctx->input(0);
    const tensorflow::Tensor& x_prev = ctx->input(1);
    const tensorflow::Tensor& acc_prev = ctx->input(2);
    const tensorflow::Tensor& w = ctx->input(3);
    const tensorflow::Tensor& index = ctx->input(4);
    const tensorflow::Tensor& fresh = ctx->input(5);
    const tensorflow::Tensor& input_bias = ctx->input(6);
    OP_REQUIRES_OK(ctx, CheckStepInputs(x, "x", x_prev, "x_prev", index, fresh));
    OP_REQUIRES_OK(ctx, CheckRank(w, 3, "w", "[P, K, N]"));
    const int64_t batch = x.dim_size(0);
    DeltaGeometry g{x.dim_size(1), x.dim_size(2), x.dim_size(3), kernel_size_, stride_,
                    0, 0, w.dim_size(2), input_scale_, input_relu_, nullptr, nullptr};
    const int64_t pop = w.dim_size(0);
    OP_REQUIRES_OK(ctx, CheckConvInput(g.h, g.w, g.ks));
    int64_t k;
    OP_REQUIRES_OK(ctx, KernelRows(g.ks, g.c, &k));
    OP_REQUIRES_OK(ctx, CheckConvKernel(x, w, g.ks, k));
    g.out_h = (g.h - g.ks) / g.stride + 1;
    g.out_w = (g.w - g.ks) / g.stride + 1;
    tensorflow::TensorShape out_shape;
    OP_REQUIRES_OK(ctx, OutputShape({batch, g.out_h, g.out_w, g.n}, "acc", &out_shape));
    OP_REQUIRES(ctx, acc_prev.shape() == out_shape,
                errors::InvalidArgument("acc_prev must be the output's shape ",
                                                    out_shape.DebugString(), ", got ",
                                                    acc_prev.shape().DebugString()));
    const bool no_bias = input_bias.shape() == tensorflow::TensorShape({0, 0});
    OP_REQUIRES(ctx, no_bias || (input_bias.dims() == 2 && input_bias.dim_size(0) == pop &&
                                 input_bias.dim_size(1) == g.c),
                errors::InvalidArgument(
                    "input_bias must be [P, C] = [", pop, ", ", g.c,
                    "], or [0, 0] for none, got shape ", input_bias.shape().DebugString()));
    const bool has_bias = input_bias.NumElements() > 0;
    OP_REQUIRES_OK(ctx, CheckIndexRange(index, pop, "w.shape[0]"));
    const auto idx = index.flat<int32_t>();
    tensorflow::Tensor* acc = nullptr;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(0, out_shape, &acc));
    if (acc->NumElements() == 0) return;
    CountCall(isa_);
    const int64_t image = g.h * g.w * g.c, out_size = g.out_h * g.out_w * g.n;
    const TX* xd = x.flat<TX>().data();
    const TX* pd = x_prev.flat<TX>().data();
    const float* ad = acc_prev.flat<float>().data();
    float* od = acc->flat<float>().data();
    const auto fr = fresh.flat<bool>();
    // A row's output starts from zero when fresh, else from its last one.
    auto start_row = [&](int64_t b) {
      float* out = od + b * out_size;
      if (fr(b)) {
        std::memset(out, 0, sizeof(float) * out_size);
      } else {
        std::memcpy(out, ad + b * out_size, sizeof(float) * out_size);
      }
      return out;
    };
    if (k == 0) {  // no input channels: nothing changes (x may be [B, 2^40, 1, 0])
      for (int64_t b = 0; b < batch; ++b) start_row(b);
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
    const RowRuns runs = NetworkRuns(batch, idx, fr, /*join=*/dense, kRunRows);
    auto shard = [&](int64_t first_run, int64_t last_run) {
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
        const int64_t* run_rows = runs.rows(run);
        const int64_t p = idx(run_rows[0]);
        if (bd != nullptr && p != bias_of) {
          for (int64_t e = 0; e < g.w * g.c; ++e) row_bias[e] = bd[p * g.c + e % g.c];
          bias_of = p;
        }
        const int count = runs.size(run);
        for (int r = 0; r < count; ++r) {
          const int64_t b = run_rows[r];
          rows[r] = {xd + b * image, pd + b * image, start_row(b), wd + p * k * g.n,
                     row_bias.data(), fr(b)};
        }
        run_fn_(g, rows, count, &scratch, windows);
      }
    };
    // A changed row costs a small part of its full convolution (a fresh one
    // all of it).
    ParallelOverRuns(ctx, runs, std::max<int64_t>(1, out_size * k / 16), shard);
  }

 private:
  DeltaRunFn<TX, TW> run_fn_ = nullptr;
  Isa isa_ = Isa::kBaseline;
  int kernel_size_ = 1;
  int stride_ = 1;
  float input_scale_ = 1.0f;
  bool input_relu_ = false;
};

TFRL_REGISTER_DELTA_OP("PopulationDeltaConv2D", PopulationDeltaConv2DOp)

}  // namespace
}  // namespace population
}  // namespace tfrl
