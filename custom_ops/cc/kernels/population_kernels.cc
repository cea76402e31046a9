// CPU kernels of PopulationMatmul and PopulationConv2D (see population_ops.cc).
//
// Active rows are bucketed by network (a stable sort), every bucket becomes
// one GEMM whose A and C rows are addressed through row pointers (no gather
// copy of x, no copy of w; for convolutions the A rows are the image patches
// read in place, so there is no im2col buffer either), and the buckets are cut into work units that run
// on the intra-op thread pool. The GEMM is a register-blocked micro-kernel
// written with GCC vector extensions and compiled three times (AVX-512, AVX2 +
// FMA, baseline SSE); the widest one the CPU supports is picked at run time
// (or the one TFRL_POPULATION_ISA names, see population_isa.cc), so the
// library runs on any x86-64 CPU whatever flags TensorFlow was built with.
//
// Weights come as float32 or bfloat16 (template TW). bfloat16 halves the bytes
// that a step streams through a population's dense layers (one weight read per
// network per step is what bounds them on a CPU); each weight is widened to
// float32 exactly on load and the arithmetic is float32, so the result is the
// float32 product with the bfloat16-rounded weights.
//
// PopulationConv2D with input_dtype = "bfloat16" (bfloat16 kernels only) also
// rounds its input to bfloat16 and accumulates in float32: on CPUs with
// AMX-BF16 in tiles (population_amx.{h,cc}), elsewhere (or with
// TFRL_POPULATION_NO_AMX set) by rounding the active rows' images into a
// scratch copy that the float32 GEMM above then reads.

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
#include "population_amx.h"
#include "population_simd.h"

