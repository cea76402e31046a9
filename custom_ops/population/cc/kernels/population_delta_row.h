// Row-level machinery of incremental (delta) inference, of the whole-network
// op PopulationDeltaNet (population_delta_net.cc) and the per-layer op
// PopulationDeltaConv2D (population_delta_conv2d.cc, built only with
// TFRL_BUILD_DELTA_CONV2D=1).
//
// A convolution is linear in its input, so this step's output is the last
// step's output plus the convolution of the input's change. Consecutive Atari
// frames differ in a few hundred of 28,224 values (the ball and the paddles
// move, the background does not), and each changed value reaches at most
// ceil(ks / stride)^2 outputs. The layers above see the change thinned by the
// ReLUs: a few percent of the first convolution's outputs and under a fifth
// of the second's (Pong, random networks), which is what makes the dense
// layer's input sparse as well.
//
// A row costs two passes. The first finds the changed values (whole
// unchanged image rows are skipped with one memcmp, unchanged 32-byte spans
// with four word compares) and lists them by input position. The second
// visits each output whose window holds a change and sums the changes times
// their kernel rows in registers, a block of N at a time, so the output is
// read and written once per block, not once per change (that halved the
// time of the upper layers against scattering each change into the outputs).
// A fresh row is the same with every value a change from zero.
//
// Rows run in network order on the intra-op threads, a dense layer's rows of
// one network as a run that shares each read of a kernel row (runs of up to
// kRunRows rows, NetworkRuns in population_rows.h). Each output element is
// summed in a fixed order (window row, column, channel), so results depend
// only on the row's own inputs.

#ifndef TFRL_CUSTOM_OPS_POPULATION_DELTA_ROW_H_
#define TFRL_CUSTOM_OPS_POPULATION_DELTA_ROW_H_

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>
#include <type_traits>
#include <vector>

#include "population_simd.h"

namespace tfrl {
namespace population {

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
  // The kernel's layout (CirculantWindow): dense [K, N] when block is 0,
  // else block-circulant vectors kept compact, of in_blocks input blocks.
  int64_t block = 0;
  int64_t in_blocks = 0;
};

template <typename TX, typename TW>
struct DeltaRow {
  const TX* x;
  const TX* x_prev;
  float* acc;             // holds acc_prev (or zeros when fresh) on entry
  const TW* w;            // [ks * ks * C, N] of the row's network
  const float* row_bias;  // [W * C]: its input bias along an image row (or zeros)
  bool fresh;
};

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

// A nonzero input change d: in a position's list `k` is its channel, in an
// output's window list the kernel row it multiplies.
struct Change {
  float d;
  int32_t k;
};

// A row's changes, by input position, and the outputs they reach. Reused
// row after row by one shard (only what a row set is reset after it).
// The lists are sized for the worst case up front, left uninitialized, and
// filled through counts (push_back is not inlined into the ISA-specific
// builds, and cost a quarter of the op).
struct DeltaScratch {
  explicit DeltaScratch(const DeltaGeometry& g)
      : pos_first(new int32_t[g.h * g.w]),
        pos_count(g.h * g.w, 0),
        changed_pos(new int32_t[g.h * g.w]),
        changes(new Change[g.h * g.w * g.c]),
        row_changed(g.h, 0),
        changed_rows(new int32_t[g.h]),
        touched(g.out_h * g.out_w, 0),
        touched_list(new int32_t[g.out_h * g.out_w]),
        window(new Change[g.ks * g.ks * g.c]) {}
  std::unique_ptr<int32_t[]> pos_first;  // a position's run in `changes`
  std::vector<int32_t> pos_count;
  std::unique_ptr<int32_t[]> changed_pos;
  std::unique_ptr<Change[]> changes;
  std::vector<uint8_t> row_changed;  // an image row with a change
  std::unique_ptr<int32_t[]> changed_rows;
  std::vector<uint8_t> touched;  // an output whose window holds a change
  std::unique_ptr<int32_t[]> touched_list;
  std::unique_ptr<Change[]> window;
  int64_t num_changed_pos = 0, num_changes = 0, num_changed_rows = 0, num_touched = 0;
};

// Marks the outputs whose window holds input column x of image rows reaching
// outputs [oy_lo, oy_hi].
TFRL_INLINE void MarkTouched(const DeltaGeometry& g, int64_t oy_lo, int64_t oy_hi, int64_t x,
                             DeltaScratch* s) {
  for (int64_t oy = oy_lo; oy <= oy_hi; ++oy) {
    for (int64_t ox = g.ox_lo[x]; ox <= g.ox_hi[x]; ++ox) {
      const int64_t o = oy * g.out_w + ox;
      if (!s->touched[o]) {
        s->touched[o] = 1;
        s->touched_list[s->num_touched++] = static_cast<int32_t>(o);
      }
    }
  }
}

// Records the changes f(x) - f(x_prev) of elements [begin, end) (at most one
// span) of image row y, computed without branches, and marks the outputs they
// reach.
template <typename TX, typename TW>
TFRL_INLINE void CollectSpan(const DeltaGeometry& g, const DeltaRow<TX, TW>& r, int64_t y,
                             int64_t oy_lo, int64_t oy_hi, int64_t begin, int64_t end,
                             DeltaScratch* s) {
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
    if (d[i] != 0.f) {  // 0: unchanged
      const int64_t p = y * g.w + x;
      if (s->pos_count[p] == 0) {  // a position's changes are consecutive
        s->pos_first[p] = static_cast<int32_t>(s->num_changes);
        s->changed_pos[s->num_changed_pos++] = static_cast<int32_t>(p);
        MarkTouched(g, oy_lo, oy_hi, x, s);
      }
      s->changes[s->num_changes++] = {d[i], static_cast<int32_t>(ch)};
      ++s->pos_count[p];
    }
    if (++ch == g.c) {
      ch = 0;
      ++x;
    }
  }
}

