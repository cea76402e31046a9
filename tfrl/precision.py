"""Which dtype a network computes in, chosen from the CPU, and which one ran.

Mixed precision as tfrl uses it: variables, the loss and the optimizer state
stay float32; a network built with `compute_dtype=tf.bfloat16` casts its
scaled input and every kernel to bfloat16, so its convolutions and matmuls
run in bfloat16 (oneDNN accumulates their sums in float32), and casts its
outputs back to float32 before any softmax or loss.

    choice = precision.resolve("auto")          # reads /proc/cpuinfo
    net = networks.ActorCritic(n, networks.AtariTorso(compute_dtype=choice.dtype))
    ...
    precision.matmul_dtypes(train_step.get_concrete_function())  # ['bfloat16']

`auto` picks bfloat16 only where the CPU does bfloat16 arithmetic in
hardware (AVX-512 BF16 or AMX-BF16: Zen 4, Sapphire Rapids and later) and
only for image (conv) networks; elsewhere TF emulates bfloat16 and the small
MLP torsos have too little arithmetic to gain. `matmul_dtypes` reads the
dtypes of the convolutions and matmuls a traced function actually holds, so a
run reports the precision it ran, not the one it was asked for.
"""

import dataclasses
from typing import FrozenSet, List, Optional

import tensorflow as tf

from tfrl.precision_choices import CHOICES  # re-exported: precision.CHOICES
# /proc/cpuinfo flags of CPUs with bfloat16 arithmetic in hardware.
BF16_CPU_FLAGS = ("avx512_bf16", "amx_bf16")
# Ops whose dtype is the compute dtype: forward and gradient convolutions and
# matmuls (and oneDNN's fused forms, should a graph already hold them); Einsum
# is the circulant layers' complex64 product of FFTs.
_COMPUTE_OPS = frozenset((
    "Conv2D", "Conv2DBackpropInput", "Conv2DBackpropFilter", "MatMul",
    "BatchMatMulV2", "BatchMatMulV3", "Einsum", "_FusedConv2D", "_FusedMatMul",
    "_MklFusedConv2D", "_MklFusedMatMul"))


def cpu_flags(path: str = "/proc/cpuinfo") -> FrozenSet[str]:
  """The CPU's feature flags (empty where there is no /proc/cpuinfo)."""
  try:
    with open(path) as f:
      for line in f:
        if line.startswith("flags"):
          return frozenset(line.split(":", 1)[1].split())
  except OSError:
    pass
  return frozenset()


@dataclasses.dataclass(frozen=True)
class Precision:
  """A resolved choice: `name` is `float32` or `bfloat16`; `requested` what
  the user asked for; `reason` one line saying why."""

  name: str
  requested: str
  reason: str

  @property
  def dtype(self) -> tf.DType:
    return tf.as_dtype(self.name)


def resolve(requested: str, *, image_network: bool = True,
            flags: Optional[FrozenSet[str]] = None) -> Precision:
  """The precision `requested` (`auto`, `float32` or `bfloat16`) means here.

  Args:
    requested: one of CHOICES; `float32` and `bfloat16` force that dtype.
    image_network: whether the network is a conv net (`auto` keeps MLPs in
      float32).
    flags: CPU flags (default: this machine's, from /proc/cpuinfo).
  """
  if requested not in CHOICES:
    raise ValueError(f"precision must be one of {', '.join(CHOICES)}; got {requested!r}.")
  if requested != "auto":
    return Precision(requested, requested, f"--precision={requested}")
  flags = cpu_flags() if flags is None else flags
  found = [f for f in BF16_CPU_FLAGS if f in flags]
  if not found:
    return Precision("float32", requested, "auto: the CPU has no AVX-512 BF16 or AMX-BF16")
  if not image_network:
    return Precision("float32", requested, "auto: MLP network, too small to gain from bfloat16")
  return Precision("bfloat16", requested, f"auto: the CPU has {' and '.join(found)}")


