// Registers PopulationMatmul, PopulationConv2D and PopulationDeltaNet: the
// masked heterogeneous batching ops of tfrl's neuroevolution (Uber AI's
// accelerated deep neuroevolution, Such et al. 2018); and
// PopulationKernelInfo, which says which ISA build they run. The per-layer
// PopulationDeltaConv2D is registered in population_delta_conv2d_ops.cc, in
// the library only when built with TFRL_BUILD_DELTA_CONV2D=1.

#include <string>

#include "tensorflow/core/framework/common_shape_fns.h"
#include "tensorflow/core/framework/op.h"
#include "tensorflow/core/framework/shape_inference.h"
#include "population_shape_fns.h"

namespace tensorflow {

using shape_inference::DimensionHandle;
using shape_inference::InferenceContext;
using shape_inference::ShapeHandle;

// The epilogue attr of both ops: what is applied to each active output row
// after its matmul, while the row is still in cache.
#define TFRL_EPILOGUE_ATTR "epilogue: {'none', 'bias', 'relu', 'bias_relu'} = 'none'"

// bias must be [P, N] when the epilogue adds it (checked again by the kernel).
static Status CheckBiasShape(InferenceContext* c, ShapeHandle w) {
  std::string epilogue;
  TF_RETURN_IF_ERROR(c->GetAttr("epilogue", &epilogue));
  if (epilogue != "bias" && epilogue != "bias_relu") return OkStatus();
  ShapeHandle bias;
  TF_RETURN_IF_ERROR(c->WithRank(c->input(4), 2, &bias));
  DimensionHandle unused;
  TF_RETURN_IF_ERROR(c->Merge(c->Dim(bias, 0), c->Dim(w, 0), &unused));
  return c->Merge(c->Dim(bias, 1), c->Dim(w, 2), &unused);
}

REGISTER_OP("PopulationMatmul")
    .Input("x: float")
    .Input("w: T")
    .Input("index: int32")
    .Input("active: bool")
    .Input("bias: float")
    .Output("y: float")
    .Attr("T: {float, bfloat16} = DT_FLOAT")
    .Attr(TFRL_EPILOGUE_ATTR)
    .SetShapeFn([](InferenceContext* c) {
      ShapeHandle x, w, index, active;
      TF_RETURN_IF_ERROR(c->WithRank(c->input(0), 3, &x));
      TF_RETURN_IF_ERROR(c->WithRank(c->input(1), 3, &w));
      TF_RETURN_IF_ERROR(c->WithRank(c->input(2), 1, &index));
      TF_RETURN_IF_ERROR(c->WithRank(c->input(3), 1, &active));
      TF_RETURN_IF_ERROR(CheckBiasShape(c, w));
      DimensionHandle batch = c->Dim(x, 0);
      TF_RETURN_IF_ERROR(c->Merge(batch, c->Dim(index, 0), &batch));
      TF_RETURN_IF_ERROR(c->Merge(batch, c->Dim(active, 0), &batch));
      DimensionHandle k;
      TF_RETURN_IF_ERROR(c->Merge(c->Dim(x, 2), c->Dim(w, 1), &k));
      c->set_output(0, c->MakeShape({batch, c->Dim(x, 1), c->Dim(w, 2)}));
      return OkStatus();
    })
    .Doc(R"doc(
Multiplies each row of a batch by the weight matrix of its own network.

For every b with active[b]: y[b] = matmul(x[b], w[index[b]]); rows with
active[b] == false are set to zero and cost no arithmetic. Rows that name the
same network are grouped and computed as one GEMM (the weight matrix is read
once per block of rows), and the groups are spread over the intra-op threads.
Each output element is accumulated in a fixed order, so results do not depend
on the thread count or on which other rows are in the batch.

Dense layers use M = 1; convolutions use M = number of patches (im2col, e.g.
tf.image.extract_patches) with K = kh * kw * c_in.

The op has no gradient: neuroevolution is gradient-free.

x: [B, M, K] float32 inputs.
w: [P, K, N] float32 or bfloat16 weights of a population of P networks;
  bfloat16 weights are widened to float32 exactly and the arithmetic is
  float32 (half the bytes to read per step).
index: [B] int32, the network of each row; must lie in [0, P) where active.
active: [B] bool, the rows to compute (e.g. episodes still running).
bias: [P, N] float32 biases when the epilogue adds them; ignored (pass an
  empty tensor) otherwise.
epilogue: applied to every active row after its matmul: 'bias' adds
  bias[index[b]], 'relu' takes max(y, 0) (NaN stays NaN), 'bias_relu' both,
  in that order; inactive rows stay zero.
y: [B, M, N] float32.
)doc");

REGISTER_OP("PopulationConv2D")
    .Input("x: TX")
    .Input("w: T")
    .Input("index: int32")
    .Input("active: bool")
    .Input("bias: float")
    .Output("y: float")
    .Attr("T: {float, bfloat16} = DT_FLOAT")
    .Attr("TX: {float, uint8} = DT_FLOAT")
    .Attr("kernel_size: int >= 1")
    .Attr("stride: int >= 1")
    .Attr("input_dtype: {'float32', 'bfloat16'} = 'float32'")
    .Attr("input_scale: float = 1.0")
    .Attr(TFRL_EPILOGUE_ATTR)
    .SetShapeFn([](InferenceContext* c) {
      ShapeHandle x, w, index, active;
      TF_RETURN_IF_ERROR(c->WithRank(c->input(0), 4, &x));
      TF_RETURN_IF_ERROR(c->WithRank(c->input(1), 3, &w));
      TF_RETURN_IF_ERROR(c->WithRank(c->input(2), 1, &index));
      TF_RETURN_IF_ERROR(c->WithRank(c->input(3), 1, &active));
      TF_RETURN_IF_ERROR(CheckBiasShape(c, w));
      int64_t ks, stride;
      TF_RETURN_IF_ERROR(c->GetAttr("kernel_size", &ks));
      TF_RETURN_IF_ERROR(c->GetAttr("stride", &stride));
      DimensionHandle batch = c->Dim(x, 0);
      TF_RETURN_IF_ERROR(c->Merge(batch, c->Dim(index, 0), &batch));
      TF_RETURN_IF_ERROR(c->Merge(batch, c->Dim(active, 0), &batch));
      DimensionHandle k;
      TF_RETURN_IF_ERROR(c->Multiply(c->Dim(x, 3), ks * ks, &k));
      TF_RETURN_IF_ERROR(c->Merge(k, c->Dim(w, 1), &k));
      DimensionHandle out[2];
      TF_RETURN_IF_ERROR(ConvOutputSize(c, x, ks, stride, "PopulationConv2D", out));
      c->set_output(0, c->MakeShape({batch, out[0], out[1], c->Dim(w, 2)}));
      return OkStatus();
    })
    .Doc(R"doc(
A VALID convolution of each row with its own network's kernel.

For every b with active[b]: y[b] = conv2d(x[b], w[index[b]] reshaped to
[kernel_size, kernel_size, C, N], stride, "VALID"); inactive rows are zero and
cost nothing. Equal to PopulationMatmul on the im2col patches of x
(tf.image.extract_patches, K ordered (kh, kw, C)), but the patches are read in
place from x, so no im2col buffer is written. Rows of one network are one GEMM.

With input_dtype = 'bfloat16' (bfloat16 kernels only) every input value is
first rounded to bfloat16 (to nearest, ties to even, as tf.cast) and the
products are accumulated in float32: the result is the float32 convolution of
the bfloat16-rounded input with the bfloat16 kernel, up to summation order.
The rounded input goes through the float32 GEMM. A library built with the
AMX option (TFRL_BUILD_AMX=1; off by default) runs this in AMX tiles
(TDPBF16PS) instead on CPUs with AMX-BF16 (and the tile permission granted by
the OS), unless the environment variable TFRL_POPULATION_NO_AMX is set; the
tiles treat float32 and bfloat16 subnormals as zero.

The op has no gradient: neuroevolution is gradient-free.

Input values are float(x) * input_scale (a uint8 frame and 1/255 give the
[0, 1] floats of the usual preprocessing, without a float copy of the batch
in the graph); the epilogue is that of PopulationMatmul.

x: [B, H, W, C] float32 or uint8.
w: [P, kernel_size * kernel_size * C, N] float32 or bfloat16 (widened
  exactly, float32 arithmetic).
input_dtype: 'float32', or 'bfloat16' to round x to bfloat16 first (needs
  T = bfloat16).
index: [B] int32 network of each row, in [0, P) where active.
active: [B] bool rows to compute.
bias: [P, N] float32 when the epilogue adds a bias, else ignored.
input_scale: every input value is multiplied by it (before any bfloat16
  rounding).
epilogue: 'none', 'bias', 'relu' or 'bias_relu', as in PopulationMatmul.
y: [B, (H - kernel_size) / stride + 1, (W - kernel_size) / stride + 1, N].
)doc");

REGISTER_OP("PopulationDeltaNet")
    .Input("obs: TX")
    .Input("obs_prev: TX")
    .Input("acc_prev: L * float")
    .Input("w: L * T")
    .Input("bias: L * float")
    .Input("index: int32")
    .Input("fresh: bool")
    .Output("logits: float")
    .Output("acc: L * float")
    .Attr("L: int >= 1")
    .Attr("T: {float, bfloat16} = DT_FLOAT")
    .Attr("TX: {float, uint8} = DT_FLOAT")
    .Attr("kernel_sizes: list(int)")
    .Attr("strides: list(int)")
    .Attr("relus: list(bool)")
    .Attr("input_scale: float = 1.0")
    .Attr("circulant_blocks: list(int) = []")
    .SetShapeFn([](InferenceContext* c) {
      int64_t layers;
      std::vector<int32> blocks;
      TF_RETURN_IF_ERROR(c->GetAttr("circulant_blocks", &blocks));
      TF_RETURN_IF_ERROR(c->GetAttr("L", &layers));
      ShapeHandle obs, obs_prev, index, fresh;
      TF_RETURN_IF_ERROR(c->WithRank(c->input(0), 4, &obs));
      TF_RETURN_IF_ERROR(c->WithRank(c->input(1), 4, &obs_prev));
      TF_RETURN_IF_ERROR(c->Merge(obs, obs_prev, &obs));
      const int first_index = 2 + 3 * static_cast<int>(layers);
      TF_RETURN_IF_ERROR(c->WithRank(c->input(first_index), 1, &index));
      TF_RETURN_IF_ERROR(c->WithRank(c->input(first_index + 1), 1, &fresh));
      DimensionHandle batch = c->Dim(obs, 0);
      TF_RETURN_IF_ERROR(c->Merge(batch, c->Dim(index, 0), &batch));
      TF_RETURN_IF_ERROR(c->Merge(batch, c->Dim(fresh, 0), &batch));
      ShapeHandle w, bias;
      for (int i = 0; i < layers; ++i) {
        ShapeHandle acc;
        TF_RETURN_IF_ERROR(c->WithRank(c->input(2 + i), 4, &acc));
        TF_RETURN_IF_ERROR(c->WithRank(c->input(2 + layers + i), 3, &w));
        TF_RETURN_IF_ERROR(c->WithRank(c->input(2 + 2 * layers + i), 2, &bias));
        DimensionHandle unused;
        TF_RETURN_IF_ERROR(c->Merge(c->Dim(acc, 0), batch, &unused));
        TF_RETURN_IF_ERROR(c->Merge(c->Dim(acc, 3), c->Dim(bias, 1), &unused));
        const bool circulant = i < static_cast<int>(blocks.size()) && blocks[i] > 0;
        if (!circulant) TF_RETURN_IF_ERROR(c->Merge(c->Dim(acc, 3), c->Dim(w, 2), &unused));
        c->set_output(1 + i, acc);
      }
      c->set_output(0, c->Matrix(batch, c->Dim(bias, 1)));
      return OkStatus();
    })
    .Doc(R"doc(
One step of incremental inference of a whole population network: its L
layers' incremental convolutions chained, in one op.

Layer i convolves (VALID, kernel_sizes[i], strides[i]) its input with
w[i][index[b]] into acc[i]; layer 0's input is obs * input_scale, layer i's
(i >= 1) is acc[i - 1] + bias[i - 1][index[b]], then max(., 0) if
relus[i - 1]. logits = acc[L - 1] + bias[L - 1][index[b]]. Rows that are
fresh compute every layer in full; the other rows update acc_prev by the
change of obs since obs_prev: only the input values that changed cost
arithmetic, and the sums run over the nonzero input values (a zero input
adds nothing, even times an inf or NaN weight). The result equals the full
computation up to float rounding, which accumulates step by step, so callers
mark a row fresh now and then (and whenever its network or episode changes).
An output whose updated value is not finite is recomputed from its whole
window, so a non-finite input value reaches only the steps whose input holds
it. Each acc_prev[i] is updated in place when TensorFlow lets the op reuse
its buffer, and a layer's input changes are read off the outputs the layer
below updated. The results are bitwise those of the per-layer
PopulationDeltaConv2D ops chained (NaN payloads aside), which a library
built with TFRL_BUILD_DELTA_CONV2D=1 has.

obs, obs_prev: [B, H, W, C] float32 or uint8 (obs_prev ignored where fresh).
acc_prev: L tensors [B, OH_i, OW_i, N_i] float32, acc at the previous step.
w: L tensors [P, kernel_sizes[i]^2 * C_i, N_i] float32 or bfloat16; a layer
  with circulant_blocks[i] = b > 0: float32 [P, Q * I, 2b], its
  block-circulant kernel kept compact (Q = ceil(N_i / b) output and
  I = ceil(K_i / b) input blocks, block (q, p)'s vector v of
  tfrl.layers.circulant's layout stored twice: [v, v]); b a multiple of 16.
bias: L tensors [P, N_i] float32.
index: [B] int32 network of each row, in [0, P).
fresh: [B] bool rows to compute in full.
relus: L - 1 bools, whether layer i's output goes through max(., 0).
circulant_blocks: none, or L block sizes (0: a dense kernel). A circulant
  kernel's values and sums are those of its expanded kernel: the outputs are
  bitwise the same, from 2 / b of the kernel's bytes.
logits: [B, N_{L-1}]; the last layer must be dense (1x1 output positions).
acc: the new acc, shaped as acc_prev.
)doc");

REGISTER_OP("PopulationKernelInfo")
    .Output("isa: string")
    .Output("cpu_isas: string")
    .Output("amx: bool")
    .Output("path_names: string")
    .Output("path_calls: int64")
    .Output("options: string")
    .SetIsStateful()
    .SetShapeFn([](InferenceContext* c) {
      c->set_output(0, c->Scalar());
      c->set_output(1, c->Vector(c->UnknownDim()));
      c->set_output(2, c->Scalar());
      c->set_output(3, c->Vector(c->UnknownDim()));
      c->set_output(4, c->Vector(c->UnknownDim()));
      c->set_output(5, c->Vector(c->UnknownDim()));
      return OkStatus();
    })
    .Doc(R"doc(
Which builds the population kernels of this process run, and how often each ran.

Every kernel (GEMM, convolution, delta ops) is compiled three times: AVX-512
(F, DQ, BW), AVX2 + FMA, and the baseline ('sse' on x86-64, 'portable'
elsewhere). One build is chosen per process: the one PopulationSelectIsa
chose, else the widest the CPU runs; the environment variable
TFRL_POPULATION_ISA (avx512, avx2, sse, portable, amx or auto), read once,
overrides both. A name the CPU cannot run, or an unknown one, in the
variable fails every population op (and this one) with InvalidArgument
instead of running another build.

isa: the build chosen for this process.
cpu_isas: the builds this CPU runs, widest first.
amx: whether the bfloat16-input convolution runs in AMX tiles (the library
  is built with the AMX option, the CPU and OS allow the tiles,
  TFRL_POPULATION_NO_AMX is unset and amx or auto chose the AVX-512 build).
path_names: ['sse' or 'portable', 'avx2', 'avx512', 'amx', 'gemm_streamed',
  'gemm_k_chunked', 'gemm_tiles', 'delta_circulant'].
path_calls: how many op calls computed on each path so far in this process
  (for the GEMM strategies: GEMM calls, one per network's rows of a layer or
  a chunk of them; delta_circulant: PopulationDeltaNet calls with a compact
  circulant kernel).
options: the optional parts compiled into the library, off by default:
  'amx' (TFRL_BUILD_AMX=1), 'delta_conv2d' (TFRL_BUILD_DELTA_CONV2D=1).
)doc");

REGISTER_OP("PopulationSelectIsa")
    .Attr("isa: {'auto', 'amx', 'avx512', 'avx2', 'sse', 'portable'} = 'auto'")
    .Output("running: string")
    .SetIsStateful()
    .SetShapeFn([](InferenceContext* c) {
      c->set_output(0, c->Scalar());
      return OkStatus();
    })
    .Doc(R"doc(
Chooses the build the population kernels of this process run, and says which runs.

The choice is made once per process: by the first call of this op, or else
by the first population kernel built (as with isa = 'auto'). isa: 'auto'
(the widest build the CPU runs, with AMX tiles where usable, or whichever
build was already chosen), 'amx' (the AVX-512 build with the AMX tiles of
the bfloat16-input convolution, in a library built with the AMX option),
'avx512', 'avx2', 'sse' or 'portable' (both the baseline). The environment
variable TFRL_POPULATION_ISA, when set, overrides isa.

running: the build that runs: 'amx', 'avx512', 'avx2', 'sse' or 'portable'.

A build this CPU (or this library) cannot run is InvalidArgument, and
chooses nothing; another build than isa (not 'auto') chosen already is
FailedPrecondition.
)doc");

}  // namespace tensorflow
