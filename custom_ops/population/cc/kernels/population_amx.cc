// AMX bfloat16 tiles for PopulationConv2D; see population_amx.h.
//
// Tile instructions are written as inline assembly with "memory" clobbers on
// the loads and stores (so that the compiler finishes writing a buffer before
// a tile reads it, and rereads memory a tile wrote); the tile register of each
// operand is a template constant. The AVX-512 code (conversion to bfloat16,
// kernel packing) sits in functions with a target attribute. Nothing here
// runs unless AmxBf16Usable() returned true.

#include "population_amx.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <type_traits>
#include <utility>

#include "tensorflow/core/platform/threadpool.h"
#include "population_rows.h"

#if defined(__GNUC__) && defined(__x86_64__) && defined(__linux__)
#define TFRL_AMX 1
#include <cpuid.h>
#include <immintrin.h>
#include <sys/syscall.h>
#include <unistd.h>
#else
#define TFRL_AMX 0
#endif

namespace tfrl {
namespace population {
namespace {

constexpr int kTileRows = 16;   // rows of every tile
constexpr int kTileK = 32;      // bfloat16 values per A tile row (64 bytes)
constexpr int kTileCols = 16;   // float32 columns of a C tile
constexpr int kMaxMTiles = 4;   // A tiles of patches built at a time

// The first 64-byte boundary in `v`, which holds 64 bytes of slack.
template <typename T>
T* Align64(std::vector<T>* v) {
  const uintptr_t p = reinterpret_cast<uintptr_t>(v->data());
  return reinterpret_cast<T*>((p + 63) & ~static_cast<uintptr_t>(63));
}

template <typename T>
std::vector<T> WithSlack(int64_t count) {
  return std::vector<T>(count + 64 / sizeof(T), T(0));
}

}  // namespace

AmxConv::AmxConv(const ConvGeometry& g)
    : g_(g),
      packed_storage_(WithSlack<uint16_t>(((g.k + kTileK - 1) / kTileK) * kTileK *
                                          ((g.n + kTileCols - 1) / kTileCols) * kTileCols)),
      patch_storage_(WithSlack<uint16_t>(kMaxMTiles * kTileRows *
                                         ((g.k + kTileK - 1) / kTileK) * kTileK)),
      image_storage_(WithSlack<uint16_t>(g.h * g.w * g.c)),
      tail_storage_(WithSlack<float>(kTileRows * kTileCols)) {
  buf_.kp = (g.k + kTileK - 1) / kTileK * kTileK;
  buf_.n_blocks = (g.n + kTileCols - 1) / kTileCols;
  buf_.packed = Align64(&packed_storage_);
  buf_.patches = Align64(&patch_storage_);
  buf_.image = Align64(&image_storage_);
  buf_.tail = Align64(&tail_storage_);
}

#if TFRL_AMX

#define TFRL_AMX_TARGET \
  __attribute__((target("amx-tile,amx-bf16,avx512f,avx512bw,avx512vl,avx512bf16,avx2,fma")))
#define TFRL_AMX_INLINE inline __attribute__((always_inline))

namespace {

// Linux's arch_prctl request for permission to use an extended state
// component (asm/prctl.h), and the component of the tile data.
constexpr int kArchReqXcompPerm = 0x1023;
constexpr int kXFeatureXTileData = 18;

bool CpuHasAmxBf16() {
  unsigned a, b, c, d;
  if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return false;
  const unsigned max_subleaf = a;
  const bool avx512 = (b & (1u << 16)) && (b & (1u << 30)) && (b & (1u << 31));  // F BW VL
  const bool amx = (d & (1u << 24)) && (d & (1u << 22));                          // TILE BF16
  if (!avx512 || !amx || max_subleaf < 1) return false;
  if (!__get_cpuid_count(7, 1, &a, &b, &c, &d) || !(a & (1u << 5))) return false;  // AVX512_BF16
  if (!__get_cpuid(1, &a, &b, &c, &d) || !(c & (1u << 27))) return false;        // OSXSAVE
  uint32_t lo, hi;
  asm volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  const uint64_t xcr0 = (static_cast<uint64_t>(hi) << 32) | lo;
  // SSE, AVX, opmask, the two ZMM halves, tile configuration, tile data.
  const uint64_t needed = 0x6 | 0xe0 | (uint64_t{3} << 17);
  return (xcr0 & needed) == needed;
}

template <int T>
TFRL_AMX_INLINE void TileZero() {
  asm volatile("tilezero %%tmm%c0" ::"i"(T));
}
template <int T>
TFRL_AMX_INLINE void TileLoad(const void* base, int64_t stride_bytes) {
  asm volatile("tileloadd (%0,%1,1), %%tmm%c2" ::"r"(base), "r"(stride_bytes), "i"(T)
               : "memory");
}
template <int T>
TFRL_AMX_INLINE void TileStore(void* base, int64_t stride_bytes) {
  asm volatile("tilestored %%tmm%c2, (%0,%1,1)" ::"r"(base), "r"(stride_bytes), "i"(T)
               : "memory");
}
// tmm[C] += tmm[A] . tmm[B] (bfloat16 pairs, float32 accumulation).
template <int C, int A, int B>
TFRL_AMX_INLINE void TileDotBf16() {
  asm volatile("tdpbf16ps %%tmm%c2, %%tmm%c1, %%tmm%c0" ::"i"(C), "i"(A), "i"(B));
}

// f(std::integral_constant<int, 0>), ..., f(std::integral_constant<int, N - 1>).
template <typename F, int... I>
TFRL_AMX_INLINE void ForEachImpl(F& f, std::integer_sequence<int, I...>) {
  (f(std::integral_constant<int, I>{}), ...);
}
template <int N, typename F>
TFRL_AMX_INLINE void ForEach(F&& f) {
  ForEachImpl(f, std::make_integer_sequence<int, N>{});
}

// Tile registers of a block of MT x NT accumulators (MT * NT <= 4): C tiles
// 0..3; with one column block the A tiles rotate through 4, 5, 6 and B is 7,
// with two column blocks A is 4, 5 and B is 6, 7.
template <int NT>
constexpr int CTile(int i, int j) {
  return i * NT + j;
}
template <int NT>
constexpr int ATile(int i) {
  return NT == 1 ? 4 + i % 3 : 4 + i;
}
template <int NT>
constexpr int BTile(int j) {
  return NT == 1 ? 7 : 6 + j;
}

// len float32 values -> bfloat16 bits, round to nearest even (VCVTNE2PS2BF16).
TFRL_AMX_TARGET TFRL_AMX_INLINE void ToBf16(const float* src, uint16_t* dst, int64_t len) {
  int64_t i = 0;
  for (; i + 32 <= len; i += 32) {
    const __m512bh v = _mm512_cvtne2ps_pbh(_mm512_loadu_ps(src + i + 16), _mm512_loadu_ps(src + i));
    _mm512_storeu_si512(dst + i, reinterpret_cast<const __m512i&>(v));
  }
  for (; i < len; i += 16) {
    const __mmask16 mask =
        len - i >= 16 ? static_cast<__mmask16>(0xffff)
                      : static_cast<__mmask16>((1u << (len - i)) - 1);
    const __m256bh v = _mm512_cvtneps_pbh(_mm512_maskz_loadu_ps(mask, src + i));
    _mm256_mask_storeu_epi16(dst + i, mask, reinterpret_cast<const __m256i&>(v));
  }
}

// bfloat16 values [0, len) from src to dst.
TFRL_AMX_TARGET TFRL_AMX_INLINE void CopyBf16(const uint16_t* src, uint16_t* dst, int64_t len) {
  int64_t i = 0;
  for (; i + 32 <= len; i += 32) _mm512_storeu_si512(dst + i, _mm512_loadu_si512(src + i));
  if (i < len) {
    const __mmask32 mask = static_cast<__mmask32>((uint64_t{1} << (len - i)) - 1);
    _mm512_mask_storeu_epi16(dst + i, mask, _mm512_maskz_loadu_epi16(mask, src + i));
  }
}

// Rows [0, rows) of the patch buffer: row r is the patch of output position
// first + r, copied from the bfloat16 image and zero-padded to kp; rows at or
// past `end` are zero.
TFRL_AMX_TARGET void BuildPatches(const ConvGeometry& g, const AmxConv::Buffers& buf,
                                  int64_t first, int64_t end, int rows) {
  const int64_t seg = g.kernel_size * g.c, row_stride = g.w * g.c;
  int64_t oi = first / g.out_w, oj = first % g.out_w;
  for (int r = 0; r < rows; ++r) {
    uint16_t* dst = buf.patches + r * buf.kp;
    if (first + r >= end) {
      std::memset(dst, 0, sizeof(uint16_t) * buf.kp);
      continue;
    }
    const uint16_t* src = buf.image + (oi * g.stride * g.w + oj * g.stride) * g.c;
    for (int64_t s = 0; s < g.kernel_size; ++s) CopyBf16(src + s * row_stride, dst + s * seg, seg);
    if (buf.kp > g.k) std::memset(dst + g.k, 0, sizeof(uint16_t) * (buf.kp - g.k));
    if (++oj == g.out_w) {
      oj = 0;
      ++oi;
    }
  }
}

// [k, n] bfloat16 -> per 16-column block, kp / 2 rows of 16 (even, odd) K
// pairs: 32 columns of two kernel rows at a time, interleaved by a permute.
TFRL_AMX_TARGET void PackVnni(const uint16_t* w, const ConvGeometry& g,
                              const AmxConv::Buffers& buf) {
  const int64_t pairs = buf.kp / 2;
  alignas(64) uint16_t low[32], high[32];
  for (int i = 0; i < 16; ++i) {
    low[2 * i] = i, low[2 * i + 1] = 32 + i;            // columns 0..15
    high[2 * i] = 16 + i, high[2 * i + 1] = 48 + i;     // columns 16..31
  }
  const __m512i low_index = _mm512_load_si512(low), high_index = _mm512_load_si512(high);
  for (int64_t jb = 0; jb < buf.n_blocks; jb += 2) {
    const int64_t col0 = jb * kTileCols, cols = std::min<int64_t>(2 * kTileCols, g.n - col0);
    const __mmask32 mask = static_cast<__mmask32>((uint64_t{1} << cols) - 1);
    uint16_t* dst = buf.packed + jb * pairs * 2 * kTileCols;
    const bool second = jb + 1 < buf.n_blocks;
    for (int64_t kk = 0; kk < pairs; ++kk) {
      const int64_t r0 = 2 * kk, r1 = r0 + 1;
      const __m512i even = r0 < g.k ? _mm512_maskz_loadu_epi16(mask, w + r0 * g.n + col0)
                                    : _mm512_setzero_si512();
      const __m512i odd = r1 < g.k ? _mm512_maskz_loadu_epi16(mask, w + r1 * g.n + col0)
                                   : _mm512_setzero_si512();
      _mm512_store_si512(dst + kk * 2 * kTileCols, _mm512_permutex2var_epi16(even, low_index, odd));
      if (second)
        _mm512_store_si512(dst + (pairs + kk) * 2 * kTileCols,
                           _mm512_permutex2var_epi16(even, high_index, odd));
    }
  }
}

// Output positions [first, min(end, first + 16 * MT)) x columns of the NT
// column blocks from n_block on, from the patches in the buffer.
template <int MT, int NT>
TFRL_AMX_TARGET void TileBlock(const ConvGeometry& g, const AmxConv::Buffers& buf, float* out,
                               int64_t first, int64_t end, int64_t n_block) {
  static_assert(MT * NT <= 4 && (NT == 1 ? MT <= 4 : MT <= 2), "tile budget");
  ForEach<MT * NT>([](auto t) { TileZero<decltype(t)::value>(); });
  const int64_t a_stride = buf.kp * sizeof(uint16_t);
  const int64_t b_block = buf.kp * kTileCols;  // bfloat16 per packed column block
  const uint16_t* b_first = buf.packed + n_block * b_block;
  for (int64_t s = 0; s < buf.kp / kTileK; ++s) {
    const uint16_t* b_step = b_first + s * kTileK * kTileCols;
    const uint16_t* a_step = buf.patches + s * kTileK;
    ForEach<NT>([&](auto j) {
      constexpr int kJ = decltype(j)::value;
      TileLoad<BTile<NT>(kJ)>(b_step + kJ * b_block, 2 * kTileCols * sizeof(uint16_t));
    });
    ForEach<MT>([&](auto i) {
      constexpr int kI = decltype(i)::value;
      TileLoad<ATile<NT>(kI)>(a_step + kI * kTileRows * buf.kp, a_stride);
      ForEach<NT>([&](auto j) {
        constexpr int kJ = decltype(j)::value;
        TileDotBf16<CTile<NT>(kI, kJ), ATile<NT>(kI), BTile<NT>(kJ)>();
      });
    });
  }
  ForEach<MT>([&](auto i) {
    constexpr int kI = decltype(i)::value;
    const int64_t row0 = first + kI * kTileRows;
    const int64_t rows = std::min<int64_t>(kTileRows, end - row0);
    ForEach<NT>([&](auto j) {
      constexpr int kJ = decltype(j)::value;
      const int64_t col0 = (n_block + kJ) * kTileCols;
      const int64_t cols = std::min<int64_t>(kTileCols, g.n - col0);
      if (rows <= 0) return;
      float* dst = out + row0 * g.n + col0;
      if (rows == kTileRows && cols == kTileCols) {
        TileStore<CTile<NT>(kI, kJ)>(dst, g.n * sizeof(float));
      } else {
        TileStore<CTile<NT>(kI, kJ)>(buf.tail, kTileCols * sizeof(float));
        for (int64_t r = 0; r < rows; ++r)
          std::memcpy(dst + r * g.n, buf.tail + r * kTileCols, cols * sizeof(float));
      }
    });
  });
}

}  // namespace

bool AmxBf16Usable() {
  static std::once_flag once;
  static bool usable = false;
  std::call_once(once, [] {
    // TFRL_POPULATION_NO_AMX (any value) forces the portable path.
    if (std::getenv("TFRL_POPULATION_NO_AMX") != nullptr || !CpuHasAmxBf16()) return;
    // Tile data is a dynamically enabled state: the process asks once.
    usable = syscall(SYS_arch_prctl, kArchReqXcompPerm, kXFeatureXTileData) == 0;
  });
  return usable;
}

AmxTileScope::AmxTileScope() {
  // Palette 1, all eight tiles 16 rows x 64 bytes.
  struct alignas(64) {
    uint8_t palette, start_row, reserved[14];
    uint16_t colsb[16];
    uint8_t rows[16];
  } config;
  static_assert(sizeof(config) == 64, "tile configuration is 64 bytes");
  std::memset(&config, 0, sizeof(config));
  config.palette = 1;
  for (int t = 0; t < 8; ++t) {
    config.rows[t] = kTileRows;
    config.colsb[t] = 64;
  }
  asm volatile("ldtilecfg %0" ::"m"(config));
}

AmxTileScope::~AmxTileScope() { asm volatile("tilerelease" ::: "memory"); }

void AmxConv::PackKernel(const uint16_t* kernel) { PackVnni(kernel, g_, buf_); }

TFRL_AMX_TARGET void AmxConv::Compute(const float* image, float* out, int64_t begin,
                                      int64_t end) {
  if (begin >= end) return;
  // The image rows that the patches of [begin, end) read, once to bfloat16.
  const int64_t row_size = g_.w * g_.c;
  const int64_t first_row = begin / g_.out_w * g_.stride;
  const int64_t last_row = (end - 1) / g_.out_w * g_.stride + g_.kernel_size;
  ToBf16(image + first_row * row_size, buf_.image + first_row * row_size,
         (last_row - first_row) * row_size);
  const int64_t tiles = (end - begin + kTileRows - 1) / kTileRows;
  // One column block: four row tiles side by side; more: 2 x 2 tiles.
  const int64_t max_mt = buf_.n_blocks == 1 ? 4 : 2;
  for (int64_t t = 0; t < tiles; t += max_mt) {
    const int mt = static_cast<int>(std::min(max_mt, tiles - t));
    const int64_t first = begin + t * kTileRows;
    BuildPatches(g_, buf_, first, end, mt * kTileRows);
    if (buf_.n_blocks == 1) {
      switch (mt) {
        case 4: TileBlock<4, 1>(g_, buf_, out, first, end, 0); break;
        case 3: TileBlock<3, 1>(g_, buf_, out, first, end, 0); break;
        case 2: TileBlock<2, 1>(g_, buf_, out, first, end, 0); break;
        default: TileBlock<1, 1>(g_, buf_, out, first, end, 0); break;
      }
      continue;
    }
    for (int64_t jb = 0; jb < buf_.n_blocks; jb += 2) {
      const bool pair = jb + 1 < buf_.n_blocks;
      if (mt == 2) {
        if (pair) TileBlock<2, 2>(g_, buf_, out, first, end, jb);
        else TileBlock<2, 1>(g_, buf_, out, first, end, jb);
      } else {
        if (pair) TileBlock<1, 2>(g_, buf_, out, first, end, jb);
        else TileBlock<1, 1>(g_, buf_, out, first, end, jb);
      }
    }
  }
}

#else  // !TFRL_AMX: never usable, so the members below are never called.

bool AmxBf16Usable() { return false; }
AmxTileScope::AmxTileScope() {}
AmxTileScope::~AmxTileScope() {}
void AmxConv::PackKernel(const uint16_t*) { std::abort(); }
void AmxConv::Compute(const float*, float*, int64_t, int64_t) { std::abort(); }

#endif  // TFRL_AMX

// Output positions per AMX work item (four 16-row tiles).
constexpr int64_t kAmxPositions = 64;

// The AMX path: work units are runs of (image, 64 output positions) items of
// one network's bucket; a unit packs its network's kernel once and computes
// its items in tiles. Inactive rows of y are zeroed.
void RunAmxConv(tensorflow::OpKernelContext* ctx, const ConvGeometry& g,
                const tensorflow::Tensor& index, const tensorflow::Tensor& active, int64_t pop,
                const uint16_t* w, const float* x, float* y, const Epilogue& epilogue) {
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
    AmxTileScope tiles;  // this thread's tiles, released at the end
    AmxConv conv(g);
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

}  // namespace population
}  // namespace tfrl
