"""The masked heterogeneous batching op: one matmul per row, each row's own network.

`population_matmul(x, w, index, active)` computes, for every row b with
`active[b]`, `y[b] = x[b] @ w[index[b]]`, and zeros for the other rows, which
cost nothing (Uber AI's accelerated neuroevolution, Such et al. 2018). Rows
that share a network are computed as one GEMM by the compiled kernel
(`custom_ops/population/cc/kernels/population_kernels.cc`, its GEMM in
`population_gemm.cc`).

`population_conv2d(x, w, index, active, kernel_size, stride)` is the VALID
convolution of each row with its own network's kernel: the op reads the image
patches in place (no im2col buffer). With `input_dtype="bfloat16"` (bfloat16
kernels only) the input is rounded to bfloat16 first and the products
accumulate in float32, through the float32 GEMM; a library built with
TFRL_BUILD_AMX=1 runs this in AMX tiles on CPUs with AMX-BF16 (the
environment variable TFRL_POPULATION_NO_AMX then forces the other path).

`tfrl.ops.reference` computes both in plain TensorFlow (`tf.gather` +
`tf.matmul` on the active rows; im2col with `tf.image.extract_patches`): the
fallback when the compiled library is absent (`use_op=False`), and the
yardstick of the tests, the fuzzer and the benchmarks.

Every kernel is compiled three times, for AVX-512 (F, DQ, BW), AVX2 + FMA and
the baseline ('sse' on x86-64), and each process runs one build, chosen once:

    population.select_isa("avx2")   # before the first population op; -> "avx2"
    population.select_isa()         # "auto": says which build runs (choosing the
                                    # widest the CPU runs if none was chosen)

`select_isa` takes `KERNEL_ISAS`: auto, amx (the AVX-512 build with the AMX
tiles of the bfloat16-input convolution, in a library built with
TFRL_BUILD_AMX=1), avx512, avx2, sse or portable (both the baseline). The
env protocol's `--kernel_isa` is applied through it (`request_isa`, when the
library loads) and records what it returns. A build the CPU cannot run is
refused (ValueError; nothing silently falls back). The environment variable
TFRL_POPULATION_ISA overrides the choice (`tfrl.ops.overrides`).
`active_isa()` and `kernel_info()` say which build and paths ran.

Both take an optional epilogue, applied to the active rows right after their
matmul while they are in cache: `bias` ([P, N], each row's network's bias is
added) and `relu`; the convolution also takes uint8 images with an
`input_scale` (1/255 gives the usual [0, 1] frames without a float copy of
the batch in the graph). Inactive rows stay zero.

There is no gradient: neuroevolution does not differentiate its networks.
"""

import re
from typing import Optional

import tensorflow as tf

from tfrl import ops as _ops
from tfrl.ops import reference

FAMILY = "population"


# The builds `select_isa` takes (the flag --kernel_isa's choices).
KERNEL_ISAS = ("auto", "amx", "avx512", "avx2", "sse", "portable")
_requested = ["auto"]  # the build `request_isa` asked for, applied when the library loads


def load_library():
  """The compiled `population` op library; ImportError (with build help) if absent.

  The first load applies the build `request_isa` asked for (ValueError if
  the CPU cannot run it).
  """
  first = not _ops.is_loaded(FAMILY)
  library = _ops.load_library(FAMILY)
  if first and _requested[0] != "auto":
    _select(library, _requested[0])
  return library


def loaded() -> bool:
  """Whether this process has loaded the library (its kernels may have run)."""
  return _ops.is_loaded(FAMILY)


def _select(library, isa: str) -> str:
  if isa not in KERNEL_ISAS:
    raise ValueError(f"--kernel_isa must be one of {', '.join(KERNEL_ISAS)}, got {isa!r}.")
  try:
    return library.population_select_isa(isa=isa).numpy().decode()
  except (tf.errors.InvalidArgumentError, tf.errors.FailedPreconditionError) as e:
    message = re.sub(r"^\{\{[^}]*\}\}\s*", "", e.message.strip().splitlines()[0])
    raise ValueError(re.sub(r"\s*\[Op:.*$", "", message)) from None


