// The grouped GEMM of PopulationMatmul and PopulationConv2D: one network's
// rows times its [K, N] weights, with A and C rows addressed through row
// pointers (no gather copy of x, no copy of w; for convolutions the A rows
// are the image patches read in place, so there is no im2col buffer either).
// The micro-kernels are in population_gemm.cc, written with GCC vector
// extensions and compiled for each ISA build (population_isa.h).
//
// Weights come as float32 or bfloat16 (TW = uint16_t, the bits): each weight
// is widened to float32 exactly on load and the arithmetic is float32, so the
// result is the float32 product with the bfloat16-rounded weights.

#ifndef TFRL_CUSTOM_OPS_POPULATION_GEMM_H_
#define TFRL_CUSTOM_OPS_POPULATION_GEMM_H_

#include <cstdint>

#include "tensorflow/core/platform/status.h"
#include "population_isa.h"

namespace tfrl {
namespace population {

// One GEMM: C rows (c[i], N floats each) = A rows x B, where B is [K, N]
// row-major. A row is `num_seg` segments of `seg_len` floats, segment s
// starting at a[i] + s * seg_stride (K = num_seg * seg_len): one contiguous
// segment for dense layers; for a convolution, the kh image rows of one patch
// (kw * c_in floats each, W * c_in apart), read in place with no im2col copy.
//
// The path depends on the rows and N: 1-2 rows against N >= 64 stream B
// once in address order; 3-8 rows against N >= 64 run K-chunked register
// tiles; otherwise register-blocked tiles over all of K. Every path adds in
// the same order (K ascending from zero), so a row's result does not depend
// on the path its bucket took.
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

template <typename TW>
using GemmFn = void (*)(const GemmArgs<TW>&);

// The strategy a GEMM of `rows` rows against N = `n` columns takes (above):
// Path::kGemmStreamed, kGemmKChunked or kGemmTiles. The ops tally their GEMM
// calls by it for PopulationKernelInfo, once per op call rather than from
// inside the GEMM, where the atomic counters cost a few percent.
constexpr int kStreamRows = 8;
constexpr int64_t kStreamMinN = 64;
inline Path GemmPath(int64_t rows, int64_t n) {
  if (rows <= kStreamRows && n >= kStreamMinN) {
    return rows <= 2 ? Path::kGemmStreamed : Path::kGemmKChunked;
  }
  return Path::kGemmTiles;
}

// The GEMM build of this process (ActiveIsa) into *gemm, and *isa; TW is
// float or uint16_t (bfloat16 bits).
template <typename TW>
tensorflow::Status PickGemm(GemmFn<TW>* gemm, Isa* isa);

extern template tensorflow::Status PickGemm<float>(GemmFn<float>*, Isa*);
extern template tensorflow::Status PickGemm<uint16_t>(GemmFn<uint16_t>*, Isa*);

// What follows a row's matmul (the ops' `epilogue` attr): y += bias[p], then
// y = max(y, 0), on rows still in cache, instead of two more ops (and two
// more passes over the batch) in the graph.
struct Epilogue {
  const float* bias = nullptr;  // [P, N], or null: no bias
  bool relu = false;
  bool Any() const { return bias != nullptr || relu; }
};

// Applies `ep` to `rows` rows of N floats of network p.
inline void ApplyEpilogue(const Epilogue& ep, int64_t p, int64_t n, float* const* c,
                          int64_t rows) {
  const float* bias = ep.bias != nullptr ? ep.bias + p * n : nullptr;
  for (int64_t r = 0; r < rows; ++r) {
    float* y = c[r];
    if (bias != nullptr)
      for (int64_t j = 0; j < n; ++j) y[j] += bias[j];
    if (ep.relu)  // NaN < 0 is false: NaN stays NaN, as tf.nn.relu.
      for (int64_t j = 0; j < n; ++j) y[j] = y[j] < 0.f ? 0.f : y[j];
  }
}

}  // namespace population
}  // namespace tfrl

#endif  // TFRL_CUSTOM_OPS_POPULATION_GEMM_H_
