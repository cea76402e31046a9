// Registers PopulationDeltaConv2D, the per-layer op of incremental inference.
// Built only with TFRL_BUILD_DELTA_CONV2D=1 (Bazel:
// --define=tfrl_delta_conv2d=1): production runs PopulationDeltaNet, the
// whole network in one op (population_ops.cc), which measured cheaper on the
// same work (docs/performance_notes.md); this op is kept buildable for that
// comparison (benchmarks/delta_layers.py).

#include "tensorflow/core/framework/op.h"
#include "tensorflow/core/framework/shape_inference.h"
#include "population_shape_fns.h"

namespace tensorflow {

using shape_inference::DimensionHandle;
using shape_inference::InferenceContext;
using shape_inference::ShapeHandle;

REGISTER_OP("PopulationDeltaConv2D")
    .Input("x: TX")
    .Input("x_prev: TX")
    .Input("acc_prev: float")
    .Input("w: T")
    .Input("index: int32")
    .Input("fresh: bool")
    .Input("input_bias: float")
    .Output("acc: float")
    .Attr("T: {float, bfloat16} = DT_FLOAT")
    .Attr("TX: {float, uint8} = DT_FLOAT")
    .Attr("kernel_size: int >= 1")
    .Attr("stride: int >= 1")
    .Attr("input_scale: float = 1.0")
    .Attr("input_relu: bool = false")
    .SetShapeFn([](InferenceContext* c) {
      ShapeHandle x, x_prev, w, index, fresh;
      TF_RETURN_IF_ERROR(c->WithRank(c->input(0), 4, &x));
      TF_RETURN_IF_ERROR(c->WithRank(c->input(1), 4, &x_prev));
      TF_RETURN_IF_ERROR(c->Merge(x, x_prev, &x));
      TF_RETURN_IF_ERROR(c->WithRank(c->input(3), 3, &w));
      TF_RETURN_IF_ERROR(c->WithRank(c->input(4), 1, &index));
      TF_RETURN_IF_ERROR(c->WithRank(c->input(5), 1, &fresh));
      int64_t ks, stride;
      TF_RETURN_IF_ERROR(c->GetAttr("kernel_size", &ks));
      TF_RETURN_IF_ERROR(c->GetAttr("stride", &stride));
      DimensionHandle batch = c->Dim(x, 0);
      TF_RETURN_IF_ERROR(c->Merge(batch, c->Dim(index, 0), &batch));
      TF_RETURN_IF_ERROR(c->Merge(batch, c->Dim(fresh, 0), &batch));
      DimensionHandle k;
      TF_RETURN_IF_ERROR(c->Multiply(c->Dim(x, 3), ks * ks, &k));
      TF_RETURN_IF_ERROR(c->Merge(k, c->Dim(w, 1), &k));
      DimensionHandle out[2];
      TF_RETURN_IF_ERROR(ConvOutputSize(c, x, ks, stride, "PopulationDeltaConv2D", out));
      ShapeHandle acc = c->MakeShape({batch, out[0], out[1], c->Dim(w, 2)});
      ShapeHandle acc_prev;
      TF_RETURN_IF_ERROR(c->WithRank(c->input(2), 4, &acc_prev));
      TF_RETURN_IF_ERROR(c->Merge(acc, acc_prev, &acc));
      c->set_output(0, acc);
      return OkStatus();
    })
    .Doc(R"doc(
One step of incremental (delta) inference of a population convolution.

For every row b: acc[b] is the VALID convolution (no bias) of u[b] with the
kernel of network index[b], where u = f(x), f(v) = v * input_scale +
input_bias[index[b], channel], then max(., 0) if input_relu. Rows with
fresh[b] compute it in full. The other rows compute it as
acc_prev[b] + conv(f(x[b]) - f(x_prev[b])): only the input elements that
changed since the previous step cost arithmetic (in Atari frames well under
1%, and a few percent of a convolution's outputs), which equals the full
convolution up to float rounding when acc_prev[b] is the convolution of
f(x_prev[b]). The rounding differences accumulate step by step, so callers
mark a row fresh now and then (and whenever its network or episode changes).
An output whose updated value is not finite (an input value in its window
became or stopped being inf or NaN, or a sum overflowed) is recomputed from
its whole window instead, so a non-finite input value reaches only the steps
whose input holds it, as in the full convolution (inf - inf in the
accumulator does not poison the steps after).

A dense layer is the same op with kernel_size equal to the spatial size of x
(x [B, 1, 1, K] and kernel_size 1 for a flat input), K ordered (h, w, C) as a
flattened feature map.

The op has no gradient: neuroevolution is gradient-free.

x: [B, H, W, C] float32 or uint8, this step's input (e.g. frames, or the
  previous layer's acc with its bias and relu given by input_bias and
  input_relu).
x_prev: the same for the previous step (ignored where fresh).
acc_prev: [B, (H - kernel_size) / stride + 1, (W - kernel_size) / stride + 1,
  N] float32, this op's output at the previous step (ignored where fresh).
w: [P, kernel_size * kernel_size * C, N] float32 or bfloat16 (widened
  exactly, float32 arithmetic).
index: [B] int32 network of each row, in [0, P).
fresh: [B] bool rows to compute in full.
input_bias: [P, C] float32 added to the input values of each row's network,
  or shape [0, 0] for none (any other shape is refused).
input_scale: every input value is multiplied by it before the bias.
input_relu: whether f ends with max(., 0).
acc: the output, shaped as acc_prev.
)doc");

}  // namespace tensorflow
