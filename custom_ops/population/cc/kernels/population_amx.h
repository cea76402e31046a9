// The AMX bfloat16 path of PopulationConv2D (input_dtype = "bfloat16"), in
// the library only when it is built with TFRL_BUILD_AMX=1 (Bazel:
// --define=tfrl_amx=1), which compiles population_amx.cc and defines
// TFRL_POPULATION_AMX for the other population sources. Off by default: no
// preset rounds its convolution inputs to bfloat16, and none of the machines
// measured since the path was written has AMX (docs/performance_notes.md).
//
// A convolution of one image with one network's kernel is a GEMM whose A rows
// are the image's patches. Here the image rows a work item reads are rounded
// to bfloat16 (round to nearest even) once, the patches are copied from that
// bfloat16 image into a small im2col buffer, four 16-row tiles at a time; the
// network's [K, N] bfloat16 kernel is packed once per work unit into the VNNI
// pair layout that TDPBF16PS reads; the products are accumulated in float32 in
// AMX tiles (up to four independent accumulator tiles in flight) and stored
// straight into the output rows.
//
// Everything that executes AMX or AVX-512 instructions is compiled with
// function-level target attributes in population_amx.cc and only runs after
// AmxBf16Usable() said yes, so the library loads and runs on any x86-64 CPU.

#ifndef TFRL_CUSTOM_OPS_POPULATION_AMX_H_
#define TFRL_CUSTOM_OPS_POPULATION_AMX_H_

#include <cstdint>
#include <vector>

#include "tensorflow/core/framework/op_kernel.h"
#include "tensorflow/core/framework/tensor.h"
#include "population_gemm.h"

namespace tfrl {
namespace population {

// A VALID convolution of one [h, w, c] image, as a GEMM of m = out_h * out_w
// rows, k = kernel_size^2 * c and n output channels.
struct ConvGeometry {
  int64_t h, w, c;
  int64_t kernel_size, stride;
  int64_t out_w;
  int64_t m, k, n;
};

// Whether the AMX path may run: the CPU has AMX-TILE, AMX-BF16, AVX512-BF16,
// AVX512F/BW/VL, the OS enables the tile state and grants this process the
// XTILEDATA permission (requested once per process), and the environment
// variable TFRL_POPULATION_NO_AMX is unset (=1 forces the portable path, for
// tests and comparisons). Decided once per process.
bool AmxBf16Usable();

// Configures the calling thread's tiles on construction and releases them on
// destruction. Tile state is per thread: open one scope per run of work units
// on an intra-op thread, around the AmxConv::Compute calls.
class AmxTileScope {
 public:
  AmxTileScope();
  ~AmxTileScope();
  AmxTileScope(const AmxTileScope&) = delete;
  AmxTileScope& operator=(const AmxTileScope&) = delete;
};

// One thread's working memory for convolutions of one geometry.
class AmxConv {
 public:
  explicit AmxConv(const ConvGeometry& g);

  // Packs one network's [k, n] bfloat16 kernel (raw bits, row-major) into
  // the VNNI layout, zero-padded to whole tiles.
  void PackKernel(const uint16_t* kernel);

  // out[q, :] = patch(q) . kernel for output positions q in [begin, end) of
  // `image` ([h, w, c] float32; the patch rounded to bfloat16); `out` is the
  // image's [m, n] float32 output. Needs an AmxTileScope on this thread and
  // a packed kernel.
  void Compute(const float* image, float* out, int64_t begin, int64_t end);

  // Buffers of the tile loops in population_amx.cc.
  struct Buffers {
    int64_t kp;         // k rounded up to a whole K step (32 bfloat16)
    int64_t n_blocks;   // 16-column blocks of n
    uint16_t* packed;   // [n_blocks][kp / 2][16][2], 64-byte aligned
    uint16_t* patches;  // [64][kp]: up to 4 tiles of patches, 64-byte aligned
    uint16_t* image;    // [h, w, c]: the image in bfloat16
    float* tail;        // [16][16]: tiles that do not fill the output
  };

 private:
  const ConvGeometry g_;
  std::vector<uint16_t> packed_storage_, patch_storage_, image_storage_;
  std::vector<float> tail_storage_;
  Buffers buf_;
};

// PopulationConv2D's bfloat16-input convolution of the active rows of x
// ([B, g.h, g.w, g.c] float32) into y ([B, g.m, g.n]) in AMX tiles, with
// the kernels w ([P, g.k, g.n] bfloat16 bits) and the epilogue; inactive
// rows of y are zeroed. Only where AmxActive() (population_isa.h).
void RunAmxConv(tensorflow::OpKernelContext* ctx, const ConvGeometry& g,
                const tensorflow::Tensor& index, const tensorflow::Tensor& active, int64_t pop,
                const uint16_t* w, const float* x, float* y, const Epilogue& epilogue);

}  // namespace population
}  // namespace tfrl

#endif  // TFRL_CUSTOM_OPS_POPULATION_AMX_H_
