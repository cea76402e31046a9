// Shape-function helpers shared by the population ops' registrations
// (population_ops.cc, population_delta_conv2d_ops.cc).

#ifndef TFRL_CUSTOM_OPS_POPULATION_SHAPE_FNS_H_
#define TFRL_CUSTOM_OPS_POPULATION_SHAPE_FNS_H_

#include <cstdint>

#include "tensorflow/core/framework/shape_inference.h"

namespace tensorflow {

// The VALID output height and width of a square kernel over x [B, H, W, C];
// fails when a known spatial size is smaller than the kernel.
inline Status ConvOutputSize(shape_inference::InferenceContext* c,
                             shape_inference::ShapeHandle x, int64_t ks, int64_t stride,
                             const char* op, shape_inference::DimensionHandle out[2]) {
  for (int d = 0; d < 2; ++d) {
    shape_inference::DimensionHandle size = c->Dim(x, 1 + d);
    if (c->ValueKnown(size)) {
      const int64_t v = c->Value(size);
      if (v < ks) {
        return errors::InvalidArgument(op, ": spatial size ", v, " is smaller than kernel_size ",
                                       ks);
      }
      out[d] = c->MakeDim((v - ks) / stride + 1);
    } else {
      out[d] = c->UnknownDim();
    }
  }
  return OkStatus();
}

}  // namespace tensorflow

#endif  // TFRL_CUSTOM_OPS_POPULATION_SHAPE_FNS_H_
