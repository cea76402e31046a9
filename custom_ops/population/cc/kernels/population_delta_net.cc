// CPU kernel of PopulationDeltaNet (see population_ops.cc): one step of
// incremental inference of a whole population network, the per-layer
// PopulationDeltaConv2D chained in one op, with the same results bit for
// bit (population_delta_row.h has the row machinery both use).
//
// What the chain costs and this op does not:
//  * a copy of every layer's last output into its new one (86 KB per row and
//    step for the Nature net): here acc_prev is updated in place when
//    TensorFlow hands its buffer over (its only reader is this op);
//  * a scan of every layer's whole input for changes: here layer i + 1's
//    input changes are read off the outputs layer i updated, comparing each
//    one's old and new values through the bias and ReLU;
//  * five ops per step, each a pass over the thread pool: here one.
// Rows run in runs of one network (none fresh), layer by layer, so that a
// dense layer sums a run's rows together as the per-layer op does.

#pragma GCC optimize("fp-contract=fast")

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>
#include <type_traits>
#include <vector>

#include "tensorflow/core/framework/op_kernel.h"
#include "tensorflow/core/framework/tensor.h"
#include "tensorflow/core/framework/tensor_shape.h"
#include "tensorflow/core/platform/mutex.h"
#include "tensorflow/core/platform/threadpool.h"
#include "population_delta_op.h"
#include "population_delta_row.h"
#include "population_isa.h"
#include "population_rows.h"
#include "population_simd.h"

