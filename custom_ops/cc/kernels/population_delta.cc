// CPU kernel of PopulationDeltaConv2D (see population_ops.cc): one step of
// incremental inference of a population convolution or dense layer.
//
// A convolution is linear in its input, so this step's output is the last
// step's output plus the convolution of the input's change. Consecutive Atari
// frames differ in a few hundred of 28,224 values (the ball and the paddles
// move, the background does not), and each changed value touches at most
// ceil(ks / stride)^2 outputs, so a row costs a scan for the changed values
// (whole unchanged image rows are skipped with one memcmp) plus one short
// axpy of a kernel row per (changed value, covered output). The layers above
// see the change thinned by the ReLUs: a few percent of the first
// convolution's outputs and under a fifth of the second's (Pong, random
// networks), which is what makes the dense layer's input sparse as well.
//
// Rows are grouped by network (the rows of one network read the same kernel
// rows) and the groups run on the intra-op threads. Each output element is
// accumulated in a fixed order (input row, column, channel ascending), so
// results depend only on the row's own inputs.

#pragma GCC optimize("fp-contract=fast")

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "tensorflow/core/framework/op_kernel.h"
#include "tensorflow/core/framework/tensor.h"
#include "tensorflow/core/framework/tensor_shape.h"
#include "tensorflow/core/platform/threadpool.h"
#include "population_simd.h"