def check_compute_dtype(dtype, cls: str) -> tf.DType:
  """`dtype` as a tf.DType if a network can compute in it (float32 or
  bfloat16), else a ValueError naming `cls`."""
  dtype = tf.as_dtype(dtype)
  if dtype not in (tf.float32, tf.bfloat16):
    raise ValueError(f"{cls}: compute_dtype must be float32 or bfloat16, got {dtype.name}.")
  return dtype


def to_compute(x: tf.Tensor, dtype: tf.DType) -> tf.Tensor:
  """`x` in the compute dtype; the tensor itself when it already is (so a
  float32 network's graph is exactly what it was without mixed precision)."""
  return x if x.dtype == dtype else tf.cast(x, dtype)


def _function_defs(graph_def):
  yield graph_def.node
  for function in graph_def.library.function:
    yield function.node_def


def matmul_dtypes(concrete_function) -> List[str]:
  """Sorted dtype names of the convolutions and matmuls in a traced function
  and every function it calls (e.g. `['bfloat16']`)."""
  graph_def = concrete_function.graph.as_graph_def()
  dtypes = set()
  for nodes in _function_defs(graph_def):
    for node in nodes:
      if node.op in _COMPUTE_OPS and "T" in node.attr:
        dtypes.add(tf.as_dtype(node.attr["T"].type).name)
  return sorted(dtypes)


def ran(dtypes: List[str]) -> str:
  """`float32` or `bfloat16` when every conv / matmul ran in it, else `mixed`
  (e.g. circulant layers' float32 FFT matmuls beside bfloat16 convs) or
  `none` (no conv / matmul at all)."""
  if not dtypes:
    return "none"
  return dtypes[0] if len(dtypes) == 1 else "mixed"


def xla_compiled(concrete_function) -> bool:
  """Whether a traced function is, or calls, a function XLA must compile
  (`tf.function(jit_compile=True)`)."""
  graph_def = concrete_function.graph.as_graph_def()
  must = lambda attrs: "_XlaMustCompile" in attrs and attrs["_XlaMustCompile"].b
  if any(must(f.attr) for f in graph_def.library.function):
    return True
  return any(must(node.attr) for nodes in _function_defs(graph_def) for node in nodes)


def report(choice: Precision, *, train=None, predict=None) -> dict:
  """What a run chose and what its traced steps hold, as JSON-ready values.

  Args:
    choice: the resolved Precision.
    train, predict: concrete functions of the training and prediction steps
      (either may be None).

  Returns:
    {"precision", "requested", "reason"} of the choice and, per step given,
    `<step>_matmul_dtypes` (see `matmul_dtypes`), `<step>_ran` (see `ran`)
    and `<step>_jit_compile` (see `xla_compiled`), all read from the graphs.
  """
  out = {"precision": choice.name, "requested": choice.requested, "reason": choice.reason}
  for step, function in (("train", train), ("predict", predict)):
    if function is not None:
      dtypes = matmul_dtypes(function)
      out[f"{step}_matmul_dtypes"] = dtypes
      out[f"{step}_ran"] = ran(dtypes)
      out[f"{step}_jit_compile"] = xla_compiled(function)
  return out


def describe(rep: dict) -> str:
  """One line for the log and TensorBoard, e.g. `precision bfloat16 (auto: the
  CPU has avx512_bf16); traced convs/matmuls: train bfloat16, predict bfloat16;
  XLA: train off, predict off`."""
  line = f"precision {rep['precision']} ({rep['reason']})"
  steps = [s for s in ("train", "predict") if f"{s}_ran" in rep]
  if steps:
    line += "; traced convs/matmuls: " + ", ".join(f"{s} {rep[f'{s}_ran']}" for s in steps)
    line += "; XLA: " + ", ".join(
        f"{s} {'on' if rep[f'{s}_jit_compile'] else 'off'}" for s in steps)
  return line