namespace tensorflow {
namespace {

using population_simd::CountCall;
using population_simd::Isa;
using population_simd::KernelRows;
using population_simd::LoadU;
using population_simd::LoadW;
using population_simd::OutputShape;
using population_simd::Path;
using population_simd::PickByIsa;
using population_simd::Storage;
using population_simd::StoreU;
using population_simd::Vec;
using population_simd::WeightData;
using population_simd::Widen;

// One GEMM: C rows (c[i], N floats each) = A rows x B, where B is [K, N]
// row-major. A row is `num_seg` segments of `seg_len` floats, segment s
// starting at a[i] + s * seg_stride (K = num_seg * seg_len): one contiguous
// segment for dense layers; for a convolution, the kh image rows of one patch
// (kw * c_in floats each, W * c_in apart), read in place with no im2col copy.
template <typename TW>
struct GemmArgs {
  const float* const* a;
  float* const* c;
  int64_t rows;
  const TW* b;
  int64_t k;
  int64_t n;
  int64_t seg_len;
  int64_t num_seg;
  int64_t seg_stride;
};

// C[i, j0 : j0 + NV * W] for MR rows, accumulated over all of K in registers.
template <int W, int MR, int NV, typename TW>
TFRL_INLINE void MicroKernel(const float* const* a, float* const* c,
                             const TW* b, const GemmArgs<TW>& g, int64_t j0) {
  typedef typename Vec<W>::type V;
  V acc[MR][NV];
  for (int i = 0; i < MR; ++i)
    for (int v = 0; v < NV; ++v) acc[i][v] = V{};
  const TW* bp = b + j0;
  const int64_t ldb = g.n;
  for (int64_t s = 0; s < g.num_seg; ++s) {
    const float* ap[MR];
    for (int i = 0; i < MR; ++i) ap[i] = a[i] + s * g.seg_stride;
    for (int64_t t = 0; t < g.seg_len; ++t, bp += ldb) {
      V bv[NV];
      for (int v = 0; v < NV; ++v) bv[v] = LoadW<W>(bp + v * W);
      for (int i = 0; i < MR; ++i) {
        const float x = ap[i][t];
        for (int v = 0; v < NV; ++v) acc[i][v] += x * bv[v];
      }
    }
  }
  for (int i = 0; i < MR; ++i)
    for (int v = 0; v < NV; ++v) StoreU(c[i] + j0 + v * W, acc[i][v]);
}

// Columns that do not fill a vector.
template <int MR, typename TW>
TFRL_INLINE void ScalarTail(const float* const* a, float* const* c,
                            const TW* b, const GemmArgs<TW>& g, int64_t j0) {
  for (int i = 0; i < MR; ++i) {
    for (int64_t j = j0; j < g.n; ++j) {
      float sum = 0.f;
      const TW* bp = b + j;
      for (int64_t s = 0; s < g.num_seg; ++s) {
        const float* ap = a[i] + s * g.seg_stride;
        for (int64_t t = 0; t < g.seg_len; ++t, bp += g.n)
          sum += ap[t] * Widen(*bp);
      }
      c[i][j] = sum;
    }
  }
}

// Accumulator budget per ISA: the widest column block that still leaves
// registers for the broadcast and the loaded B vectors.
template <int W>
constexpr int AccBudget() {
  return W == 16 ? 16 : 12;
}

template <int W, int MR, typename TW>
TFRL_INLINE void RowBlock(const float* const* a, float* const* c,
                          const GemmArgs<TW>& g) {
  constexpr int kNv0 = AccBudget<W>() / MR;
  constexpr int kNv = kNv0 < 1 ? 1 : (kNv0 > 8 ? 8 : kNv0);
  int64_t j = 0;
  for (; j + kNv * W <= g.n; j += kNv * W) MicroKernel<W, MR, kNv>(a, c, g.b, g, j);
  for (; j + W <= g.n; j += W) MicroKernel<W, MR, 1>(a, c, g.b, g, j);
  if (j < g.n) ScalarTail<MR>(a, c, g.b, g, j);
}

// Few rows (3 to kStreamRows) against a wide B, as the dense layers of a GA
// population meet it (a few episodes per network): such a GEMM is bound by
// reading B from memory. K is cut into chunks of B rows that fit in L1 with
// room to spare; within a chunk each (rows x column block) tile accumulates in
// registers, starting from the partial sums in C, so B comes from memory
// once, chunk after chunk in address order, and C is read and written once per chunk,
// not once per B row. The additions happen in the same order as in the
// register-blocked path (K ascending from zero), so a row's result does not
// depend on which path its bucket took.
constexpr int kStreamRows = 8;
constexpr int64_t kStreamMinN = 64;
constexpr int64_t kChunkBytes = 16 * 1024;

template <int W, int R, int NV, typename TW>
TFRL_INLINE void ChunkTile(const float* const* ap, float* const* c, const TW* bp,
                           int64_t ldb, int64_t len, int64_t j, bool first) {
  typedef typename Vec<W>::type V;
  V acc[R][NV];
  for (int i = 0; i < R; ++i)
    for (int v = 0; v < NV; ++v)
      acc[i][v] = first ? V{} : LoadU<V>(c[i] + j + v * W);
  bp += j;
  for (int64_t t = 0; t < len; ++t, bp += ldb) {
    V bv[NV];
    for (int v = 0; v < NV; ++v) bv[v] = LoadW<W>(bp + v * W);
    for (int i = 0; i < R; ++i) {
      const float x = ap[i][t];
      for (int v = 0; v < NV; ++v) acc[i][v] += x * bv[v];
    }
  }
  for (int i = 0; i < R; ++i)
    for (int v = 0; v < NV; ++v) StoreU(c[i] + j + v * W, acc[i][v]);
}

// One chunk (B rows bp .. bp + len) for R rows, all full column vectors.
template <int W, int R, typename TW>
TFRL_INLINE void ChunkRows(const float* const* ap, float* const* c, const TW* bp,
                           int64_t n, int64_t len, bool first) {
  constexpr int kNv0 = AccBudget<W>() / R;
  constexpr int kNv = kNv0 < 1 ? 1 : (kNv0 > 4 ? 4 : kNv0);
  const int64_t nv = n / W * W;
  int64_t j = 0;
  for (; j + kNv * W <= nv; j += kNv * W) ChunkTile<W, R, kNv>(ap, c, bp, n, len, j, first);
  for (; j < nv; j += W) ChunkTile<W, R, 1>(ap, c, bp, n, len, j, first);
}

// One or two rows: C (in L1) is the accumulator and B is streamed once in
// address order, row after row; with so few rows the C loads and stores cost
// less than the strided reads of a chunked tile.

template <int W, int R, typename TW>
TFRL_INLINE void StreamRowsLinear(const float* const* a, float* const* c,
                                  const GemmArgs<TW>& g) {
  typedef typename Vec<W>::type V;
  const int64_t n = g.n, nv = n / W * W;
  for (int i = 0; i < R; ++i) std::memset(c[i], 0, sizeof(float) * n);
  const TW* bp = g.b;
  for (int64_t s = 0; s < g.num_seg; ++s) {
    const float* ap[R];
    for (int i = 0; i < R; ++i) ap[i] = a[i] + s * g.seg_stride;
    for (int64_t t = 0; t < g.seg_len; ++t, bp += n) {
      float x[R];
      for (int i = 0; i < R; ++i) x[i] = ap[i][t];
      for (int64_t j = 0; j < nv; j += W) {
        const V bv = LoadW<W>(bp + j);
        for (int i = 0; i < R; ++i)
          StoreU(c[i] + j, LoadU<V>(c[i] + j) + x[i] * bv);
      }
    }
  }
  // The same code as the register-blocked path for the last columns.
  if (nv < n) ScalarTail<R>(a, c, g.b, g, nv);
}

template <int W, typename TW>
TFRL_INLINE void StreamRows(const GemmArgs<TW>& g) {
  const int64_t n = g.n, nv = n / W * W;
  const int64_t kc = std::max<int64_t>(1, kChunkBytes / (n * static_cast<int64_t>(sizeof(TW))));
  const TW* bp = g.b;
  bool first = true;
  for (int64_t s = 0; s < g.num_seg; ++s) {
    for (int64_t t0 = 0; t0 < g.seg_len; t0 += kc) {
      const int64_t len = std::min(kc, g.seg_len - t0);
      // Row blocks of 4 (the tile that fits the registers), then the rest.
      int64_t i = 0;
      for (; i < g.rows; i += 4) {
        const float* ap[4];
        const int64_t r = std::min<int64_t>(4, g.rows - i);
        for (int64_t q = 0; q < r; ++q) ap[q] = g.a[i + q] + s * g.seg_stride + t0;
        float* const* c = g.c + i;
        switch (r) {
          case 1: ChunkRows<W, 1>(ap, c, bp, n, len, first); break;
          case 2: ChunkRows<W, 2>(ap, c, bp, n, len, first); break;
          case 3: ChunkRows<W, 3>(ap, c, bp, n, len, first); break;
          default: ChunkRows<W, 4>(ap, c, bp, n, len, first); break;
        }
      }
      first = false;
      bp += len * n;
    }
  }
  // The same code as the register-blocked path for the last columns.
  if (nv < n) {
    for (int64_t i = 0; i < g.rows; ++i) ScalarTail<1>(g.a + i, g.c + i, g.b, g, nv);
  }
}

template <int W, typename TW>
TFRL_INLINE void GemmImpl(const GemmArgs<TW>& g) {
  constexpr int kMr = W == 16 ? 8 : 6;
  if (g.rows <= kStreamRows && g.n >= kStreamMinN) {
    switch (g.rows) {
      case 0: return;
      case 1: StreamRowsLinear<W, 1>(g.a, g.c, g); return;
      case 2: StreamRowsLinear<W, 2>(g.a, g.c, g); return;
      default: StreamRows<W, TW>(g); return;
    }
  }
  int64_t i = 0;
  for (; i + kMr <= g.rows; i += kMr) RowBlock<W, kMr, TW>(g.a + i, g.c + i, g);
  const float* const* a = g.a + i;
  float* const* c = g.c + i;
  switch (g.rows - i) {
    case 0: break;
    case 1: RowBlock<W, 1, TW>(a, c, g); break;
    case 2: RowBlock<W, 2, TW>(a, c, g); break;
    case 3: RowBlock<W, 3, TW>(a, c, g); break;
    case 4: RowBlock<W, 4, TW>(a, c, g); break;
    case 5: RowBlock<W, 5, TW>(a, c, g); break;
    case 6: RowBlock<W, 6, TW>(a, c, g); break;
    default: RowBlock<W, 7, TW>(a, c, g); break;
  }
}

#if TFRL_X86
template <typename TW>
__attribute__((target("avx512f,avx512dq,avx512bw,avx2,fma"))) void GemmAvx512(
    const GemmArgs<TW>& g) {
  GemmImpl<16, TW>(g);
}
template <typename TW>
__attribute__((target("avx2,fma"))) void GemmAvx2(const GemmArgs<TW>& g) {
  GemmImpl<8, TW>(g);
}
#endif
template <typename TW>
void GemmBaseline(const GemmArgs<TW>& g) {
  GemmImpl<4, TW>(g);
}

template <typename TW>
using GemmFn = void (*)(const GemmArgs<TW>&);

// The build TFRL_POPULATION_ISA (or the CPU) chose, into *gemm and *isa.
template <typename TW>
Status PickGemm(GemmFn<TW>* gemm, Isa* isa) {
#if TFRL_X86
  return PickByIsa<GemmFn<TW>>(&GemmAvx512<TW>, &GemmAvx2<TW>, &GemmBaseline<TW>, gemm, isa);
#else
  return PickByIsa<GemmFn<TW>>(&GemmBaseline<TW>, &GemmBaseline<TW>, &GemmBaseline<TW>, gemm,
                               isa);
#endif
}

// The active rows grouped by network, stable in b: bucket r holds the rows
// order[begin, end) of network p (only networks with active rows have a
// bucket, in increasing p). A sort of the active rows, so that the cost does
// not grow with P (a w of shape [2^40, 0, N] is valid). Fails on an active
// row whose network index is outside [0, pop).
struct Buckets {
  struct Bucket {
    int64_t p, begin, end;
  };
  std::vector<int64_t> order;
  std::vector<Bucket> buckets;
};

Status BucketRows(const Tensor& index, const Tensor& active, int64_t pop, Buckets* out) {
  const int64_t batch = index.dim_size(0);
  const auto idx = index.flat<int32>();
  const auto act = active.flat<bool>();
  std::vector<int64_t>& order = out->order;
  order.clear();
  out->buckets.clear();
  for (int64_t b = 0; b < batch; ++b) {
    if (!act(b)) continue;
    const int32 p = idx(b);
    if (p < 0 || p >= pop)
      return errors::InvalidArgument("index[", b, "] = ", p,
                                     " is out of range: expected a value in [0, ", pop,
                                     ") (w.shape[0] = P) for an active row");
    order.push_back(b);
  }
  std::stable_sort(order.begin(), order.end(),
                   [&idx](int64_t a, int64_t b) { return idx(a) < idx(b); });
  for (int64_t r = 0; r < static_cast<int64_t>(order.size()); ++r) {
    const int64_t p = idx(order[r]);
    if (out->buckets.empty() || out->buckets.back().p != p) {
      out->buckets.push_back({p, r, r + 1});
    } else {
      out->buckets.back().end = r + 1;
    }
  }
  return OkStatus();
}

// What follows a row's matmul (the ops' `epilogue` attr): y += bias[p], then
// y = max(y, 0), on rows still in cache, instead of two more ops (and two
// more passes over the batch) in the graph.
struct Epilogue {
  const float* bias = nullptr;  // [P, N], or null: no bias
  bool relu = false;
  bool Any() const { return bias != nullptr || relu; }
};

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

// Applies `ep` to `rows` rows of N floats of network p.
void ApplyEpilogue(const Epilogue& ep, int64_t p, int64_t n, float* const* c, int64_t rows) {
  const float* bias = ep.bias != nullptr ? ep.bias + p * n : nullptr;
  for (int64_t r = 0; r < rows; ++r) {
    float* y = c[r];
    if (bias != nullptr)
      for (int64_t j = 0; j < n; ++j) y[j] += bias[j];
    if (ep.relu)  // NaN < 0 is false: NaN stays NaN, as tf.nn.relu.
      for (int64_t j = 0; j < n; ++j) y[j] = y[j] < 0.f ? 0.f : y[j];
  }
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

Status CheckIndexAndActive(const Tensor& index, const Tensor& active,
                           int64_t batch) {
  if (index.dims() != 1)
    return errors::InvalidArgument("index must be rank 1 [B], got shape ",
                                   index.shape().DebugString());
  if (active.dims() != 1)
    return errors::InvalidArgument("active must be rank 1 [B], got shape ",
                                   active.shape().DebugString());
  if (index.dim_size(0) != batch)
    return errors::InvalidArgument("index must have B = ", batch,
                                   " entries (x.shape[0]), got ",
                                   index.dim_size(0));
  if (active.dim_size(0) != batch)
    return errors::InvalidArgument("active must have B = ", batch,
                                   " entries (x.shape[0]), got ",
                                   active.dim_size(0));
  return OkStatus();
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
    OP_REQUIRES(ctx, x.dims() == 3,
                errors::InvalidArgument("x must be rank 3 [B, M, K], got shape ",
                                        x.shape().DebugString()));
    OP_REQUIRES(ctx, w.dims() == 3,
                errors::InvalidArgument("w must be rank 3 [P, K, N], got shape ",
                                        w.shape().DebugString()));
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

// Output positions per AMX work item (four 16-row tiles).
constexpr int64_t kAmxPositions = 64;

// The AMX path: work units are runs of (image, 64 output positions) items of
// one network's bucket; a unit packs its network's kernel once and computes
// its items in tiles. Inactive rows of y are zeroed.
void RunAmxConv(OpKernelContext* ctx, const tfrl_population::ConvGeometry& g,
                const Tensor& index, const Tensor& active, int64_t pop, const uint16_t* w,
                const float* x, float* y, const Epilogue& epilogue) {
  const int64_t batch = index.dim_size(0);
  const auto act = active.flat<bool>();
  Buckets buckets;
  OP_REQUIRES_OK(ctx, BucketRows(index, active, pop, &buckets));
  const int64_t image_size = g.h * g.w * g.c, out_size = g.m * g.n;
  for (int64_t b = 0; b < batch; ++b)
    if (!act(b)) std::memset(y + b * out_size, 0, sizeof(float) * out_size);
  const int64_t num_active = static_cast<int64_t>(buckets.order.size());
  if (num_active == 0) return;
  const int64_t items_per_image = (g.m + kAmxPositions - 1) / kAmxPositions;
  const int num_threads = ctx->device()->tensorflow_cpu_worker_threads()->num_threads;
  const int64_t chunk = std::max<int64_t>(
      1, num_active * items_per_image / (8 * std::max(1, num_threads)));
  struct Unit {
    int64_t p, begin, end;  // items [begin, end) of bucket p, item = r * items_per_image + q
  };
  std::vector<Unit> units;
  for (const Buckets::Bucket& bucket : buckets.buckets) {
    const int64_t begin = bucket.begin * items_per_image, end = bucket.end * items_per_image;
    for (int64_t s = begin; s < end; s += chunk)
      units.push_back({bucket.p, s, std::min(end, s + chunk)});
  }
  const int64_t cost = std::max<int64_t>(1, chunk * kAmxPositions * g.k * g.n / 64);
  const std::vector<int64_t>& order = buckets.order;
  auto work = [&](int64_t first, int64_t last) {
    tfrl_population::AmxTileScope tiles;  // this thread's tiles, released at the end
    tfrl_population::AmxConv conv(g);
    int64_t packed = -1;
    for (int64_t u = first; u < last; ++u) {
      const Unit& un = units[u];
      if (un.p != packed) {
        conv.PackKernel(w + un.p * g.k * g.n);
        packed = un.p;
      }
      // Consecutive items of one image are one call.
      for (int64_t item = un.begin; item < un.end;) {
        const int64_t r = item / items_per_image;
        const int64_t stop = std::min(un.end, (r + 1) * items_per_image);
        const int64_t b = order[r];
        const int64_t from = (item - r * items_per_image) * kAmxPositions;
        const int64_t to = std::min(g.m, (stop - r * items_per_image) * kAmxPositions);
        conv.Compute(x + b * image_size, y + b * out_size, from, to);
        if (epilogue.Any()) {
          for (int64_t pos = from; pos < to; ++pos) {
            float* row = y + b * out_size + pos * g.n;
            ApplyEpilogue(epilogue, un.p, g.n, &row, 1);
          }
        }
        item = stop;
      }
    }
  };
  ctx->device()->tensorflow_cpu_worker_threads()->workers->ParallelFor(
      static_cast<int64_t>(units.size()), cost, work);
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
    OP_REQUIRES(ctx, kernel_size_ >= 1 && stride_ >= 1,
                errors::InvalidArgument("kernel_size and stride must be >= 1, got ",
                                        kernel_size_, " and ", stride_));
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
    // AMX converts with AVX-512 instructions: only where that build is active.
    use_amx_ = round_input_ && isa_ == Isa::kAvx512 && tfrl_population::AmxBf16Usable();
  }

  void Compute(OpKernelContext* ctx) override {
    const Tensor& x = ctx->input(0);
    const Tensor& w = ctx->input(1);
    const Tensor& index = ctx->input(2);
    const Tensor& active = ctx->input(3);
    OP_REQUIRES(ctx, x.dims() == 4,
                errors::InvalidArgument("x must be rank 4 [B, H, W, C], got shape ",
                                        x.shape().DebugString()));
    OP_REQUIRES(ctx, w.dims() == 3,
                errors::InvalidArgument("w must be rank 3 [P, K, N], got shape ",
                                        w.shape().DebugString()));
    const int64_t batch = x.dim_size(0), h = x.dim_size(1), wd = x.dim_size(2),
                  c = x.dim_size(3);
    const int64_t ks = kernel_size_, st = stride_;
    const int64_t pop = w.dim_size(0), n = w.dim_size(2);
    OP_REQUIRES_OK(ctx, CheckIndexAndActive(index, active, batch));
    OP_REQUIRES(ctx, h >= ks && wd >= ks,
                errors::InvalidArgument("x spatial size ", h, "x", wd,
                                        " is smaller than kernel_size ", ks));
    int64_t k;
    OP_REQUIRES_OK(ctx, KernelRows(ks, c, &k));
    OP_REQUIRES(ctx, w.dim_size(1) == k,
                errors::InvalidArgument(
                    "w.shape[1] must be kernel_size^2 * C = ", k, ": got w shape ",
                    w.shape().DebugString(), " for x shape ", x.shape().DebugString(),
                    " and kernel_size ", ks));
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
    if (use_amx_ && k > 0) {
      const tfrl_population::ConvGeometry g{h, wd, c, ks, st, ow, oh * ow, k, n};
      RunAmxConv(ctx, g, index, active, pop,
                 reinterpret_cast<const uint16_t*>(WeightData<T>(w)), xp,
                 y->flat<float>().data(), epilogue);
      return;
    }
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