namespace tfrl {
namespace population {
namespace {

// One layer of this call: its geometry (input = obs or the layer below's
// output) and tensors.
template <typename TW>
struct NetLayer {
  DeltaGeometry g;
  std::vector<int64_t> ox_lo, ox_hi;
  int64_t in_size = 0, out_size = 0, k = 0;  // per row
  const float* acc_prev = nullptr;
  float* acc = nullptr;
  const TW* w = nullptr;      // [P, K, N], or [P, Q * in_blocks, 2b] (circulant)
  int64_t w_size = 0;         // per network
  const float* bias = nullptr;  // [P, N]: added to this layer's output
  // No input channels (its output is zero) or no output channels: nothing
  // to compute or to pass up, and the layer's sizes may be anything (an
  // empty input [B, 2^40, 1, 0] is valid), so nothing is sized by them.
  bool empty = false;
};

template <typename TX, typename TW>
struct NetCall {
  std::vector<NetLayer<TW>> layers;
  const TX* obs = nullptr;
  const TX* obs_prev = nullptr;
};

// A shard's scratch: each layer's change lists for each row of a run, the
// dense runs' windows, and the old values of the outputs being updated.
struct NetScratch {
  template <typename TX, typename TW>
  explicit NetScratch(const NetCall<TX, TW>& call) : shape(ShapeKey(call)) {
    int64_t max_k = 0, max_n = 0;
    const DeltaGeometry none{0, 0, 0, 1, 1, 0, 0, 0, 1.f, false, nullptr, nullptr};
    for (const auto& l : call.layers) {
      std::vector<std::unique_ptr<DeltaScratch>> per_row;
      for (int r = 0; r < kRunRows; ++r)
        per_row.emplace_back(new DeltaScratch(l.empty ? none : l.g));
      scratch.push_back(std::move(per_row));
      row_bias.emplace_back(l.empty ? 0 : l.g.w * l.g.c, 0.f);
      max_k = std::max(max_k, l.k);
      max_n = std::max(max_n, l.g.n);
    }
    for (int r = 0; r < kRunRows; ++r) {
      windows_store.emplace_back(new Change[max_k]);
      windows[r] = windows_store.back().get();
      old_store.emplace_back(new float[max_n]);
      old[r] = old_store.back().get();
    }
  }
  // The layers' geometry it was made for.
  template <typename TX, typename TW>
  static std::vector<int64_t> ShapeKey(const NetCall<TX, TW>& call) {
    std::vector<int64_t> key;
    for (const auto& l : call.layers)
      key.insert(key.end(), {l.g.h, l.g.w, l.g.c, l.g.ks, l.g.stride, l.g.n});
    return key;
  }
  const std::vector<int64_t> shape;
  std::vector<std::vector<std::unique_ptr<DeltaScratch>>> scratch;  // [layer][row]
  std::vector<std::vector<float>> row_bias;  // [layer]: its input bias along an image row
  int64_t bias_of = -1;
  std::vector<std::unique_ptr<Change[]>> windows_store;
  Change* windows[kRunRows] = {};
  std::vector<std::unique_ptr<float[]>> old_store;
  float* old[kRunRows] = {};
};

// Layer i's output o went from old[0:N] to now[0:N]: records the changes of
// the next layer's input at position o (through layer i's bias and ReLU,
// computed as the per-layer op computes f(x) - f(x_prev)) and marks the next
// layer's outputs they reach. The changes are computed W channels at a time
// (a scalar loop with a branch for the ReLU was 8 % of the op) and listed
// without branches; a block of W unchanged channels is skipped whole.
template <int W>
TFRL_INLINE void EmitChanges(const DeltaGeometry& next, int64_t o, const float* old,
                             const float* now, const float* bias, DeltaScratch* s) {
  typedef typename Vec<W>::type VF;
  const int64_t y = o / next.w, x = o - y * next.w;
  int64_t oy_lo, oy_hi;
  Covering(y, next.ks, next.stride, next.out_h, &oy_lo, &oy_hi);
  if (oy_lo > oy_hi) return;  // a position no window of the next layer reaches
  const int64_t first = s->num_changes;
  Change* changes = s->changes.get();
  int64_t end = first;
  const VF zero = VF{};
  int64_t ch = 0;
  for (; ch + W <= next.c; ch += W) {
    const VF b = LoadU<VF>(bias + ch);
    VF u = LoadU<VF>(now + ch) * next.scale + b;
    VF v = LoadU<VF>(old + ch) * next.scale + b;
    if (next.relu) {  // NaN stays NaN, as tf.nn.relu
      u = u < zero ? zero : u;
      v = v < zero ? zero : v;
    }
    const VF d = u - v;
    float lanes[W];
    StoreU(lanes, d);
    bool any = false;
    for (int j = 0; j < W; ++j) any |= lanes[j] != 0.f;
    if (!any) continue;
    for (int j = 0; j < W; ++j) {
      changes[end] = {lanes[j], static_cast<int32_t>(ch + j)};
      end += lanes[j] != 0.f;
    }
  }
  for (; ch < next.c; ++ch) {
    float u = now[ch] * next.scale + bias[ch];
    float v = old[ch] * next.scale + bias[ch];
    if (next.relu) {
      u = u < 0.f ? 0.f : u;
      v = v < 0.f ? 0.f : v;
    }
    const float d = u - v;
    changes[end] = {d, static_cast<int32_t>(ch)};
    end += d != 0.f;
  }
  s->num_changes = end;
  const int64_t count = end - first;
  if (count == 0) return;
  s->pos_first[o] = static_cast<int32_t>(first);
  s->pos_count[o] = static_cast<int32_t>(count);
  s->changed_pos[s->num_changed_pos++] = static_cast<int32_t>(o);
  MarkTouched(next, oy_lo, oy_hi, x, s);
  if (!s->row_changed[y]) {
    s->row_changed[y] = 1;
    s->changed_rows[s->num_changed_rows++] = static_cast<int32_t>(y);
  }
}

// Row b of layer 0 (input obs) or of the layer above `below` (input its
// acc), as the per-layer op sees it, with output `acc` and kernel `w`.
template <typename TX, typename TW>
TFRL_INLINE DeltaRow<TX, TW> InputRow(const NetCall<TX, TW>& call, const NetLayer<TW>& first,
                                      int64_t b, float* acc, const TW* w,
                                      const float* row_bias) {
  return {call.obs + b * first.in_size, nullptr, acc, w, row_bias, false};
}
template <typename TW>
TFRL_INLINE DeltaRow<float, TW> InputRow(const NetLayer<TW>& below, int64_t b, float* acc,
                                         const TW* w, const float* row_bias) {
  return {below.acc + b * below.out_size, nullptr, acc, w, row_bias, false};
}

// One run: `count` rows (batch indices `rows`) of network p, all fresh
// (then count is 1) or none.
template <int W, typename TX, typename TW>
TFRL_INLINE void NetRunImpl(const NetCall<TX, TW>& call, int64_t p, const int64_t* rows,
                            int count, bool fresh, NetScratch* ns) {
  const int num_layers = static_cast<int>(call.layers.size());
  if (ns->bias_of != p) {  // each layer's input bias along an image row
    for (int i = 1; i < num_layers; ++i) {
      const auto& l = call.layers[i];
      if (l.empty) continue;
      const float* b = call.layers[i - 1].bias + p * l.g.c;
      for (int64_t e = 0; e < l.g.w * l.g.c; ++e) ns->row_bias[i][e] = b[e % l.g.c];
    }
    ns->bias_of = p;
  }
  for (int i = 0; i < num_layers; ++i) {
    const NetLayer<TW>& l = call.layers[i];
    const DeltaGeometry& g = l.g;
    const TW* w = l.w + p * l.w_size;
    const NetLayer<TW>* next = i + 1 < num_layers ? &call.layers[i + 1] : nullptr;
    if (next != nullptr && next->empty) next = nullptr;  // no changes to pass up
    const float* out_bias = l.bias + p * g.n;
    if (fresh) {
      float* out = l.acc + rows[0] * l.out_size;
      std::memset(out, 0, sizeof(float) * l.out_size);
      if (l.empty) continue;
      if (i == 0) {
        FreshRowImpl<W>(g, DeltaRow<TX, TW>{call.obs + rows[0] * l.in_size, nullptr, out, w,
                                            ns->row_bias[0].data(), true},
                        ns->windows[0]);
      } else {
        const NetLayer<TW>& below = call.layers[i - 1];
        FreshRowImpl<W>(g, DeltaRow<float, TW>{below.acc + rows[0] * below.out_size, nullptr,
                                               out, w, ns->row_bias[i].data(), true},
                        ns->windows[0]);
      }
      continue;
    }
    if (l.empty) continue;  // rows not fresh keep acc_prev (zero, or nothing)
    if (i == 0) {
      for (int r = 0; r < count; ++r) {
        CollectRow(g, DeltaRow<TX, TW>{call.obs + rows[r] * l.in_size,
                                       call.obs_prev + rows[r] * l.in_size, nullptr, w,
                                       ns->row_bias[0].data(), false},
                   ns->scratch[0][r].get());
      }
    }
    if (g.out_h * g.out_w == 1) {  // dense: the run's rows summed together
      int64_t size[kRunRows];
      DeltaRow<float, TW> dense_rows[kRunRows];
      for (int r = 0; r < count; ++r) {
        DeltaScratch* s = ns->scratch[i][r].get();
        size[r] = s->num_touched > 0 ? WindowOf(g, *s, 0, ns->windows[r]) : 0;
        ResetScratch(s);
        float* out = l.acc + rows[r] * l.out_size;
        std::memcpy(ns->old[r], out, sizeof(float) * g.n);
        dense_rows[r] = {nullptr, nullptr, out, w, nullptr, false};
      }
      SumDenseRun<W>(g, dense_rows, count, ns->windows, size);
      for (int r = 0; r < count; ++r) {  // as the per-layer op does
        if (size[r] == 0) continue;
        if (i == 0) {
          RecomputeIfNotFinite<W>(g, InputRow(call, l, rows[r], dense_rows[r].acc, w,
                                              ns->row_bias[0].data()),
                                  0, ns->windows[r]);
        } else {
          RecomputeIfNotFinite<W>(g, InputRow(call.layers[i - 1], rows[r], dense_rows[r].acc,
                                              w, ns->row_bias[i].data()),
                                  0, ns->windows[r]);
        }
      }
      if (next != nullptr) {
        for (int r = 0; r < count; ++r) {
          if (size[r] > 0)
            EmitChanges<W>(next->g, 0, ns->old[r], dense_rows[r].acc, out_bias,
                           ns->scratch[i + 1][r].get());
        }
      }
      continue;
    }
    for (int r = 0; r < count; ++r) {
      DeltaScratch* s = ns->scratch[i][r].get();
      float* acc = l.acc + rows[r] * l.out_size;
      Change* window = ns->windows[0];
      for (int64_t t = 0; t < s->num_touched; ++t) {
        const int32_t o = s->touched_list[t];
        float* out = acc + o * g.n;
        if (next != nullptr) std::memcpy(ns->old[0], out, sizeof(float) * g.n);
        AccumulateWindow<W>(out, window, WindowOf(g, *s, o, window), w, g);
        if (i == 0) {
          RecomputeIfNotFinite<W>(g, InputRow(call, l, rows[r], acc, w, ns->row_bias[0].data()),
                                  o, window);
        } else {
          RecomputeIfNotFinite<W>(g, InputRow(call.layers[i - 1], rows[r], acc, w,
                                              ns->row_bias[i].data()),
                                  o, window);
        }
        if (next != nullptr)
          EmitChanges<W>(next->g, o, ns->old[0], out, out_bias, ns->scratch[i + 1][r].get());
      }
      ResetScratch(s);
    }
  }
}

// NetRunImpl for the ISA builds.
struct NetRunKernel {
  template <int W, typename TX, typename TW>
  static TFRL_INLINE void Run(const NetCall<TX, TW>& call, int64_t p, const int64_t* rows,
                              int count, bool fresh, NetScratch* ns) {
    NetRunImpl<W>(call, p, rows, count, fresh, ns);
  }
};

template <typename TX, typename TW>
using NetRunFn = void (*)(const NetCall<TX, TW>&, int64_t, const int64_t*, int, bool,
                          NetScratch*);

namespace errors = tensorflow::errors;

template <typename T, typename TX>
class PopulationDeltaNetOp : public tensorflow::OpKernel {
  typedef typename Storage<T>::type TW;