namespace tensorflow {
namespace {

using population_simd::LoadU;
using population_simd::LoadW;
using population_simd::PickByIsa;
using population_simd::Storage;
using population_simd::StoreU;
using population_simd::Vec;
using population_simd::WeightData;
using population_simd::Widen;

struct DeltaGeometry {
  int64_t h, w, c;        // input [H, W, C]
  int64_t ks, stride;
  int64_t out_h, out_w, n;  // output [OH, OW, N]
  float scale;
  bool relu;
  // Input column x is covered by output columns [ox_lo[x], ox_hi[x]]
  // (tables, so that the per-element loop divides nothing).
  const int64_t* ox_lo;
  const int64_t* ox_hi;
};

template <typename TX, typename TW>
struct DeltaRow {
  const TX* x;
  const TX* x_prev;
  const float* acc_prev;
  float* acc;
  const TW* w;            // [ks * ks * C, N] of the row's network
  const float* row_bias;  // [W * C]: its input bias along an image row (or zeros)
  bool fresh;
};

// y[0:n] += d * w[0:n].
template <int W, typename TW>
TFRL_INLINE void Axpy(float* y, const TW* w, float d, int64_t n) {
  typedef typename Vec<W>::type V;
  int64_t j = 0;
  for (; j + W <= n; j += W) StoreU(y + j, LoadU<V>(y + j) + d * LoadW<W>(w + j));
  for (; j < n; ++j) y[j] += d * Widen(w[j]);
}

// The outputs [lo, hi] along one axis whose window covers input position i.
TFRL_INLINE void Covering(int64_t i, int64_t ks, int64_t stride, int64_t out,
                          int64_t* lo, int64_t* hi) {
  const int64_t first = i - ks + 1;
  *lo = first <= 0 ? 0 : (first + stride - 1) / stride;
  *hi = std::min(out - 1, i / stride);
}

// Whether the 32 bytes at a and b are equal (four 8-byte compares; a
// memcmp call per span would cost more than the compare).
constexpr int64_t kSpanBytes = 32;
TFRL_INLINE bool SameSpan(const unsigned char* a, const unsigned char* b) {
  uint64_t diff = 0;
  for (int i = 0; i < 4; ++i) {
    uint64_t u, v;
    std::memcpy(&u, a + 8 * i, 8);
    std::memcpy(&v, b + 8 * i, 8);
    diff |= u ^ v;
  }
  return diff == 0;
}

// Adds d times the kernel rows of input (y, x, ch) to the outputs whose
// window covers it (rows oy_lo..oy_hi).
template <int W, typename TX, typename TW>
TFRL_INLINE void Scatter(const DeltaGeometry& g, const DeltaRow<TX, TW>& r, int64_t y,
                         int64_t oy_lo, int64_t oy_hi, int64_t x, int64_t ch, float d) {
  for (int64_t oy = oy_lo; oy <= oy_hi; ++oy) {
    const int64_t ky = y - oy * g.stride;
    for (int64_t ox = g.ox_lo[x]; ox <= g.ox_hi[x]; ++ox) {
      const int64_t kx = x - ox * g.stride;
      Axpy<W>(r.acc + (oy * g.out_w + ox) * g.n,
              r.w + ((ky * g.ks + kx) * g.c + ch) * g.n, d, g.n);
    }
  }
}

// Elements [begin, end) (at most one span) of image row y of a row that is
// not fresh: their change f(x) - f(x_prev) scattered into the row's
// outputs. The changes are computed without branches, a span at a time.
template <int W, typename TX, typename TW>
TFRL_INLINE void ScatterChanges(const DeltaGeometry& g, const DeltaRow<TX, TW>& r,
                                int64_t y, int64_t oy_lo, int64_t oy_hi, int64_t begin,
                                int64_t end) {
  const int64_t base = y * g.w * g.c;
  const TX* xs = r.x + base + begin;
  const TX* ps = r.x_prev + base + begin;
  const float* bs = r.row_bias + begin;
  const int64_t len = end - begin;
  float d[kSpanBytes];
  if (g.relu) {  // NaN stays NaN, as tf.nn.relu
    for (int64_t i = 0; i < len; ++i) {
      float u = static_cast<float>(xs[i]) * g.scale + bs[i];
      float v = static_cast<float>(ps[i]) * g.scale + bs[i];
      u = u < 0.f ? 0.f : u;
      v = v < 0.f ? 0.f : v;
      d[i] = u - v;
    }
  } else {
    for (int64_t i = 0; i < len; ++i)
      d[i] = (static_cast<float>(xs[i]) * g.scale + bs[i]) -
             (static_cast<float>(ps[i]) * g.scale + bs[i]);
  }
  int64_t x = begin / g.c, ch = begin - x * g.c;
  for (int64_t i = 0; i < len; ++i) {
    if (d[i] != 0.f) Scatter<W>(g, r, y, oy_lo, oy_hi, x, ch, d[i]);  // 0: unchanged
    if (++ch == g.c) {
      ch = 0;
      ++x;
    }
  }
}

// A fresh row in full, output by output: each output's N sums stay in L1
// while its window is read (the same additions, in the same order, as
// scattering every input value).
template <int W, typename TX, typename TW>
TFRL_INLINE void FreshRow(const DeltaGeometry& g, const DeltaRow<TX, TW>& r) {
  const int64_t seg = g.ks * g.c;  // one kernel row: ks columns of C channels
  for (int64_t oy = 0; oy < g.out_h; ++oy) {
    for (int64_t ox = 0; ox < g.out_w; ++ox) {
      float* out = r.acc + (oy * g.out_w + ox) * g.n;
      const float* bs = r.row_bias + ox * g.stride * g.c;
      for (int64_t ky = 0; ky < g.ks; ++ky) {
        const TX* src = r.x + ((oy * g.stride + ky) * g.w + ox * g.stride) * g.c;
        const TW* wr = r.w + ky * seg * g.n;
        for (int64_t t = 0; t < seg; ++t) {
          float v = static_cast<float>(src[t]) * g.scale + bs[t];
          if (g.relu) v = v < 0.f ? 0.f : v;
          if (v != 0.f) Axpy<W>(out, wr + t * g.n, v, g.n);
        }
      }
    }
  }
}

// Up to kGroupRows rows of one network, in lockstep: span after span of
// each image row, every row's changed elements in turn, so that the kernel
// rows a span touches, once read for one row, are in L1 for the group's
// other rows (whole GA runs on the AMD VM did not move measurably with it).
// Each row still adds its changes in (y, x, channel) order.
constexpr int kGroupRows = 8;

template <int W, typename TX, typename TW>
TFRL_INLINE void DeltaGroupImpl(const DeltaGeometry& g, const DeltaRow<TX, TW>* rows,
                                int count) {
  static_assert(kSpanBytes % sizeof(TX) == 0, "spans hold whole elements");
  const int64_t out_size = g.out_h * g.out_w * g.n;
  for (int i = 0; i < count; ++i) {
    if (rows[i].fresh) {
      std::memset(rows[i].acc, 0, sizeof(float) * out_size);
      FreshRow<W>(g, rows[i]);
    } else {
      std::memcpy(rows[i].acc, rows[i].acc_prev, sizeof(float) * out_size);
    }
  }
  const int64_t row_len = g.w * g.c;
  const int64_t row_bytes = sizeof(TX) * row_len;
  for (int64_t y = 0; y < g.h; ++y) {
    int64_t oy_lo, oy_hi;
    Covering(y, g.ks, g.stride, g.out_h, &oy_lo, &oy_hi);
    if (oy_lo > oy_hi) continue;  // a row no window reaches
    bool live[kGroupRows];
    bool any = false;
    for (int i = 0; i < count; ++i) {
      const DeltaRow<TX, TW>& r = rows[i];
      live[i] = !r.fresh &&
                std::memcmp(r.x + y * row_len, r.x_prev + y * row_len, row_bytes) != 0;
      any = any || live[i];
    }
    if (!any) continue;
    // Only spans that differ are looked at element by element.
    for (int64_t off = 0; off < row_bytes; off += kSpanBytes) {
      const int64_t len = std::min(kSpanBytes, row_bytes - off);
      for (int i = 0; i < count; ++i) {
        if (!live[i]) continue;
        const DeltaRow<TX, TW>& r = rows[i];
        const unsigned char* xb = reinterpret_cast<const unsigned char*>(r.x + y * row_len);
        const unsigned char* pb = reinterpret_cast<const unsigned char*>(r.x_prev + y * row_len);
        if (len == kSpanBytes ? SameSpan(xb + off, pb + off)
                              : std::memcmp(xb + off, pb + off, len) == 0)
          continue;
        ScatterChanges<W>(g, r, y, oy_lo, oy_hi, off / sizeof(TX), (off + len) / sizeof(TX));
      }
    }
  }
}

#if TFRL_X86
template <typename TX, typename TW>
__attribute__((target("avx512f,avx512dq,avx512bw,avx2,fma"))) void DeltaGroupAvx512(
    const DeltaGeometry& g, const DeltaRow<TX, TW>* rows, int count) {
  DeltaGroupImpl<16>(g, rows, count);
}
template <typename TX, typename TW>
__attribute__((target("avx2,fma"))) void DeltaGroupAvx2(const DeltaGeometry& g,
                                                       const DeltaRow<TX, TW>* rows,
                                                       int count) {
  DeltaGroupImpl<8>(g, rows, count);
}
#endif
template <typename TX, typename TW>
void DeltaGroupBaseline(const DeltaGeometry& g, const DeltaRow<TX, TW>* rows, int count) {
  DeltaGroupImpl<4>(g, rows, count);
}

template <typename TX, typename TW>
using DeltaGroupFn = void (*)(const DeltaGeometry&, const DeltaRow<TX, TW>*, int);

template <typename TX, typename TW>
DeltaGroupFn<TX, TW> PickDeltaGroup() {
#if TFRL_X86
  return PickByIsa<DeltaGroupFn<TX, TW>>(&DeltaGroupAvx512<TX, TW>, &DeltaGroupAvx2<TX, TW>,
                                         &DeltaGroupBaseline<TX, TW>);
#else
  return &DeltaGroupBaseline<TX, TW>;
#endif
}

template <typename T, typename TX>
class PopulationDeltaConv2DOp : public OpKernel {
  typedef typename Storage<T>::type TW;