// out[0 : V * W] += sum over `count` changes of d * (kernel row k)[0 : V * W],
// summed in registers (the outputs are read and written once, not per change).
template <int W, int V, typename TW>
TFRL_INLINE void AccumulateBlock(float* out, const Change* c, int64_t count, const TW* w,
                                 int64_t n) {
  typedef typename Vec<W>::type VF;
  VF sum[V];
  for (int v = 0; v < V; ++v) sum[v] = VF{};
  if constexpr (std::is_same<TW, uint16_t>::value && V % 2 == 0) {
    // bfloat16: 2W weights as W 32-bit words; a word's low half widens by a
    // shift, its high half by a mask (two operations per 2W weights, where
    // widening each half to 32 bits costs five). sum[2u] collects the even
    // columns of the u-th 2W, sum[2u + 1] the odd ones.
    typedef typename Vec<W>::wide VU;
    const VU high = VU{} + 0xFFFF0000u;
    for (int64_t i = 0; i < count; ++i) {
      const TW* wr = w + static_cast<int64_t>(c[i].k) * n;
      const float d = c[i].d;
      for (int u = 0; u < V / 2; ++u) {
        VU word;
        std::memcpy(&word, wr + u * 2 * W, sizeof(word));
        const VU even = word << 16, odd = word & high;
        VF fe, fo;
        std::memcpy(&fe, &even, sizeof(fe));
        std::memcpy(&fo, &odd, sizeof(fo));
        sum[2 * u] += d * fe;
        sum[2 * u + 1] += d * fo;
      }
    }
    for (int u = 0; u < V / 2; ++u) {
      for (int j = 0; j < W; ++j) {
        out[u * 2 * W + 2 * j] += sum[2 * u][j];
        out[u * 2 * W + 2 * j + 1] += sum[2 * u + 1][j];
      }
    }
  } else {
    for (int64_t i = 0; i < count; ++i) {
      const TW* wr = w + static_cast<int64_t>(c[i].k) * n;
      const float d = c[i].d;
      for (int v = 0; v < V; ++v) sum[v] += d * LoadW<W>(wr + v * W);
    }
    for (int v = 0; v < V; ++v) StoreU(out + v * W, LoadU<VF>(out + v * W) + sum[v]);
  }
}