 public:
  explicit PopulationDeltaNetOp(tensorflow::OpKernelConstruction* ctx) : OpKernel(ctx) {
    OP_REQUIRES_OK(ctx, PickBuild<NetRunKernel>(&run_fn_, &isa_));
    OP_REQUIRES_OK(ctx, ctx->GetAttr("L", &num_layers_));
    OP_REQUIRES_OK(ctx, ctx->GetAttr("kernel_sizes", &kernel_sizes_));
    OP_REQUIRES_OK(ctx, ctx->GetAttr("strides", &strides_));
    OP_REQUIRES_OK(ctx, ctx->GetAttr("relus", &relus_));
    OP_REQUIRES_OK(ctx, ctx->GetAttr("input_scale", &input_scale_));
    OP_REQUIRES_OK(ctx, ctx->GetAttr("circulant_blocks", &circulant_blocks_));
    if (circulant_blocks_.empty()) circulant_blocks_.assign(num_layers_, 0);
    OP_REQUIRES(ctx, static_cast<int>(circulant_blocks_.size()) == num_layers_,
                errors::InvalidArgument("circulant_blocks needs L = ", num_layers_,
                                        " values (0: a dense kernel) or none, got ",
                                        circulant_blocks_.size()));
    for (int i = 0; i < num_layers_; ++i) {
      const int32_t b = circulant_blocks_[i];
      // 16 columns of a block are contiguous in the doubled vectors for
      // every build's vector width (16, 8 or 4 floats).
      OP_REQUIRES(ctx, b == 0 || (b > 0 && b % 16 == 0),
                  errors::InvalidArgument("layer ", i, ": a circulant block size must be a "
                                          "positive multiple of 16 (or 0: dense), got ", b));
      OP_REQUIRES(ctx, b == 0 || (std::is_same<T, float>::value),
                  errors::InvalidArgument("layer ", i, ": circulant kernels must be float32"));
    }
    OP_REQUIRES(ctx, static_cast<int>(kernel_sizes_.size()) == num_layers_ &&
                         static_cast<int>(strides_.size()) == num_layers_ &&
                         static_cast<int>(relus_.size()) == num_layers_ - 1,
                errors::InvalidArgument("kernel_sizes and strides need L = ", num_layers_,
                                        " values and relus L - 1, got ", kernel_sizes_.size(),
                                        ", ", strides_.size(), " and ", relus_.size()));
    for (int i = 0; i < num_layers_; ++i) {
      OP_REQUIRES(ctx, kernel_sizes_[i] >= 1 && strides_[i] >= 1,
                  errors::InvalidArgument("layer ", i, ": kernel_size and stride must be >= 1, "
                                          "got ", kernel_sizes_[i], " and ", strides_[i]));
    }
  }