 public:
  explicit PopulationDeltaConv2DOp(OpKernelConstruction* ctx)
      : OpKernel(ctx), group_fn_(PickDeltaGroup<TX, TW>()) {
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
    const int64_t pop = w.dim_size(0), k = g.ks * g.ks * g.c;
    OP_REQUIRES(ctx, g.h >= g.ks && g.w >= g.ks,
                errors::InvalidArgument("x spatial size ", g.h, "x", g.w,
                                        " is smaller than kernel_size ", g.ks));
    OP_REQUIRES(ctx, w.dim_size(1) == k,
                errors::InvalidArgument(
                    "w.shape[1] must be kernel_size^2 * C = ", k, ": got w shape ",
                    w.shape().DebugString(), " for x shape ", x.shape().DebugString(),
                    " and kernel_size ", g.ks));
    g.out_h = (g.h - g.ks) / g.stride + 1;
    g.out_w = (g.w - g.ks) / g.stride + 1;
    const TensorShape out_shape({batch, g.out_h, g.out_w, g.n});
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
    const bool has_bias = input_bias.NumElements() > 0;
    OP_REQUIRES(ctx, !has_bias || (input_bias.dims() == 2 && input_bias.dim_size(0) == pop &&
                                   input_bias.dim_size(1) == g.c),
                errors::InvalidArgument("input_bias must be [P, C] = [", pop, ", ", g.c,
                                        "] or empty, got shape ",
                                        input_bias.shape().DebugString()));
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
    const int64_t image = g.h * g.w * g.c, out_size = g.out_h * g.out_w * g.n;
    const TX* xd = x.flat<TX>().data();
    const TX* pd = x_prev.flat<TX>().data();
    const float* ad = acc_prev.flat<float>().data();
    float* od = acc->flat<float>().data();
    const TW* wd = WeightData<T>(w);
    std::vector<int64_t> ox_lo(g.w), ox_hi(g.w);
    for (int64_t x = 0; x < g.w; ++x) Covering(x, g.ks, g.stride, g.out_w, &ox_lo[x], &ox_hi[x]);
    g.ox_lo = ox_lo.data();
    g.ox_hi = ox_hi.data();
    const float* bd = has_bias ? input_bias.flat<float>().data() : nullptr;
    const auto fr = fresh.flat<bool>();
    // Rows grouped by network (stable in b), cut into groups of at most
    // kGroupRows: a group shares its kernel reads.
    std::vector<int64_t> order(batch);
    for (int64_t b = 0; b < batch; ++b) order[b] = b;
    std::stable_sort(order.begin(), order.end(),
                     [&](int64_t a, int64_t b) { return idx(a) < idx(b); });
    std::vector<int64_t> group_start;
    for (int64_t i = 0; i < batch; ++i) {
      if (i == 0 || idx(order[i]) != idx(order[i - 1]) ||
          i - group_start.back() == kGroupRows)
        group_start.push_back(i);
    }
    group_start.push_back(batch);
    auto work = [&](int64_t first, int64_t last) {
      DeltaRow<TX, TW> rows[kGroupRows];
      std::vector<float> row_bias(g.w * g.c, 0.f);
      for (int64_t u = first; u < last; ++u) {
        const int64_t begin = group_start[u], count = group_start[u + 1] - begin;
        const int64_t p = idx(order[begin]);  // the group's network
        if (bd != nullptr) {
          for (int64_t e = 0; e < g.w * g.c; ++e) row_bias[e] = bd[p * g.c + e % g.c];
        }
        for (int64_t i = 0; i < count; ++i) {
          const int64_t b = order[begin + i];
          rows[i] = {xd + b * image, pd + b * image, ad + b * out_size, od + b * out_size,
                     wd + p * k * g.n, row_bias.data(), fr(b)};
        }
        group_fn_(g, rows, static_cast<int>(count));
      }
    };
    // A changed row costs a small part of its full convolution (a fresh one
    // all of it); either is enough for the pool to give each group a shard.
    const int64_t cost = std::max<int64_t>(1, kGroupRows * out_size * k / 16);
    ctx->device()->tensorflow_cpu_worker_threads()->workers->ParallelFor(
        static_cast<int64_t>(group_start.size()) - 1, cost, work);
  }

 private:
  const DeltaGroupFn<TX, TW> group_fn_;
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