// The changes of one output's window, in chunks of kChunk (16 measured best on
// the AMD VM's dense layer, against 4-512): their kernel rows stay
// in L1 while the output's N columns are swept a register block at a time.
constexpr int kBlockVecs = 8;
constexpr int64_t kChunk = 16;

template <int W, int V, typename TW>
TFRL_INLINE void AccumulateTail(float* out, const Change* c, int64_t count, const TW* w,
                                int64_t n, int vecs) {
  if constexpr (V > 0) {
    if (vecs == V) return AccumulateBlock<W, V>(out, c, count, w, n);
    AccumulateTail<W, V - 1>(out, c, count, w, n, vecs);
  }
}

template <int W, typename TW>
TFRL_INLINE void AccumulateDenseWindow(float* out, const Change* window, int64_t size,
                                       const TW* w, int64_t n) {
  constexpr int64_t kBlock = kBlockVecs * W;
  const int64_t full = n / kBlock * kBlock;
  const int vecs = static_cast<int>((n - full) / W);
  const int64_t scalar = full + vecs * W;
  for (int64_t c0 = 0; c0 < size; c0 += kChunk) {
    const Change* c = window + c0;
    const int64_t count = std::min<int64_t>(kChunk, size - c0);
    for (int64_t j = 0; j < full; j += kBlock)
      AccumulateBlock<W, kBlockVecs>(out + j, c, count, w + j, n);
    if (vecs > 0) AccumulateTail<W, kBlockVecs - 1>(out + full, c, count, w + full, n, vecs);
    if (scalar < n) {  // fewer than W columns: a sum per column, changes outermost
      float sum[W] = {};
      const int64_t rest = n - scalar;
      for (int64_t i = 0; i < count; ++i) {
        const TW* wr = w + static_cast<int64_t>(c[i].k) * n + scalar;
        for (int64_t j = 0; j < rest; ++j) sum[j] += c[i].d * Widen(wr[j]);
      }
      for (int64_t j = 0; j < rest; ++j) out[scalar + j] += sum[j];
    }
  }
}

// A block-circulant kernel (block b) kept compact. Block (q, p) of the
// layer's [N, K] matrix is the circulant of the vector v[q, p, 0:b]
// (tfrl.layers.circulant's layout: kernel row k, column j holds
// v[j / b, k / b, (j - k) mod b]). Each vector is stored twice, as
// w[q, p, 0:2b], so the W columns [j, j + W) of row k (W dividing b, j a
// multiple of W) are contiguous: w[q, p, j % b + b - k % b :]. The values
// are the expanded kernel's and are summed in AccumulateDenseWindow's order,
// so the outputs are bit for bit the expanded kernel's, from 2 / b of its
// bytes (a network's kernel fits in cache where the expanded one does not:
// docs/neuroevolution_throughput.md, the memory bound of the Frostbite preset).
template <int W, int V>
TFRL_INLINE void CirculantBlock(float* out, const Change* c, int64_t count, const float* w,
                                const int64_t* row_at, const int64_t* col_at) {
  typedef typename Vec<W>::type VF;
  VF sum[V];
  for (int v = 0; v < V; ++v) sum[v] = VF{};
  for (int64_t i = 0; i < count; ++i) {
    const float* wr = w + row_at[i];
    const float d = c[i].d;
    for (int v = 0; v < V; ++v) sum[v] += d * LoadW<W>(wr + col_at[v]);
  }
  for (int v = 0; v < V; ++v) StoreU(out + v * W, LoadU<VF>(out + v * W) + sum[v]);
}

template <int W, int V>
TFRL_INLINE void CirculantTail(float* out, const Change* c, int64_t count, const float* w,
                               const int64_t* row_at, const int64_t* col_at, int vecs) {
  if constexpr (V > 0) {
    if (vecs == V) return CirculantBlock<W, V>(out, c, count, w, row_at, col_at);
    CirculantTail<W, V - 1>(out, c, count, w, row_at, col_at, vecs);
  }
}