def select_isa(isa: str = "auto") -> str:
  """Chooses the build the population kernels of this process run; returns
  the build that runs ('amx', 'avx512', 'avx2', 'sse' or 'portable').

  The choice is made once per process, by the first call (or else by the
  first population op, as "auto"); "auto" chooses the widest build the CPU
  runs if none was chosen, else keeps the one chosen. TFRL_POPULATION_ISA,
  when set, overrides `isa`.

  Raises:
    ValueError: an unknown build, one this CPU (or this library) cannot run
      (nothing is chosen then), or another build than `isa` already chosen.
    ImportError: the library is not built.
  """
  return _select(load_library(), isa)


def request_isa(isa: str) -> None:
  """Asks for build `isa` without loading the library: applied when it loads
  (at once if it is loaded). What neuroevolution's evaluator does with the
  env protocol's --kernel_isa (`tfrl.neuroevolution.worker.build_local`), so
  that a process that never runs a population kernel (an evaluation) never
  checks the build against its CPU."""
  if isa not in KERNEL_ISAS:
    raise ValueError(f"--kernel_isa must be one of {', '.join(KERNEL_ISAS)}, got {isa!r}.")
  _requested[0] = isa
  if loaded():
    select_isa(isa)


def have_op() -> bool:
  """Whether the compiled op library loads."""
  try:
    load_library()
    return True
  except ImportError:
    return False


def kernel_info() -> dict:
  """Which builds the population kernels of this process run, and ran.

  Returns a dict: 'isa', the build every kernel runs ('avx512', 'avx2' or
  'sse'; see the module doc and `select_isa`); 'cpu_isas', the builds
  this CPU runs, widest first; 'amx', whether the bfloat16-input convolution
  runs in AMX tiles; 'calls', {path: op calls computed on it so far}, for
  the paths 'sse', 'avx2', 'avx512' and 'amx'; 'gemm_calls', {strategy:
  GEMM calls so far} (a GEMM call is one network's rows of one layer), for
  the grouped GEMM's 'streamed' (1-2 rows, wide B), 'k_chunked' (3-8 rows,
  wide B) and 'tiles' (the rest); 'options', the optional parts built into
  the library, off by default: 'amx' (TFRL_BUILD_AMX=1) and 'delta_conv2d'
  (TFRL_BUILD_DELTA_CONV2D=1).

  Raises InvalidArgumentError when TFRL_POPULATION_ISA names an unknown build
  or one this CPU cannot run (the ops refuse to run then too). Chooses the
  build ("auto") if none was chosen yet.
  """
  isa, cpu, amx, names, calls, options = load_library().population_kernel_info()
  counts = {n.decode(): int(c) for n, c in zip(names.numpy(), calls.numpy())}
  return {
      "isa": isa.numpy().decode(),
      "cpu_isas": tuple(c.decode() for c in cpu.numpy()),
      "amx": bool(amx.numpy()),
      "calls": {n: c for n, c in counts.items() if not n.startswith("gemm_")},
      "gemm_calls": {n[len("gemm_"):]: c for n, c in counts.items() if n.startswith("gemm_")},
      "options": tuple(o.decode() for o in options.numpy()),
  }


def active_isa() -> str:
  """The ISA build ('avx512', 'avx2' or 'sse') the population kernels run."""
  return kernel_info()["isa"]


WEIGHT_DTYPES = reference.WEIGHT_DTYPES
CONV_INPUT_DTYPES = reference.CONV_INPUT_DTYPES
round_to_bfloat16 = reference.round_to_bfloat16


def _prepare(x, w, index, active):
  x = tf.convert_to_tensor(x, tf.float32)
  w = tf.convert_to_tensor(w)
  if w.dtype not in WEIGHT_DTYPES:
    w = tf.cast(w, tf.float32)
  index = tf.cast(tf.convert_to_tensor(index), tf.int32)
  if active is None:
    active = tf.ones_like(index, dtype=tf.bool)
  active = tf.convert_to_tensor(active, tf.bool)
  return x, w, index, active


def _epilogue(bias, relu: bool):
  """(epilogue attr, bias tensor) for the op; an empty bias when none."""
  if bias is None:
    return ("relu" if relu else "none"), tf.zeros([0, 0])
  return ("bias_relu" if relu else "bias"), tf.convert_to_tensor(bias, tf.float32)