  void Compute(tensorflow::OpKernelContext* ctx) override {
    const int layers = num_layers_;
    const tensorflow::Tensor& obs = ctx->input(0);
    const tensorflow::Tensor& obs_prev = ctx->input(1);
    const tensorflow::Tensor& index = ctx->input(2 + 3 * layers);
    const tensorflow::Tensor& fresh = ctx->input(3 + 3 * layers);
    OP_REQUIRES_OK(ctx, CheckStepInputs(obs, "obs", obs_prev, "obs_prev", index, fresh));
    const int64_t batch = obs.dim_size(0);
    NetCall<TX, TW> call;
    call.layers.resize(layers);
    int64_t h = obs.dim_size(1), w = obs.dim_size(2), c = obs.dim_size(3), pop = -1;
    for (int i = 0; i < layers; ++i) {
      const tensorflow::Tensor& wt = ctx->input(2 + layers + i);
      const tensorflow::Tensor& bias = ctx->input(2 + 2 * layers + i);
      const tensorflow::Tensor& acc_prev = ctx->input(2 + i);
      const int64_t ks = kernel_sizes_[i], stride = strides_[i];
      OP_REQUIRES(ctx, wt.dims() == 3,
                  errors::InvalidArgument("w[", i, "] must be rank 3 [P, K, N], got shape ",
                                          wt.shape().DebugString()));
      OP_REQUIRES(ctx, bias.dims() == 2,
                  errors::InvalidArgument("bias[", i, "] must be rank 2 [P, N], got shape ",
                                          bias.shape().DebugString()));
      if (pop < 0) pop = wt.dim_size(0);
      const int64_t block = circulant_blocks_[i];
      OP_REQUIRES(ctx, h >= ks && w >= ks,
                  errors::InvalidArgument("layer ", i, ": input size ", h, "x", w,
                                          " is smaller than kernel_size ", ks));
      int64_t k;
      OP_REQUIRES_OK(ctx, KernelRows(ks, c, &k));
      const int64_t n = block > 0 ? bias.dim_size(1) : wt.dim_size(2);
      const int64_t in_blocks = block > 0 ? (k + block - 1) / block : 0;
      if (block > 0) {  // [P, Q * in_blocks, 2b]: the vectors, each twice
        const int64_t out_blocks = (n + block - 1) / block;
        OP_REQUIRES(ctx, wt.dim_size(0) == pop && wt.dim_size(1) == out_blocks * in_blocks &&
                             wt.dim_size(2) == 2 * block,
                    errors::InvalidArgument(
                        "w[", i, "] (circulant, block ", block, ") must be [P = ", pop, ", ",
                        out_blocks * in_blocks, ", ", 2 * block, "] for K = ", k, " and N = ",
                        n, " (the bias's), got shape ", wt.shape().DebugString()));
      } else {
        OP_REQUIRES(ctx, wt.dim_size(0) == pop && wt.dim_size(1) == k,
                    errors::InvalidArgument("w[", i, "] must be [P = ", pop, ", ", k,
                                            ", N] (kernel_size^2 * C), got shape ",
                                            wt.shape().DebugString()));
      }
      OP_REQUIRES(ctx, bias.dim_size(0) == pop && bias.dim_size(1) == n,
                  errors::InvalidArgument("bias[", i, "] must be [P, N] = [", pop, ", ", n,
                                          "], got shape ", bias.shape().DebugString()));
      NetLayer<TW>& l = call.layers[i];
      l.g = DeltaGeometry{h, w, c, ks, stride, (h - ks) / stride + 1, (w - ks) / stride + 1,
                          n, i == 0 ? input_scale_ : 1.0f, i > 0 && relus_[i - 1],
                          nullptr, nullptr, block, in_blocks};
      tensorflow::TensorShape out_shape;
      OP_REQUIRES_OK(ctx, OutputShape({batch, l.g.out_h, l.g.out_w, n}, "acc", &out_shape));
      OP_REQUIRES(ctx, acc_prev.shape() == out_shape,
                  errors::InvalidArgument("acc_prev[", i, "] must be ",
                                          out_shape.DebugString(), ", got ",
                                          acc_prev.shape().DebugString()));
      // Per-row sizes from the tensors themselves (no overflow when a
      // layer is empty; a row of an empty batch has no size that matters).
      l.in_size = i > 0 ? call.layers[i - 1].out_size
                        : (batch == 0 ? 0 : obs.NumElements() / batch);
      l.out_size = batch == 0 ? 0 : acc_prev.NumElements() / batch;
      l.k = k;
      l.acc_prev = acc_prev.flat<float>().data();
      l.w = WeightData<T>(wt);
      l.w_size = pop == 0 ? 0 : wt.NumElements() / pop;
      l.bias = bias.flat<float>().data();
      h = l.g.out_h;
      w = l.g.out_w;
      c = n;
    }
    OP_REQUIRES(ctx, h == 1 && w == 1,
                errors::InvalidArgument(
                    "the last layer must be dense (an output of 1x1 positions, the logits): "
                    "got ", h, "x", w, " positions from kernel_size ", kernel_sizes_.back(),
                    " and stride ", strides_.back(), " over its ",
                    call.layers.back().g.h, "x", call.layers.back().g.w, " input"));
    OP_REQUIRES_OK(ctx, CheckIndexRange(index, pop, "w[0].shape[0]"));
    const auto idx = index.flat<int32_t>();
    tensorflow::Tensor* logits = nullptr;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(0, tensorflow::TensorShape({batch, c}), &logits));
    std::vector<bool> in_place(layers);
    for (int i = 0; i < layers; ++i) {
      tensorflow::Tensor* acc = nullptr;
      OP_REQUIRES_OK(ctx, ctx->forward_input_or_allocate_output(
                              {2 + i}, 1 + i, ctx->input(2 + i).shape(), &acc));
      call.layers[i].acc = acc->flat<float>().data();
      in_place[i] = call.layers[i].acc == call.layers[i].acc_prev;
    }
    if (batch == 0) return;
    CountCall(isa_);
    if (std::any_of(circulant_blocks_.begin(), circulant_blocks_.end(),
                    [](int32_t b) { return b > 0; }))
      CountCall(Path::kDeltaCirculant);
    const auto fr = fresh.flat<bool>();
    for (NetLayer<TW>& l : call.layers) {
      l.empty = l.g.c == 0 || l.g.n == 0;
      if (l.empty) continue;
      l.ox_lo.resize(l.g.w);
      l.ox_hi.resize(l.g.w);
      for (int64_t x = 0; x < l.g.w; ++x)
        Covering(x, l.g.ks, l.g.stride, l.g.out_w, &l.ox_lo[x], &l.ox_hi[x]);
      l.g.ox_lo = l.ox_lo.data();
      l.g.ox_hi = l.ox_hi.data();
    }
    call.obs = obs.flat<TX>().data();
    call.obs_prev = obs_prev.flat<TX>().data();
    const RowRuns runs = NetworkRuns(batch, idx, fr, /*join=*/true, kRunRows);
    const std::vector<int64_t> shape = NetScratch::ShapeKey(call);
    auto shard = [&](int64_t first_run, int64_t last_run) {
      std::unique_ptr<NetScratch> taken = TakeScratch(shape);
      if (taken == nullptr) taken.reset(new NetScratch(call));
      NetScratch& scratch = *taken;
      for (int64_t run = first_run; run < last_run; ++run) {
        const int64_t* rows = runs.rows(run);
        const int count = runs.size(run);
        const bool is_fresh = fr(rows[0]);
        if (!is_fresh) {  // rows that are not fresh start from their last outputs
          for (int i = 0; i < layers; ++i) {
            if (in_place[i]) continue;
            const NetLayer<TW>& l = call.layers[i];
            for (int r = 0; r < count; ++r)
              std::memcpy(l.acc + rows[r] * l.out_size, l.acc_prev + rows[r] * l.out_size,
                          sizeof(float) * l.out_size);
          }
        }
        run_fn_(call, idx(rows[0]), rows, count, is_fresh, &scratch);
      }
      tensorflow::mutex_lock lock(mu_);
      spare_.push_back(std::move(taken));
    };
    int64_t cost = 1;
    for (const auto& l : call.layers)
      if (!l.empty) cost += l.out_size * l.k / 16;
    ParallelOverRuns(ctx, runs, cost, shard);
    // logits = the last layer's [1, 1, N] output plus its bias.
    const NetLayer<TW>& last = call.layers.back();
    float* lg = logits->flat<float>().data();
    for (int64_t b = 0; b < batch; ++b) {
      const float* bias = last.bias + idx(b) * c;
      const float* acc = last.acc + b * c;
      for (int64_t j = 0; j < c; ++j) lg[b * c + j] = acc[j] + bias[j];
    }
  }