template <int W>
TFRL_INLINE void CirculantWindow(float* out, const Change* window, int64_t size,
                                 const float* w, int64_t n, int64_t b, int64_t in_blocks) {
  constexpr int64_t kBlock = kBlockVecs * W;
  const int64_t full = n / kBlock * kBlock;
  const int vecs = static_cast<int>((n - full) / W);
  const int64_t scalar = full + vecs * W;
  const int64_t q_stride = in_blocks * 2 * b;
  auto col_offset = [&](int64_t j) { return j / b * q_stride + j % b; };
  int64_t row_at[kChunk];
  int64_t col_at[kBlockVecs];
  for (int64_t c0 = 0; c0 < size; c0 += kChunk) {
    const Change* c = window + c0;
    const int64_t count = std::min<int64_t>(kChunk, size - c0);
    for (int64_t i = 0; i < count; ++i) {
      const int64_t k = c[i].k, p = k / b;
      row_at[i] = p * 2 * b + b - (k - p * b);
    }
    for (int64_t j = 0; j < full; j += kBlock) {
      for (int v = 0; v < kBlockVecs; ++v) col_at[v] = col_offset(j + v * W);
      CirculantBlock<W, kBlockVecs>(out + j, c, count, w, row_at, col_at);
    }
    if (vecs > 0) {
      for (int v = 0; v < vecs; ++v) col_at[v] = col_offset(full + v * W);
      CirculantTail<W, kBlockVecs - 1>(out + full, c, count, w, row_at, col_at, vecs);
    }
    if (scalar < n) {
      float sum[W] = {};
      const int64_t rest = n - scalar;
      for (int64_t i = 0; i < count; ++i) {
        for (int64_t j = 0; j < rest; ++j)
          sum[j] += c[i].d * w[row_at[i] + col_offset(scalar + j)];
      }
      for (int64_t j = 0; j < rest; ++j) out[scalar + j] += sum[j];
    }
  }
}

// The window's changes times their kernel rows, added to out[0 : g.n].
template <int W, typename TW>
TFRL_INLINE void AccumulateWindow(float* out, const Change* window, int64_t size, const TW* w,
                                  const DeltaGeometry& g) {
  if constexpr (std::is_same<TW, float>::value) {
    if (g.block > 0) return CirculantWindow<W>(out, window, size, w, g.n, g.block, g.in_blocks);
  }
  AccumulateDenseWindow<W>(out, window, size, w, g.n);
}

// Output (oy, ox) of row r in full: its window's nonzero values f(x), listed
// without branches in (kernel row, column, channel) order, times their
// kernel rows, added to the output (zero on entry).
template <int W, typename TX, typename TW>
TFRL_INLINE void FullOutput(const DeltaGeometry& g, const DeltaRow<TX, TW>& r, int64_t oy,
                            int64_t ox, Change* window) {
  const int64_t seg = g.ks * g.c;  // one window row: ks columns of C channels
  const float* bs = r.row_bias + ox * g.stride * g.c;
  int64_t size = 0;
  for (int64_t ky = 0; ky < g.ks; ++ky) {
    const TX* src = r.x + ((oy * g.stride + ky) * g.w + ox * g.stride) * g.c;
    const int32_t k0 = static_cast<int32_t>(ky * seg);
    for (int64_t t = 0; t < seg; ++t) {
      float v = static_cast<float>(src[t]) * g.scale + bs[t];
      if (g.relu) v = v < 0.f ? 0.f : v;
      window[size] = {v, k0 + static_cast<int32_t>(t)};
      size += v != 0.f;
    }
  }
  AccumulateWindow<W>(r.acc + (oy * g.out_w + ox) * g.n, window, size, r.w, g);
}