def population_matmul_op(x, w, index, active=None, *, bias=None,
                         relu: bool = False) -> tf.Tensor:
  """The compiled op (raises ImportError if the library is not built).

  Args:
    x: [B, M, K] float32.
    w: [P, K, N] float32 or bfloat16, one weight matrix per network
      (bfloat16 is widened exactly; the arithmetic is float32).
    index: [B] int32, the network of each row, in [0, P) for active rows.
    active: [B] bool, the rows to compute; None means all.
    bias: [P, N] float32 or None: adds bias[index[b]] to active row b.
    relu: max(y, 0) on active rows (after the bias).

  Returns:
    [B, M, N] float32; inactive rows are zero.
  """
  x, w, index, active = _prepare(x, w, index, active)
  epilogue, bias = _epilogue(bias, relu)
  return load_library().population_matmul(x=x, w=w, index=index, active=active,
                                          bias=bias, epilogue=epilogue)


def population_matmul(x, w, index, active=None, *, bias=None, relu: bool = False,
                      use_op: Optional[bool] = None) -> tf.Tensor:
  """Masked heterogeneous batched matmul (compiled op, or the reference).

  Args:
    x: [B, M, K] float32 (M = 1 for dense layers, patches for convolutions).
    w: [P, K, N] float32 or bfloat16 (widened exactly, float32 arithmetic).
    index: [B] int32 network of each row.
    active: [B] bool rows to compute (None: all); inactive rows give zeros.
    bias, relu: the epilogue on active rows (see `population_matmul_op`).
    use_op: True forces the compiled op (ImportError if missing), False the
      pure-TF reference (`tfrl.ops.reference`); None uses the op when it is
      built.
  """
  if use_op is None:
    use_op = have_op()
  fn = population_matmul_op if use_op else reference.population_matmul
  return fn(x, w, index, active, bias=bias, relu=relu)


def _conv_input(x):
  x = tf.convert_to_tensor(x)
  return x if x.dtype == tf.uint8 else tf.cast(x, tf.float32)


def population_conv2d_op(x, w, index, active=None, *, kernel_size: int,
                         stride: int, input_dtype: str = "float32",
                         input_scale: float = 1.0, bias=None,
                         relu: bool = False) -> tf.Tensor:
  """The compiled convolution (raises ImportError if the library is not built).

  Args:
    x: [B, H, W, C] float32 or uint8.
    w: [P, kernel_size * kernel_size * C, N] float32 or bfloat16 (rows ordered
      (kh, kw, C), i.e. a conv2d kernel [kh, kw, C, N] reshaped).
    index: [B] int32 network of each row.
    active: [B] bool rows to compute; None means all.
    kernel_size, stride: square kernel and stride; padding is VALID.
    input_dtype: `float32`, or `bfloat16` (needs bfloat16 `w`): x is rounded
      to bfloat16 (nearest, ties to even) and the products of the rounded
      input and kernel accumulate in float32 (AMX tiles where the CPU has
      them).
    input_scale: the input is float(x) * input_scale (before any rounding).
    bias, relu: the epilogue on active rows (see `population_matmul_op`).

  Returns:
    [B, OH, OW, N] float32; inactive rows are zero.
  """
  x = _conv_input(x)
  _, w, index, active = _prepare(tf.zeros([0, 0, 0]), w, index, active)
  reference.check_input_dtype(input_dtype, w)
  epilogue, bias = _epilogue(bias, relu)
  return load_library().population_conv2d(x=x, w=w, index=index, active=active,
                                          bias=bias, kernel_size=kernel_size, stride=stride,
                                          input_dtype=input_dtype,
                                          input_scale=float(input_scale), epilogue=epilogue)


def population_conv2d(x, w, index, active=None, *, kernel_size: int, stride: int,
                      input_dtype: str = "float32", input_scale: float = 1.0,
                      bias=None, relu: bool = False,
                      use_op: Optional[bool] = None) -> tf.Tensor:
  """Masked heterogeneous VALID convolution (compiled op, or the reference)."""
  if use_op is None:
    use_op = have_op()
  fn = population_conv2d_op if use_op else reference.population_conv2d
  return fn(x, w, index, active, kernel_size=kernel_size, stride=stride,
            input_dtype=input_dtype, input_scale=input_scale, bias=bias, relu=relu)