 private:
  // A spare scratch made for these layers, or null. Scratches are kept from
  // call to call: making one (MBs of lists, some zeroed) cost more than
  // the in-place update saved.
  std::unique_ptr<NetScratch> TakeScratch(const std::vector<int64_t>& shape) {
    tensorflow::mutex_lock lock(mu_);
    for (size_t i = 0; i < spare_.size(); ++i) {
      if (spare_[i]->shape != shape) continue;
      std::unique_ptr<NetScratch> s = std::move(spare_[i]);
      spare_.erase(spare_.begin() + i);
      s->bias_of = -1;  // the kernels may have been reloaded since
      return s;
    }
    return nullptr;
  }

  NetRunFn<TX, TW> run_fn_ = nullptr;
  Isa isa_ = Isa::kBaseline;
  tensorflow::mutex mu_;
  std::vector<std::unique_ptr<NetScratch>> spare_ TF_GUARDED_BY(mu_);
  int num_layers_ = 1;
  std::vector<int32_t> kernel_sizes_, strides_;
  std::vector<bool> relus_;
  std::vector<int32_t> circulant_blocks_;
  float input_scale_ = 1.0f;
};

TFRL_REGISTER_DELTA_OP("PopulationDeltaNet", PopulationDeltaNetOp)

}  // namespace
}  // namespace population
}  // namespace tfrl