// A fresh row: each output straight from its window, in the same order as
// the changes of a row that is not fresh (listing them by position first
// costs more than it saves here, where every value is a change).
template <int W, typename TX, typename TW>
TFRL_INLINE void FreshRowImpl(const DeltaGeometry& g, const DeltaRow<TX, TW>& r,
                              Change* window) {
  for (int64_t oy = 0; oy < g.out_h; ++oy)
    for (int64_t ox = 0; ox < g.out_w; ++ox) FullOutput<W>(g, r, oy, ox, window);
}

// Whether a lane of v (each 0 or NaN) is NaN: the halves added down to
// four lanes (0 + NaN is NaN), a few vector adds rather than W compares.
template <int W>
TFRL_INLINE bool AnyNanLane(const typename Vec<W>::type& v) {
  if constexpr (W > 4) {
    typename Vec<W / 2>::type lo, hi;
    std::memcpy(&lo, &v, sizeof(lo));
    std::memcpy(&hi, reinterpret_cast<const char*>(&v) + sizeof(lo), sizeof(hi));
    return AnyNanLane<W / 2>(lo + hi);
  } else {
    float lanes[W];
    StoreU(lanes, v);
    float sum = 0.f;
    for (int i = 0; i < W; ++i) sum += lanes[i];
    return sum != sum;
  }
}

// Whether any of v[0 : n] is NaN or infinite (x - x is NaN exactly then).
template <int W>
TFRL_INLINE bool AnyNonFinite(const float* v, int64_t n) {
  typedef typename Vec<W>::type VF;
  VF bad = VF{};
  int64_t j = 0;
  for (; j + W <= n; j += W) {
    const VF x = LoadU<VF>(v + j);
    bad += x - x;
  }
  float rest = 0.f;
  for (; j < n; ++j) rest += v[j] - v[j];
  return rest != rest || AnyNanLane<W>(bad);
}

// Output o of row r after its changes were added: if any value is not finite
// (an input in its window became or stopped being inf or NaN, or a sum
// overflowed), recomputes it in full from its window. acc_prev plus a change
// cannot be trusted there: inf - inf is NaN, and a NaN or inf in acc_prev
// would otherwise stay in every later step. So a non-finite input reaches
// only the steps whose input holds it, as in the full convolution.
template <int W, typename TX, typename TW>
TFRL_INLINE void RecomputeIfNotFinite(const DeltaGeometry& g, const DeltaRow<TX, TW>& r,
                                      int64_t o, Change* window) {
  float* out = r.acc + o * g.n;
  if (!AnyNonFinite<W>(out, g.n)) return;
  std::memset(out, 0, sizeof(float) * g.n);
  const int64_t oy = o / g.out_w;
  FullOutput<W>(g, r, oy, o - oy * g.out_w, window);
}

// A row's first pass: its changes f(x) - f(x_prev) by input position, the
// image rows they are on and the outputs they reach.
template <typename TX, typename TW>
TFRL_INLINE void CollectRow(const DeltaGeometry& g, const DeltaRow<TX, TW>& r,
                            DeltaScratch* s) {
  static_assert(kSpanBytes % sizeof(TX) == 0, "spans hold whole elements");
  const int64_t row_len = g.w * g.c;
  const int64_t row_bytes = sizeof(TX) * row_len;
  for (int64_t y = 0; y < g.h; ++y) {
    int64_t oy_lo, oy_hi;
    Covering(y, g.ks, g.stride, g.out_h, &oy_lo, &oy_hi);
    if (oy_lo > oy_hi) continue;  // a row no window reaches
    const unsigned char* xb = reinterpret_cast<const unsigned char*>(r.x + y * row_len);
    const unsigned char* pb = reinterpret_cast<const unsigned char*>(r.x_prev + y * row_len);
    if (std::memcmp(xb, pb, row_bytes) == 0) continue;
    const int64_t changes_before = s->num_changes;
    // Only spans that differ are looked at element by element.
    for (int64_t off = 0; off < row_bytes; off += kSpanBytes) {
      const int64_t len = std::min(kSpanBytes, row_bytes - off);
      if (len == kSpanBytes ? SameSpan(xb + off, pb + off)
                            : std::memcmp(xb + off, pb + off, len) == 0)
        continue;
      CollectSpan(g, r, y, oy_lo, oy_hi, off / sizeof(TX), (off + len) / sizeof(TX), s);
    }
    if (s->num_changes > changes_before) {
      s->row_changed[y] = 1;
      s->changed_rows[s->num_changed_rows++] = static_cast<int32_t>(y);
    }
  }
}

