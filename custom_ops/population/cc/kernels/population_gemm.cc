// The GEMM micro-kernels of the population ops (see population_gemm.h): a
// register-blocked kernel over all of K, K-chunked register tiles for 3-8
// rows against a wide B, and a streamed pass for 1-2 rows. Each is compiled
// for the three ISA builds (population_isa.h); PickGemm hands out the one
// this process runs.

#pragma GCC optimize("fp-contract=fast")

#include "population_gemm.h"

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "population_isa.h"
#include "population_simd.h"

namespace tfrl {
namespace population {
namespace {

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
// once, chunk after chunk in address order, and C is read and written once
// per chunk, not once per B row. The additions happen in the same order as in the
// register-blocked path (K ascending from zero), so a row's result does not
// depend on which path its bucket took.
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

// GemmImpl for the ISA builds.
struct GemmKernel {
  template <int W, typename TW>
  static TFRL_INLINE void Run(const GemmArgs<TW>& g) {
    GemmImpl<W, TW>(g);
  }
};

}  // namespace

template <typename TW>
tensorflow::Status PickGemm(GemmFn<TW>* gemm, Isa* isa) {
  return PickBuild<GemmKernel>(gemm, isa);
}

template tensorflow::Status PickGemm<float>(GemmFn<float>*, Isa*);
template tensorflow::Status PickGemm<uint16_t>(GemmFn<uint16_t>*, Isa*);

}  // namespace population
}  // namespace tfrl