// The changes in output o's window, in (kernel row, column, channel) order,
// into `window`; returns their count.
TFRL_INLINE int64_t WindowOf(const DeltaGeometry& g, const DeltaScratch& s, int32_t o,
                             Change* window) {
  const int64_t oy = o / g.out_w, ox = o - oy * g.out_w;
  int64_t size = 0;
  for (int64_t ky = 0; ky < g.ks; ++ky) {
    if (!s.row_changed[oy * g.stride + ky]) continue;
    const int64_t p0 = (oy * g.stride + ky) * g.w + ox * g.stride;
    for (int64_t kx = 0; kx < g.ks; ++kx) {
      const int32_t count = s.pos_count[p0 + kx];
      if (count == 0) continue;
      const int32_t k0 = static_cast<int32_t>((ky * g.ks + kx) * g.c);
      const Change* c = s.changes.get() + s.pos_first[p0 + kx];
      for (int32_t i = 0; i < count; ++i) window[size++] = {c[i].d, k0 + c[i].k};
    }
  }
  return size;
}

// Clears what a row set in the scratch, for the next row.
TFRL_INLINE void ResetScratch(DeltaScratch* s) {
  for (int64_t i = 0; i < s->num_touched; ++i) s->touched[s->touched_list[i]] = 0;
  for (int64_t i = 0; i < s->num_changed_pos; ++i) s->pos_count[s->changed_pos[i]] = 0;
  for (int64_t i = 0; i < s->num_changed_rows; ++i) s->row_changed[s->changed_rows[i]] = 0;
  s->num_changed_pos = s->num_changes = s->num_changed_rows = s->num_touched = 0;
}

// A dense layer (one output, whose window is the whole input) on up to
// kRunRows rows of one network, none fresh. Rows of a network see much the
// same changes (the same paddles and ball in other positions): on Pong the
// union of 8 rows' changed dense inputs is 1.5-3x one row's, not 8x. So the
// kernel is walked once, kRangeRows rows at a time, and each row adds its
// changes in that range while those kernel rows are in cache: a kernel row
// read from L3 (a network's dense kernel is MBs) serves every row of the run
// that changed it. Each row's sum is chunked at the fixed range boundaries,
// so it still depends only on its own inputs. On the Zen3 VM this took the
// large net's dense layer from 32.6 to 26.9 us per row (bfloat16: 26.9 to
// 22.2); ranges of 16-128 rows measured alike, and software prefetch of the
// next range's kernel rows gained nothing.
constexpr int kRunRows = 8;
constexpr int64_t kRangeRows = 32;

// The sum of a dense run, each row's changes (`windows[r]`, `size[r]` of
// them, in kernel-row order) into its output.
template <int W, typename TX, typename TW>
TFRL_INLINE void SumDenseRun(const DeltaGeometry& g, const DeltaRow<TX, TW>* rows, int count,
                             Change* const* windows, const int64_t* size) {
  int64_t pos[kRunRows] = {};
  const int64_t k = g.ks * g.ks * g.c;
  for (int64_t k1 = kRangeRows; k1 < k + kRangeRows; k1 += kRangeRows) {
    for (int r = 0; r < count; ++r) {
      const Change* c = windows[r] + pos[r];
      int64_t end = pos[r];
      while (end < size[r] && windows[r][end].k < k1) ++end;
      if (end > pos[r]) AccumulateWindow<W>(rows[r].acc, c, end - pos[r], rows[r].w, g);
      pos[r] = end;
    }
  }
}

}  // namespace population
}  // namespace tfrl

#endif  // TFRL_CUSTOM_OPS_POPULATION_DELTA_ROW_H_
