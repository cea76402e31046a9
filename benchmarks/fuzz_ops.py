"""Fuzzes every custom op of tfrl with random shapes, dtypes, sizes, indices and values.

  python benchmarks/fuzz_ops.py      # 5,000 calls per op, JSON to --out (fuzz_ops.json)
  python benchmarks/fuzz_ops.py --calls=300 --ops=population_delta_conv2d
  python benchmarks/fuzz_ops.py --repro=population_matmul:1234   # one call, printed

The ops: PopulationMatmul, PopulationConv2D, PopulationDeltaConv2D,
PopulationDeltaNet, PopulationKernelInfo (library `population`) and
AleEnvCreate, AleReset, AleStep, AleObserve, AleActionSet, AleKernelInfo
(library `ale`). About half the calls get valid input - shapes from empty to
a few hundred elements, both weight dtypes, uint8 and float inputs, float
values with NaN, +-inf, huge (1e30, 3e38), subnormal, zero and negative ones
mixed in, empty tensors with huge dimensions - and the other half input made
bad in one named way (a wrong rank, shape, length, dtype or attr, an index
out of range, an output whose size overflows int64, a destroyed resource...).

Outcomes of a call:
  ok              valid input, result checked (see below)
  rejected        bad input refused with the error that mutation expects
                  (InvalidArgument, or NotFound for a missing resource or ROM,
                  or TypeError for a dtype the op's definition does not allow)
  crash           the process died (a signal); counted, and the fuzzer goes on
  hang            no progress for --timeout seconds
  bad_accepted    bad input, no error
  wrong_error     bad input, another error than expected
  valid_rejected  valid input, an error
  wrong_result    valid input, a wrong result
The last five, and crashes, are bugs (goal: 0).

Results are checked against float64 NumPy: each output element's reference,
the sum of the magnitudes of its finite products (`bound`) and its
tolerance, (K + 2) * 2^-23 * bound. Where a float32 sum may overflow (bound
>= 1e37) an element is not checked (anything goes); elsewhere a NaN
reference needs NaN (NaN in, NaN out), an infinite one the same infinity, a
finite one a value within the tolerance. Subnormal inputs may be read as
zero (TensorFlow's threads flush denormals), so their products widen the
tolerance. The incremental ops are played for 1 to 4 steps with values
(NaN and inf too) appearing and disappearing, and every step is checked
against the full convolution of that step's input: a NaN or inf that has left
the input must not stay in the accumulator (inf - inf). The incremental
ops sum over the nonzero input values only (their sparsity: a zero input times
an inf or NaN weight adds nothing), and so does their reference. PopulationDeltaNet
is also compared with the chain of PopulationDeltaConv2D ops, which it must
equal bit for bit (any NaN equal to any NaN).

Calls run in batches of --batch, each batch in a subprocess (address space
limited to --memory_gb): a signal kills only that batch; its log says which
call was running, and the fuzzer resumes with the next call. Every call's
input depends only on (seed, op, call number) - and for the ALE ops on the
calls of its batch before it, which --repro replays - so a finding is
reproduced with --repro=OP:N (an ALE call with --replay=its worker's jobs:
the JSON's bugs carry the command).
The JSON (--out) holds the figures, the provenance (commit, command, CPU,
date), each mutation's first error message, and every bug found.
"""

import argparse
import collections
import json
import math
import os
import resource
import signal
import subprocess
import sys
import tempfile
import time
import traceback

import numpy as np

_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if _ROOT not in sys.path:
  sys.path.insert(0, _ROOT)

POPULATION_OPS = ("population_matmul", "population_conv2d", "population_delta_conv2d",
                  "population_delta_net", "population_kernel_info")
ALE_OPS = ("ale_env_create", "ale_reset", "ale_step", "ale_observe", "ale_action_set",
           "ale_kernel_info")
OPS = POPULATION_OPS + ALE_OPS
# Targets that test the fuzzer itself (a crash and a hang on purpose).
SELFTEST_OPS = ("selftest_crash", "selftest_hang")
OP_IDS = {op: i for i, op in enumerate(OPS + SELFTEST_OPS)}

BUGS = ("crash", "hang", "bad_accepted", "wrong_error", "valid_rejected", "wrong_result")
OUTCOMES = ("ok", "rejected") + BUGS

F32_MAX = float(np.finfo(np.float32).max)
F32_TINY = float(np.finfo(np.float32).tiny)  # smallest normal
OVERFLOW_BOUND = 1e37
SPECIALS = np.array([np.nan, np.inf, -np.inf, 3e38, -3e38, 1e30, -1e30, 1e-40, -1e-40, -0.0,
                     0.0, 1e-20], np.float32)
INT32_EXTREMES = (-2**31, 2**31 - 1)

tf = None  # imported by the worker when it runs a TensorFlow op


def _import_tf():
  global tf  # pylint: disable=global-statement
  if tf is None:
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    import tensorflow  # pylint: disable=import-outside-toplevel
    tf = tensorflow
  return tf


class Case:
  """One fuzz call: `run()` calls the op(s) and checks; `mutation` names the
  bad input (None when valid) and `expect` the errors it must raise."""

  def __init__(self, mutation=None, expect=None, detail=""):
    self.mutation = mutation
    self.expect = expect or ()
    self.detail = detail

  def run(self):
    """Calls the op; raises on an op error; returns an error string when a
    valid call's result is wrong, else None."""
    raise NotImplementedError


class FuncCase(Case):

  def __init__(self, fn, mutation=None, expect=None, detail=""):
    super().__init__(mutation, expect, detail)
    self._fn = fn

  def run(self):
    return self._fn()


def _invalid():
  return (tf.errors.InvalidArgumentError,)


def _invalid_or_type():
  return (tf.errors.InvalidArgumentError, TypeError, ValueError)


# ----------------------------------------------------------------------------
# Values and references.


def rand_floats(rng, shape, specials=0.0, scale=None):
  scale = float(rng.choice([1.0, 1e-3, 1e3])) if scale is None else scale
  a = (rng.standard_normal(shape) * scale).astype(np.float32)
  if specials > 0 and a.size:
    mask = rng.random(shape) < specials
    a[mask] = rng.choice(SPECIALS, int(mask.sum()))
  return a


def special_rate(rng):
  return float(rng.choice([0.0, 0.0, 0.002, 0.02, 0.2]))


def bf16_round(a):
  """float32 values as bfloat16 would hold them (tf.cast: nearest even)."""
  return tf.cast(tf.cast(tf.constant(a, tf.float32), tf.bfloat16), tf.float32).numpy()


def _tiny(a):
  return (a != 0) & (np.abs(a) < F32_TINY)


def _daz(v):
  """v with subnormals read as zero, as TensorFlow's threads (FTZ/DAZ) do."""
  return np.where(_tiny(v), np.zeros_like(v), v)


def gemm_reference(a, b, sparse=False, da=None):
  """a [R, K] times b [K, N] (float32 values) in float64; with `sparse`, the
  sum over the nonzero values of a only (0 * inf is 0 there, not NaN).

  Returns (ref, bound, slack, unchecked): ref computed with subnormal values
  read as zero; bound the sum of |finite products|; slack what the op may
  differ by because of that (or because the op's a may differ by `da` from
  the a given); unchecked the elements where such a doubtful value of one
  side meets an inf or NaN of the other (0 * inf or tiny * inf).
  """
  r, k = a.shape
  n = b.shape[1]
  if r == 0 or n == 0 or k == 0:
    z = np.zeros((r, n))
    return z, z.copy(), z.copy(), np.zeros((r, n), bool)
  ta, tb = _tiny(a), _tiny(b)
  da = ta * F32_TINY if da is None else np.maximum(da, ta * F32_TINY)
  da_inf = ~np.isfinite(da)  # the op may see a non-finite value, or a finite one
  da = np.where(da_inf, 0.0, da)
  a64 = np.where(ta, 0.0, a.astype(np.float64))
  b64 = np.where(tb, 0.0, b.astype(np.float64))
  with np.errstate(all="ignore"):
    prod = a64[:, :, None] * b64[None, :, :]
    if sparse:
      prod = np.where(a64[:, :, None] == 0, 0.0, prod)
    ref = prod.sum(axis=1)
    bound = np.where(np.isfinite(prod), np.abs(prod), 0.0).sum(axis=1)
    fa = np.where(np.isfinite(a64), np.abs(a64), 0.0)
    fb = np.where(np.isfinite(b64), np.abs(b64), 0.0)
    slack = da @ fb + fa @ tb.astype(np.float64) * F32_TINY + k * F32_TINY
    bad_a, bad_b = ~np.isfinite(a), ~np.isfinite(b)
    unchecked = (((da > 0).astype(np.int64) @ bad_b.astype(np.int64)) > 0) | (
        (bad_a.astype(np.int64) @ tb.astype(np.int64)) > 0) | (
            (da_inf.astype(np.int64) @ (b64 != 0).astype(np.int64)) > 0)
  return ref, bound, slack, unchecked


def compare(got, ref, bound, slack, unchecked, k, what, cum=None):
  """None if got (float32) matches the float64 reference, else a message."""
  got = np.asarray(got)
  if got.shape != ref.shape:
    return f"{what}: shape {got.shape}, expected {ref.shape}"
  g = got.astype(np.float64)
  cum = bound if cum is None else cum
  skip = unchecked | ~(bound < OVERFLOW_BOUND) | ~(cum < OVERFLOW_BOUND)
  with np.errstate(all="ignore"):
    tol = (k + 2) * 2.0 ** -23 * cum + slack + 1e-30
    nan_ref, inf_ref = np.isnan(ref), np.isinf(ref)
    bad = ~skip & ((nan_ref & ~np.isnan(g)) | (inf_ref & (g != ref)) |
                   (~nan_ref & ~inf_ref & ~(np.abs(g - ref) <= tol)))
  if bad.any():
    i = tuple(int(v) for v in np.argwhere(bad)[0])
    return (f"{what}[{i}] = {g[i]!r}, reference {ref[i]!r} (tolerance {tol[i]:.3g}, "
            f"bound {bound[i]:.3g}); {int(bad.sum())} of {bad.size} elements wrong")
  return None


def im2col(f, ks, stride):
  """[B, H, W, C] -> ([B, OH * OW, ks * ks * C] ordered (kh, kw, C), OH, OW)."""
  b, h, w, c = f.shape
  oh, ow = (h - ks) // stride + 1, (w - ks) // stride + 1
  if c == 0:  # (an empty input may be huge)
    return np.zeros((b, oh * ow, 0), f.dtype), oh, ow
  out = np.empty((b, oh, ow, ks, ks, c), f.dtype)
  for ky in range(ks):
    for kx in range(ks):
      out[:, :, :, ky, kx, :] = f[:, ky:ky + stride * (oh - 1) + 1:stride,
                                  kx:kx + stride * (ow - 1) + 1:stride, :]
  return out.reshape(b, oh * ow, ks * ks * c), oh, ow


def conv_rows_reference(f, df, wq, index, ks, stride, rows, sparse=False):
  """Per row in `rows`: gemm_reference of its patches with its kernel."""
  patches, oh, ow = im2col(f, ks, stride)
  dpatches, _, _ = im2col(df, ks, stride)
  return {b: gemm_reference(patches[b], wq[index[b]], sparse, dpatches[b])
          for b in rows}, oh, ow


def _weights(rng, shape, dtype, specials):
  w = rand_floats(rng, shape, specials, scale=float(rng.choice([1.0, 0.1, 10.0])))
  if dtype == "bfloat16":
    wq = bf16_round(w)
    return tf.cast(tf.constant(w), tf.bfloat16), wq
  return tf.constant(w), w


def _size(rng, small, large=None, p_large=0.1, p_zero=0.05):
  if rng.random() < p_zero:
    return 0
  if large is not None and rng.random() < p_large:
    return int(rng.integers(*large))
  return int(rng.integers(*small))


def _empty_bias():
  return tf.zeros([0, 0])


# ----------------------------------------------------------------------------
# PopulationMatmul.


def _index(rng, batch, pop, active):
  index = rng.integers(0, max(pop, 1), size=batch).astype(np.int32)
  for b in range(batch):
    if not active[b] and rng.random() < 0.3:
      index[b] = rng.choice([pop, -1, *INT32_EXTREMES])  # inactive rows: any index
  return index


def _apply_epilogue(result, bias_row, relu):
  ref, bound, slack, unchecked = result
  if bias_row is not None:
    with np.errstate(all="ignore"):
      bb = bias_row.astype(np.float64)
      ref = ref + np.where(_tiny(bias_row), 0.0, bb)[None, :]
      bound = bound + np.where(np.isfinite(bb), np.abs(bb), 0.0)[None, :]
      slack = slack + F32_TINY
  if relu:
    ref = np.where(ref < 0, 0.0, ref)
  return ref, bound, slack, unchecked


def gen_population_matmul(rng):
  lib = _pop_lib()
  b = _size(rng, (1, 10))
  m = _size(rng, (1, 4), (4, 12))
  k = _size(rng, (1, 40), (100, 260))
  n = _size(rng, (1, 40), (60, 140), p_large=0.25)
  p = _size(rng, (1, 6), p_zero=0.03)
  dtype = str(rng.choice(["float32", "bfloat16"]))
  epilogue = str(rng.choice(["none", "bias", "relu", "bias_relu"]))
  spec = special_rate(rng)
  x = rand_floats(rng, (b, m, k), spec)
  w, wq = _weights(rng, (p, k, n), dtype, special_rate(rng))
  active = rng.random(b) < rng.choice([1.0, 0.7, 0.3])
  if p == 0:
    active[:] = False
  index = _index(rng, b, p, active)
  with_bias = "bias" in epilogue
  bias_np = rand_floats(rng, (p, n), special_rate(rng)) if with_bias else None
  bias = tf.constant(bias_np) if with_bias else (
      _empty_bias() if rng.random() < 0.7 else tf.ones([3, 2]))  # ignored when unused
  args = dict(x=tf.constant(x), w=w, index=tf.constant(index), active=tf.constant(active),
              bias=bias, epilogue=epilogue)
  detail = f"x{x.shape} w{(p, k, n)} {dtype} {epilogue}"

  mutation = None
  if rng.random() < 0.5:
    mutation = str(rng.choice([
        "x_rank", "w_rank", "k_mismatch", "index_length", "active_length", "index_rank",
        "index_out_of_range", "bias_shape", "epilogue_attr", "w_dtype", "x_dtype",
        "output_overflows", "huge_empty_valid"]))
  expect = _invalid()
  if mutation == "x_rank":
    args["x"] = tf.constant(rand_floats(rng, (b, m * k)) if rng.random() < 0.5 else
                            rand_floats(rng, (b, m, k, 1)))
  elif mutation == "w_rank":
    args["w"] = tf.constant(rand_floats(rng, (p, k)))
  elif mutation == "k_mismatch":
    args["w"] = tf.constant(rand_floats(rng, (p, k + int(rng.choice([1, 2, 7])), n)))
  elif mutation == "index_length":
    args["index"] = tf.constant(np.zeros(b + int(rng.choice([1, -1])) if b else 1, np.int32))
  elif mutation == "active_length":
    args["active"] = tf.constant(np.ones(b + 1, bool))
  elif mutation == "index_rank":
    args["index"] = tf.constant(index.reshape(b, 1) if rng.random() < 0.5 else np.int32(0))
  elif mutation == "index_out_of_range":
    if b == 0:
      b = 1
      args.update(x=tf.constant(rand_floats(rng, (1, m, k))))
      index, active = np.zeros(1, np.int32), np.ones(1, bool)
    r = int(rng.integers(0, b))
    active[r] = True
    index[r] = rng.choice([p, p + 1, -1, *INT32_EXTREMES])
    args.update(index=tf.constant(index), active=tf.constant(active))
  elif mutation == "bias_shape":
    args["epilogue"] = str(rng.choice(["bias", "bias_relu"]))
    args["bias"] = tf.constant(rand_floats(rng, [(p + 1, n), (p, n + 1), (n,), (0, 0)][
        int(rng.integers(0, 4))]))
  elif mutation == "epilogue_attr":
    args["epilogue"] = str(rng.choice(["tanh", "", "BIAS"]))
    expect = _invalid_or_type()
  elif mutation == "w_dtype":
    args["w"] = tf.cast(args["w"], str(rng.choice(["float16", "float64", "int32"])))
    expect = (TypeError, tf.errors.InvalidArgumentError, tf.errors.NotFoundError)
  elif mutation == "x_dtype":
    args["x"] = tf.cast(args["x"], str(rng.choice(["float64", "int32", "bfloat16"])))
    expect = (TypeError, tf.errors.InvalidArgumentError)
  elif mutation == "output_overflows":
    # x [B, 2^40, 0] and w [P, 0, 2^40]: y [B, 2^40, 2^40] cannot exist.
    b2 = max(b, 1)
    args.update(x=tf.zeros([b2, 2**40, 0]), w=tf.zeros([1, 0, 2**40]),
                index=tf.zeros([b2], tf.int32), active=tf.ones([b2], tf.bool),
                epilogue="none", bias=_empty_bias())
  elif mutation == "huge_empty_valid":
    # Valid: an empty w with a huge P (K = 0), or an empty x with huge M (N = 0).
    mutation = None
    b2 = max(b, 1)
    index2 = rng.integers(0, 2**31 - 1, size=b2).astype(np.int32)
    if rng.random() < 0.5:
      huge_p = int(rng.choice([2**31 - 1, 2**40, 2**62]))
      args.update(x=tf.zeros([b2, m, 0]), w=tf.zeros([huge_p, 0, n]),
                  index=tf.constant(index2), active=tf.ones([b2], tf.bool),
                  epilogue=str(rng.choice(["none", "relu"])), bias=_empty_bias())
      want = np.zeros((b2, m, n), np.float32)
      detail = f"x[{b2},{m},0] w[{huge_p},0,{n}]"
    else:
      huge_m = int(rng.choice([2**31, 2**40]))
      args.update(x=tf.zeros([b2, huge_m, 0]), w=tf.zeros([p or 1, 0, 0]),
                  index=tf.zeros([b2], tf.int32), active=tf.ones([b2], tf.bool),
                  epilogue="none", bias=_empty_bias())
      want = np.zeros((b2, huge_m, 0), np.float32)
      detail = f"x[{b2},{huge_m},0] w[{p or 1},0,0]"

    def run_huge():
      y = lib.population_matmul(**args).numpy()
      if y.shape != want.shape or np.any(y != 0):
        return f"y shape {y.shape} (expected {want.shape}) or nonzero values"
      return None
    return FuncCase(run_huge, None, detail=detail)

  if mutation is not None:
    return FuncCase(lambda: lib.population_matmul(**args), mutation, expect, detail)

  def run():
    y = lib.population_matmul(**args).numpy()
    if y.shape != (b, m, n):
      return f"y shape {y.shape}, expected {(b, m, n)}"
    for r in range(b):
      if not active[r]:
        if np.any(y[r] != 0):
          return f"inactive row {r} not zero"
        continue
      res = gemm_reference(x[r], wq[index[r]])
      res = _apply_epilogue(res, bias_np[index[r]] if with_bias else None, "relu" in epilogue)
      err = compare(y[r], *res, k=k, what=f"y[{r}]")
      if err:
        return err
    return None
  return FuncCase(run, None, detail=detail)


# ----------------------------------------------------------------------------
# PopulationConv2D.


def _scale(rng):
  if rng.random() < 0.6:
    return 1.0
  return float(rng.choice([1 / 255, 0.5, -2.0, 0.0, 1e30, np.nan, np.inf, 1e-40, 3e38]))


def _conv_input(rng, shape, tx, spec):
  if tx == "uint8":
    return rng.integers(0, 256, size=shape).astype(np.uint8)
  return rand_floats(rng, shape, spec)


def _conv_f(x, scale, tx, round_bf16):
  """(f, df): what the convolution reads, float32(x) * scale (rounded to
  bfloat16), and how far the op's value may be from it."""
  if tx == "uint8" or scale != 1.0:
    f, df = _layer_f(x, None, scale, None, False)
  else:
    f, df = x, np.zeros(x.shape)
  if round_bf16:
    g = bf16_round(f)
    df = np.maximum(df, np.abs(g.astype(np.float64) - bf16_round(_daz(f)).astype(np.float64)))
    f = g
  return f, np.where(np.isfinite(df), df, np.inf)


def gen_population_conv2d(rng):
  lib = _pop_lib()
  b = _size(rng, (1, 6))
  h, w_ = int(rng.integers(1, 13)), int(rng.integers(1, 13))
  c = _size(rng, (1, 6), p_zero=0.04)
  ks = int(rng.integers(1, min(h, w_) + 1))
  stride = int(rng.integers(1, 5)) if rng.random() < 0.95 else 2**31 - 1
  n = _size(rng, (1, 20), (30, 70), p_large=0.15)
  p = _size(rng, (1, 5), p_zero=0.03)
  dtype = str(rng.choice(["float32", "bfloat16"]))
  tx = str(rng.choice(["float32", "uint8"]))
  input_dtype = "bfloat16" if dtype == "bfloat16" and rng.random() < 0.5 else "float32"
  scale = _scale(rng)
  epilogue = str(rng.choice(["none", "bias", "relu", "bias_relu"]))
  x = _conv_input(rng, (b, h, w_, c), tx, special_rate(rng))
  kk = ks * ks * c
  wt, wq = _weights(rng, (p, kk, n), dtype, special_rate(rng))
  active = rng.random(b) < rng.choice([1.0, 0.6])
  if p == 0:
    active[:] = False
  index = _index(rng, b, p, active)
  with_bias = "bias" in epilogue
  bias_np = rand_floats(rng, (p, n), special_rate(rng)) if with_bias else None
  args = dict(x=tf.constant(x), w=wt, index=tf.constant(index), active=tf.constant(active),
              bias=tf.constant(bias_np) if with_bias else _empty_bias(), kernel_size=ks,
              stride=stride, input_dtype=input_dtype, input_scale=scale, epilogue=epilogue)
  detail = (f"x{x.shape} {tx} w{(p, kk, n)} {dtype} ks{ks} s{stride} in={input_dtype} "
            f"scale={scale} {epilogue}")
  mutation = None
  if rng.random() < 0.5:
    mutation = str(rng.choice([
        "x_rank", "w_rank", "k_mismatch", "image_too_small", "index_length",
        "active_length", "index_out_of_range", "bias_shape", "kernel_size_attr",
        "stride_attr", "input_dtype_needs_bf16", "input_dtype_attr", "w_dtype", "x_dtype",
        "output_overflows", "kernel_rows_overflow", "huge_empty_valid"]))
  expect = _invalid()
  if mutation == "x_rank":
    args["x"] = tf.constant(_conv_input(rng, (b, h, w_ * c), tx, 0))
  elif mutation == "w_rank":
    args["w"] = tf.constant(rand_floats(rng, (p, kk * n)))
  elif mutation == "k_mismatch":
    args["w"] = tf.cast(tf.constant(rand_floats(rng, (p, kk + int(rng.choice([1, 3])), n))),
                        wt.dtype)
  elif mutation == "image_too_small":
    args["kernel_size"] = int(rng.choice([min(h, w_) + 1, max(h, w_) + 5, 2**31 - 1]))
  elif mutation == "index_length":
    args["index"] = tf.constant(np.zeros(b + 1, np.int32))
  elif mutation == "active_length":
    args["active"] = tf.constant(np.ones(max(b - 1, 0) if b > 0 else 2, bool))
  elif mutation == "index_out_of_range":
    if b == 0:
      b = 1
      x = _conv_input(rng, (1, h, w_, c), tx, 0)
      args["x"] = tf.constant(x)
      index, active = np.zeros(1, np.int32), np.ones(1, bool)
    r = int(rng.integers(0, b))
    active[r] = True
    index[r] = rng.choice([p, -1, *INT32_EXTREMES])
    args.update(index=tf.constant(index), active=tf.constant(active))
  elif mutation == "bias_shape":
    args["epilogue"] = "bias"
    args["bias"] = tf.constant(rand_floats(rng, [(p + 1, n), (p, n + 2), (p * n,)][
        int(rng.integers(0, 3))]))
  elif mutation == "kernel_size_attr":
    args["kernel_size"] = int(rng.choice([0, -1, -2**31]))
    expect = _invalid_or_type()
  elif mutation == "stride_attr":
    args["stride"] = int(rng.choice([0, -3]))
    expect = _invalid_or_type()
  elif mutation == "input_dtype_needs_bf16":
    args["input_dtype"] = "bfloat16"
    args["w"] = tf.constant(wq)
  elif mutation == "input_dtype_attr":
    args["input_dtype"] = str(rng.choice(["float16", "int8", ""]))
    expect = _invalid_or_type()
  elif mutation == "w_dtype":
    args["w"] = tf.cast(args["w"], "float16")
    expect = (TypeError, tf.errors.InvalidArgumentError, tf.errors.NotFoundError)
  elif mutation == "x_dtype":
    args["x"] = tf.cast(args["x"], str(rng.choice(["int32", "float64", "int8"])))
    expect = (TypeError, tf.errors.InvalidArgumentError, tf.errors.NotFoundError)
  elif mutation == "output_overflows":
    # x [1, 2^31, 2^31, 0] (empty) and N = 2^40: y would have 2^102 elements.
    args.update(x=tf.zeros([1, 2**31, 2**31, 0]), w=tf.zeros([1, 0, 2**40]),
                index=tf.zeros([1], tf.int32), active=tf.ones([1], tf.bool), kernel_size=1,
                stride=1, input_dtype="float32", epilogue="none", bias=_empty_bias())
  elif mutation == "kernel_rows_overflow":
    # An empty x with a huge kernel: kernel_size^2 * C overflows int64.
    args.update(x=tf.zeros([0, 2**40, 2**40, 2**20]), w=tf.zeros([1, 0, 3]),
                index=tf.zeros([0], tf.int32), active=tf.zeros([0], tf.bool),
                kernel_size=2**31 - 1, stride=1, input_dtype="float32", epilogue="none",
                bias=_empty_bias())
  elif mutation == "huge_empty_valid":
    mutation = None
    b2 = max(b, 1)
    big = int(rng.choice([2**20, 2**30]))  # B * big^2 must fit in int64
    huge_p = int(rng.choice([1, 2**40]))
    ks2 = int(rng.choice([1, 3]))
    args.update(x=tf.zeros([b2, big, big, 0]), w=tf.zeros([huge_p, 0, 0]),
                index=tf.zeros([b2], tf.int32), active=tf.ones([b2], tf.bool),
                kernel_size=ks2, stride=1, input_dtype="float32",
                epilogue="none", bias=_empty_bias())

    def run_huge():
      y = lib.population_conv2d(**args)
      want = (b2, big - ks2 + 1, big - ks2 + 1, 0)
      return None if tuple(y.shape) == want else f"y shape {tuple(y.shape)}, expected {want}"
    return FuncCase(run_huge, None, detail=f"x[{b2},{big},{big},0] w[{huge_p},0,0]")

  if mutation is not None:
    return FuncCase(lambda: lib.population_conv2d(**args), mutation, expect, detail)

  def run():
    y = lib.population_conv2d(**args).numpy()
    oh, ow = (h - ks) // stride + 1, (w_ - ks) // stride + 1
    if y.shape != (b, oh, ow, n):
      return f"y shape {y.shape}, expected {(b, oh, ow, n)}"
    f, df = _conv_f(x, scale, tx, input_dtype == "bfloat16")
    rows = [r for r in range(b) if active[r]]
    refs, _, _ = conv_rows_reference(f, df, wq, index, ks, stride, rows)
    for r in range(b):
      if not active[r]:
        if np.any(y[r] != 0):
          return f"inactive row {r} not zero"
        continue
      res = _apply_epilogue(refs[r], bias_np[index[r]] if with_bias else None,
                            "relu" in epilogue)
      err = compare(y[r].reshape(oh * ow, n), *res, k=kk, what=f"y[{r}]")
      if err:
        return err
    return None
  return FuncCase(run, None, detail=detail)


# ----------------------------------------------------------------------------
# PopulationDeltaConv2D and PopulationDeltaNet: played for a few steps.


def _f_once(x, index, scale, bias, relu, daz):
  with np.errstate(all="ignore"):
    rd = _daz if daz else (lambda v: v)
    prod = rd(rd(x.astype(np.float32)) * rd(np.float32(scale)))
    f = prod
    if bias is not None:
      f = rd(prod + rd(bias[index][:, None, None, :]))
    if relu:
      f = np.where(f < 0, np.float32(0), f)
  return f.astype(np.float32), prod


def _layer_f(x, index, scale, bias, relu):
  """(f, df): f(x) = relu?(float32(x) * scale + bias[index]) in float32 as the
  op computes it with subnormals read as zero, and how far the op's value may
  be from it: it may fuse the multiply and the add (one rounding), and its
  threads may not flush subnormals after all. df is inf where either changes
  a value between finite and not."""
  f, prod = _f_once(x, index, scale, bias, relu, daz=True)
  g, _ = _f_once(x, index, scale, bias, relu, daz=False)
  with np.errstate(all="ignore"):
    df = np.abs(f.astype(np.float64) - g.astype(np.float64))
    df = np.where(np.isnan(f) & np.isnan(g), 0.0, df)
    if bias is not None and scale != 1.0:
      bb = bias[index][:, None, None, :].astype(np.float64)
      df = df + 2.0 ** -24 * (np.abs(prod.astype(np.float64)) + np.abs(bb))
    df = np.where(np.isnan(df), np.inf, df)
  return f, df


def _next_input(rng, x, tx, spec):
  """x with a fraction of its values redrawn (specials can come and go)."""
  x = x.copy()
  if x.size == 0:
    return x
  mask = rng.random(x.shape) < rng.choice([0.01, 0.05, 0.3])
  if tx != "uint8":
    # Values that were special leave now and then.
    mask |= (~np.isfinite(x) | (np.abs(x) > 1e20)) & (rng.random(x.shape) < 0.5)
  x[mask] = _conv_input(rng, x.shape, tx, spec)[mask]
  return x


class _Tracker:
  """Per row and output element: the tolerance bound accumulated since the
  row was last fresh (the incremental sum's rounding adds up step by step)."""

  def __init__(self):
    self.cum = {}
    self.prev = {}

  def update(self, b, fresh, bound):
    if fresh or b not in self.cum:
      self.cum[b] = bound.copy()
    else:
      self.cum[b] = self.cum[b] + bound + self.prev[b]
    self.prev[b] = bound
    return self.cum[b]


def _check_delta_layer(acc, f, df, wq, index, ks, stride, fresh, tracker, what, key=""):
  """acc [B, OH, OW, N] against the full convolution of f (each value known
  to within df)."""
  batch = f.shape[0]
  kk, n = wq.shape[1], wq.shape[2]
  refs, oh, ow = conv_rows_reference(f, df, wq, index, ks, stride, range(batch), sparse=True)
  for r in range(batch):
    ref, bound, slack, unchecked = refs[r]
    cum = tracker.update((key, r), fresh[r], bound)
    err = compare(acc[r].reshape(oh * ow, n), ref, bound, slack, unchecked, kk,
                  f"{what}[{r}]", cum=cum)
    if err:
      return err
  return None


def gen_population_delta_conv2d(rng):
  lib = _pop_lib()
  b = _size(rng, (1, 7))
  dense = rng.random() < 0.3
  h, w_ = int(rng.integers(1, 10)), int(rng.integers(1, 10))
  c = _size(rng, (1, 5), p_zero=0.04)
  if dense:
    h = w_ = int(rng.integers(1, 7))
    ks, stride = h, 1
  else:
    ks = int(rng.integers(1, min(h, w_) + 1))
    stride = int(rng.integers(1, 4)) if rng.random() < 0.95 else 2**31 - 1
  n = _size(rng, (1, 20), (30, 80), p_large=0.2, p_zero=0.03)
  p = int(rng.integers(1, 5))
  dtype = str(rng.choice(["float32", "bfloat16"]))
  tx = str(rng.choice(["float32", "uint8"]))
  scale = _scale(rng) if rng.random() < 0.7 else (1 / 255 if tx == "uint8" else 1.0)
  relu = bool(rng.random() < 0.5)
  has_bias = rng.random() < 0.6
  bias = rand_floats(rng, (p, c), special_rate(rng)) if has_bias else None
  kk = ks * ks * c
  wt, wq = _weights(rng, (p, kk, n), dtype, special_rate(rng))
  index = rng.integers(0, p, size=b).astype(np.int32)
  if dense and rng.random() < 0.5:
    index[:] = int(rng.integers(0, p))  # runs of one network
  oh, ow = (h - ks) // stride + 1, (w_ - ks) // stride + 1
  spec = special_rate(rng)
  x = _conv_input(rng, (b, h, w_, c), tx, spec)
  attrs = dict(kernel_size=ks, stride=stride, input_scale=scale, input_relu=relu)
  bias_t = tf.constant(bias) if has_bias else _empty_bias()
  steps = int(rng.integers(1, 5))
  detail = (f"x{x.shape} {tx} w{(p, kk, n)} {dtype} ks{ks} s{stride} scale={scale} "
            f"relu={relu} bias={has_bias} steps={steps}")

  def call(x_now, x_before, acc_before, fresh_rows, **over):
    a = dict(x=tf.constant(x_now), x_prev=tf.constant(x_before),
             acc_prev=tf.constant(acc_before), w=wt, index=tf.constant(index),
             fresh=tf.constant(fresh_rows), input_bias=bias_t, **attrs)
    a.update(over)
    return lib.population_delta_conv2d(**a)

  acc0 = np.full((b, oh, ow, n), np.nan, np.float32)
  garbage = _conv_input(rng, x.shape, tx, 0.3)
  mutation = None
  if rng.random() < 0.45:
    mutation = str(rng.choice([
        "x_rank", "x_prev_shape", "acc_prev_shape", "w_rank", "kernel_rows",
        "kernel_larger_than_input", "index_length", "index_rank", "index_out_of_range",
        "fresh_length", "input_bias_shape", "kernel_size_attr", "stride_attr", "x_dtype",
        "output_overflows", "huge_empty_valid"]))
  expect = _invalid()
  fresh = np.ones(b, bool)
  over = {}
  if mutation == "x_rank":
    over = dict(x=tf.constant(x.reshape(b, h, w_ * c)), x_prev=tf.constant(x.reshape(b, h, w_ * c)))
  elif mutation == "x_prev_shape":
    over = dict(x_prev=tf.constant(_conv_input(rng, (b, h, w_ + 1, c), tx, 0)))
  elif mutation == "acc_prev_shape":
    over = dict(acc_prev=tf.zeros([b, oh, ow, n + 1]))
  elif mutation == "w_rank":
    over = dict(w=tf.zeros([p, kk * n]))
  elif mutation == "kernel_rows":
    over = dict(w=tf.cast(tf.zeros([p, kk + 1, n]), wt.dtype))
  elif mutation == "kernel_larger_than_input":
    over = dict(kernel_size=int(rng.choice([max(h, w_) + 1, 2**31 - 1])))
  elif mutation == "index_length":
    over = dict(index=tf.zeros([b + 1], tf.int32))
  elif mutation == "index_rank":
    over = dict(index=tf.zeros([b, 1], tf.int32))
  elif mutation == "index_out_of_range":
    if b == 0:
      return FuncCase(lambda: call(np.zeros((1, h, w_, c), x.dtype),
                                   np.zeros((1, h, w_, c), x.dtype),
                                   np.zeros((1, oh, ow, n), np.float32), np.ones(1, bool),
                                   index=tf.constant([p], tf.int32)),
                      mutation, expect, detail)
    bad = index.copy()
    bad[int(rng.integers(0, b))] = rng.choice([p, -1, *INT32_EXTREMES])
    over = dict(index=tf.constant(bad))
  elif mutation == "fresh_length":
    over = dict(fresh=tf.ones([b + 1], tf.bool))
  elif mutation == "input_bias_shape":
    over = dict(input_bias=[tf.ones([p + 1, c]), tf.ones([p, c + 1]), tf.ones([p * c + 1]),
                            tf.zeros([0, 1])][int(rng.integers(0, 4))])
  elif mutation == "kernel_size_attr":
    over = dict(kernel_size=0)
    expect = _invalid_or_type()
  elif mutation == "stride_attr":
    over = dict(stride=-1)
    expect = _invalid_or_type()
  elif mutation == "x_dtype":
    over = dict(x=tf.cast(tf.constant(x), tf.float64), x_prev=tf.cast(tf.constant(x), tf.float64))
    expect = (TypeError, tf.errors.InvalidArgumentError, tf.errors.NotFoundError)
  elif mutation == "output_overflows":
    over = dict(x=tf.zeros([1, 2**31, 2**31, 0]), x_prev=tf.zeros([1, 2**31, 2**31, 0]),
                acc_prev=tf.zeros([1, 1, 1, 1]), w=tf.zeros([1, 0, 2**40]),
                index=tf.zeros([1], tf.int32), fresh=tf.ones([1], tf.bool),
                input_bias=_empty_bias(), kernel_size=1, stride=1, input_scale=1.0)
  elif mutation == "huge_empty_valid":
    mutation = None
    b2 = max(b, 1)
    big = int(rng.choice([2**20, 2**30]))  # B * big^2 must fit in int64
    fr2 = rng.random(b2) < 0.5
    huge_p = int(rng.choice([1, 2**40]))

    def run_huge():
      acc = lib.population_delta_conv2d(
          x=tf.zeros([b2, big, big, 0]), x_prev=tf.zeros([b2, big, big, 0]),
          acc_prev=tf.zeros([b2, big, big, 0]), w=tf.zeros([huge_p, 0, 0]),
          index=tf.zeros([b2], tf.int32), fresh=tf.constant(fr2), input_bias=_empty_bias(),
          kernel_size=1, stride=1, input_scale=1.0, input_relu=False)
      want = (b2, big, big, 0)
      return None if tuple(acc.shape) == want else f"acc shape {tuple(acc.shape)}"
    return FuncCase(run_huge, None, detail=f"x[{b2},{big},{big},0]")
  if mutation is not None:
    return FuncCase(lambda: call(x, garbage, acc0, fresh, **over), mutation, expect, detail)

  def run():
    tracker = _Tracker()
    acc, xp, xt, fr = acc0, garbage, x, fresh
    for step in range(steps):
      if step > 0:
        xp, xt = xt, _next_input(rng, xt, tx, spec)
        fr = rng.random(b) < 0.2
      out = call(xt, xp, acc, fr).numpy()
      if out.shape != (b, oh, ow, n):
        return f"step {step}: acc shape {out.shape}, expected {(b, oh, ow, n)}"
      f, df = _layer_f(xt, index, scale, bias, relu)
      err = _check_delta_layer(out, f, df, wq, index, ks, stride, fr, tracker,
                               f"step {step}: acc")
      if err:
        return err
      acc = out
    return None
  return FuncCase(run, None, detail=detail)


def gen_population_delta_net(rng):
  lib = _pop_lib()
  b = _size(rng, (1, 7))
  h, w_ = int(rng.integers(1, 13)), int(rng.integers(1, 13))
  c0 = _size(rng, (1, 4), p_zero=0.08)
  huge = c0 == 0 and rng.random() < 0.5  # an empty obs [B, 2^20, 2^20, 0]
  if huge:
    h = w_ = 2**20
  # Layers (kernel size, stride, N); the last one dense.
  layers, hh, ww = [], h, w_
  num_layers = int(rng.integers(1, 4))
  for i in range(num_layers):
    if huge and i == 0:  # down to one position
      ks, stride = hh - int(rng.integers(0, 3)), hh
    elif i == num_layers - 1:
      ks = min(hh, ww)
      stride = max(hh, ww) - ks + 1
    else:
      ks = int(rng.integers(1, min(hh, ww) + 1))
      stride = int(rng.integers(1, 4))
    n = _size(rng, (1, 10), (20, 70), p_large=0.2, p_zero=0.04)
    layers.append((ks, stride, n))
    hh, ww = (hh - ks) // stride + 1, (ww - ks) // stride + 1
  p = int(rng.integers(1, 4))
  dtype = str(rng.choice(["float32", "bfloat16"]))
  tx = str(rng.choice(["float32", "uint8"]))
  scale = _scale(rng) if rng.random() < 0.6 else (1 / 255 if tx == "uint8" else 1.0)
  relus = [bool(v) for v in rng.random(num_layers - 1) < 0.7]
  kernels, kq, biases, shapes = [], [], [], []
  hh, ww, c = h, w_, c0
  for ks, stride, n in layers:
    wt, wq = _weights(rng, (p, ks * ks * c, n), dtype, special_rate(rng) * 0.5)
    kernels.append(wt)
    kq.append(wq)
    biases.append(rand_floats(rng, (p, n), special_rate(rng) * 0.5))
    hh, ww = (hh - ks) // stride + 1, (ww - ks) // stride + 1
    shapes.append((hh, ww, n))
    c = n
  index = rng.integers(0, p, size=b).astype(np.int32)
  if rng.random() < 0.4:
    index[:] = int(rng.integers(0, p))
  spec = special_rate(rng) * 0.5
  obs = _conv_input(rng, (b, h, w_, c0), tx, spec)
  steps = int(rng.integers(1, 5))
  geometry = dict(kernel_sizes=[l[0] for l in layers], strides=[l[1] for l in layers],
                  relus=relus, input_scale=scale)
  detail = (f"obs{obs.shape} {tx} layers={layers} relus={relus} P={p} {dtype} "
            f"scale={scale} steps={steps}")

  def net(obs_now, obs_before, acc_before, fresh_rows, **over):
    a = dict(obs=tf.constant(obs_now), obs_prev=tf.constant(obs_before),
             acc_prev=[tf.constant(v) for v in acc_before], w=kernels,
             bias=[tf.constant(v) for v in biases], index=tf.constant(index),
             fresh=tf.constant(fresh_rows), **geometry)
    a.update(over)
    return lib.population_delta_net(**a)

  acc0 = [np.full((b,) + s, np.nan, np.float32) for s in shapes]
  garbage = _conv_input(rng, obs.shape, tx, 0.3)
  mutation = None
  if rng.random() < 0.45 and not huge:  # (a bad variant of a huge obs would not fit)
    mutation = str(rng.choice([
        "kernel_sizes_length", "relus_length", "kernel_rows", "bias_shape",
        "acc_prev_shape", "index_out_of_range", "index_length", "fresh_length",
        "obs_prev_shape", "population_mismatch", "kernel_larger_than_input",
        "last_layer_not_dense", "kernel_size_attr", "mixed_weight_dtypes", "obs_rank"]))
  expect = _invalid()
  over = {}
  fresh = np.ones(b, bool)
  if mutation == "kernel_sizes_length":
    over = dict(kernel_sizes=geometry["kernel_sizes"] + [1])
  elif mutation == "relus_length":
    over = dict(relus=relus + [True])
  elif mutation == "kernel_rows":
    i = int(rng.integers(0, num_layers))
    ws = list(kernels)
    ws[i] = tf.cast(tf.zeros([p, int(kernels[i].shape[1]) + 1, int(kernels[i].shape[2])]),
                    kernels[i].dtype)
    over = dict(w=ws)
  elif mutation == "bias_shape":
    i = int(rng.integers(0, num_layers))
    bs = [tf.constant(v) for v in biases]
    bs[i] = tf.zeros([p, layers[i][2] + 1])
    over = dict(bias=bs)
  elif mutation == "acc_prev_shape":
    i = int(rng.integers(0, num_layers))
    ac = [tf.constant(v) for v in acc0]
    ac[i] = tf.zeros([b] + [s + (j == 2) for j, s in enumerate(shapes[i])])
    over = dict(acc_prev=ac)
  elif mutation == "index_out_of_range":
    if b == 0:
      mutation = "index_length"
      over = dict(index=tf.zeros([1], tf.int32))
    else:
      bad = index.copy()
      bad[int(rng.integers(0, b))] = rng.choice([p, -1, *INT32_EXTREMES])
      over = dict(index=tf.constant(bad))
  elif mutation == "index_length":
    over = dict(index=tf.zeros([b + 1], tf.int32))
  elif mutation == "fresh_length":
    over = dict(fresh=tf.ones([b + 2], tf.bool))
  elif mutation == "obs_prev_shape":
    over = dict(obs_prev=tf.constant(_conv_input(rng, (b, h + 1, w_, c0), tx, 0)))
  elif mutation == "population_mismatch":
    if num_layers == 1:
      over = dict(bias=[tf.zeros([p + 1, layers[0][2]])])
    else:
      ws = list(kernels)
      ws[1] = tf.cast(tf.zeros([p + 1] + list(kernels[1].shape[1:])), kernels[1].dtype)
      over = dict(w=ws)
  elif mutation == "kernel_larger_than_input":
    ks_list = list(geometry["kernel_sizes"])
    ks_list[0] = max(h, w_) + 1
    over = dict(kernel_sizes=ks_list)
  elif mutation == "last_layer_not_dense":
    # One 1x1 layer over an input of more than one position.
    hb, wb = max(h, 2), w_
    o = _conv_input(rng, (b, hb, wb, c0), tx, 0)
    return FuncCase(lambda: lib.population_delta_net(
        obs=tf.constant(o), obs_prev=tf.constant(o), acc_prev=[tf.zeros([b, hb, wb, 3])],
        w=[tf.zeros([p, c0, 3])], bias=[tf.zeros([p, 3])], index=tf.zeros([b], tf.int32),
        fresh=tf.ones([b], tf.bool), kernel_sizes=[1], strides=[1], relus=[],
        input_scale=1.0), mutation, expect, detail)
  elif mutation == "kernel_size_attr":
    ks_list = list(geometry["kernel_sizes"])
    ks_list[-1] = 0
    over = dict(kernel_sizes=ks_list)
  elif mutation == "mixed_weight_dtypes":
    if num_layers == 1:
      over = dict(w=[kernels[0], tf.zeros([p, layers[0][2], 2], tf.bfloat16)],
                  bias=[tf.constant(biases[0]), tf.zeros([p, 2])])
      expect = _invalid_or_type()
    else:
      ws = list(kernels)
      ws[1] = tf.cast(ws[1], tf.float32 if ws[1].dtype == tf.bfloat16 else tf.bfloat16)
      over = dict(w=ws)
      expect = _invalid_or_type()
  elif mutation == "obs_rank":
    over = dict(obs=tf.zeros([b, h, w_]), obs_prev=tf.zeros([b, h, w_]))
    expect = _invalid_or_type()
  if mutation is not None:
    return FuncCase(lambda: net(obs, garbage, acc0, fresh, **over), mutation, expect, detail)

  def chain(o, op, acc_prev, fresh):
    accs, x, xp = [], o, op
    for i, (ks, stride, _) in enumerate(layers):
      kwargs = (dict(input_scale=scale, input_relu=False, input_bias=_empty_bias()) if i == 0
                else dict(input_scale=1.0, input_relu=relus[i - 1],
                          input_bias=tf.constant(biases[i - 1])))
      out = lib.population_delta_conv2d(
          x=tf.constant(x), x_prev=tf.constant(xp), acc_prev=tf.constant(acc_prev[i]),
          w=kernels[i], index=tf.constant(index), fresh=tf.constant(fresh), kernel_size=ks,
          stride=stride, **kwargs).numpy()
      accs.append(out)
      x, xp = out, acc_prev[i]
    return accs

  def run():
    tracker = _Tracker()
    state, chain_state, op, o, fr = acc0, acc0, garbage, obs, fresh
    for step in range(steps):
      if step > 0:
        op, o = o, _next_input(rng, o, tx, spec)
        fr = rng.random(b) < 0.2
      logits, accs = net(o, op, state, fr)
      logits, accs = logits.numpy(), [a.numpy() for a in accs]
      for i, a in enumerate(accs):
        if a.shape != (b,) + shapes[i]:
          return f"step {step}: acc[{i}] shape {a.shape}, expected {(b,) + shapes[i]}"
      # Each layer against the full convolution of its input (the op's own
      # output of the layer below, through its bias and ReLU).
      x_in = o
      for i, (ks, stride, _) in enumerate(layers):
        f, df = (_layer_f(x_in, index, scale, None, False) if i == 0 else
                 _layer_f(x_in, index, 1.0, biases[i - 1], relus[i - 1]))
        err = _check_delta_layer(accs[i], f, df, kq[i], index, ks, stride, fr, tracker,
                                 f"step {step}: acc[{i}]", key=i)
        if err:
          return err
        x_in = accs[i]
      with np.errstate(all="ignore"):
        want = accs[-1][:, 0, 0, :] + biases[-1][index]
      # Subnormals may be flushed to zero (TensorFlow's threads run so).
      flush = lambda v: np.where(_tiny(v), np.float32(0), v)  # noqa: E731
      if not np.array_equal(flush(logits), flush(want), equal_nan=True):
        return f"step {step}: logits differ from acc[-1] + bias"
      chained = chain(o, op, chain_state, fr)
      for i, (a, want_a) in enumerate(zip(accs, chained)):
        if not np.array_equal(a, want_a, equal_nan=True):
          j = tuple(int(v) for v in np.argwhere(~((a == want_a) | (np.isnan(a) &
                                                                   np.isnan(want_a))))[0])
          return (f"step {step}: acc[{i}]{j} = {a[j]!r} differs from the chain of "
                  f"PopulationDeltaConv2D ops ({want_a[j]!r})")
      state, chain_state = accs, chained
    return None
  return FuncCase(run, None, detail=detail)


def gen_population_kernel_info(rng):
  lib = _pop_lib()
  del rng

  def run():
    isa, cpu, amx, names, calls = lib.population_kernel_info()
    isa, cpu = isa.numpy().decode(), [c.decode() for c in cpu.numpy()]
    names = [n.decode() for n in names.numpy()]
    if isa not in cpu:
      return f"isa {isa!r} not among the CPU's {cpu}"
    if (names[1:] != ["avx2", "avx512", "amx", "gemm_streamed", "gemm_k_chunked", "gemm_tiles"]
        or names[0] not in ("sse", "portable")):
      return f"path names {names}"
    if np.any(calls.numpy() < 0) or amx.dtype != tf.bool:
      return "negative call counts"
    return None
  return FuncCase(run)


_POP_LIB = []


def _pop_lib():
  if not _POP_LIB:
    from tfrl.ops import population  # pylint: disable=import-outside-toplevel
    _POP_LIB.append(population.load_library())
  return _POP_LIB[0]


# ----------------------------------------------------------------------------
# The ALE ops: a small pool of emulator batches per worker, whose state (which
# slots need a reset, which have an observation) the fuzzer tracks.


class AleState:
  """The worker's emulator batches and what each slot may do next."""

  def __init__(self, rng):
    from tfrl.envs import atari_env  # pylint: disable=import-outside-toplevel
    from tfrl.ops import ale  # pylint: disable=import-outside-toplevel
    self.ale = ale
    self.rom_directory = atari_env.default_rom_directory()
    self.pool = []
    self.dead = []  # handles of destroyed batches
    self.variable = tf.Variable(1.0)  # a resource of another kind
    for _ in range(2):
      self.create(valid_config(rng))

  def create(self, config):
    handle = self.ale.env_create(rom_directory=self.rom_directory, **config)
    actions = self.ale.action_set(handle).numpy()
    native = not config["resize"]
    env = dict(handle=handle, config=config, num_actions=len(actions),
               height=210 if native else config["height"],
               width=160 if native else config["width"],
               channels=(1 if config["grayscale"] else 3) * config["stack"],
               needs_reset=[True] * config["num_envs"],
               has_obs=[False] * config["num_envs"], actions=actions)
    self.pool.append(env)
    if len(self.pool) > 3:
      self.destroy(self.pool.pop(0))
    return env

  def destroy(self, env):
    tf.raw_ops.DestroyResourceOp(resource=env["handle"], ignore_lookup_error=True)
    self.dead.append(env["handle"])
    del self.dead[:-2]


def valid_config(rng):
  resize = bool(rng.random() < 0.8)
  return dict(
      game=str(rng.choice(["pong", "breakout", "space_invaders"])),
      num_envs=int(rng.integers(1, 4)), frame_skip=int(rng.integers(1, 6)),
      max_pool=bool(rng.random() < 0.7), grayscale=bool(rng.random() < 0.7), resize=resize,
      height=int(rng.integers(1, 100)) if resize else 84,
      width=int(rng.integers(1, 100)) if resize else 84, stack=int(rng.integers(1, 6)),
      noop_max=int(rng.choice([0, 1, 30])), fire_reset=bool(rng.random() < 0.5),
      repeat_action_probability=float(rng.choice([0.0, 0.25, 1.0])),
      full_action_space=bool(rng.random() < 0.3), episodic_life=bool(rng.random() < 0.3),
      max_episode_frames=int(rng.choice([0, 30, 108000])),
      seed=int(rng.integers(-2**62, 2**62)))


_ALE = []


def _ale(rng):
  if not _ALE:
    _ALE.append(AleState(rng))
  return _ALE[0]


def _slots(rng, env, allow=None):
  """A random subset of slots (no repeats), optionally only those `allow` admits."""
  n = env["config"]["num_envs"]
  slots = [s for s in range(n) if allow is None or allow(s)]
  rng.shuffle(slots)
  return np.array(slots[:int(rng.integers(0, len(slots) + 1))], np.int32)


def _bad_indices(rng, env):
  n = env["config"]["num_envs"]
  kind = str(rng.choice(["out_of_range", "negative", "duplicate", "rank"]))
  if kind == "out_of_range":
    return kind, np.array([int(rng.choice([n, n + 5, 2**31 - 1]))], np.int32)
  if kind == "negative":
    return kind, np.array([int(rng.choice([-1, -2**31]))], np.int32)
  if kind == "duplicate":
    return kind, np.array([0, 0], np.int32)
  return kind, np.zeros((1, 1), np.int32)


def gen_ale_env_create(rng):
  state = _ale(rng)
  config = valid_config(rng)
  mutation = None
  if rng.random() < 0.6:
    mutation = str(rng.choice([
        "game_name", "unknown_game", "rom_directory", "num_envs", "frame_skip", "stack",
        "height", "width", "noop_max", "repeat_action_probability", "max_episode_frames",
        "observation_memory"]))
  expect = _invalid()
  rom_directory = state.rom_directory
  if mutation == "game_name":
    config["game"] = str(rng.choice(["Pong", "../pong", "", "pong.bin", "po ng"]))
  elif mutation == "unknown_game":
    config["game"] = "no_such_game"
    expect = (tf.errors.NotFoundError,)
  elif mutation == "rom_directory":
    rom_directory = str(rng.choice(["/nonexistent/roms", tempfile.gettempdir()]))
    expect = (tf.errors.NotFoundError,)
  elif mutation == "num_envs":
    config["num_envs"] = int(rng.choice([0, -1, 4097, 2**40]))
    expect = _invalid_or_type()
  elif mutation == "frame_skip":
    config["frame_skip"] = int(rng.choice([0, -5, 1001, 2**31 - 1, 2**32, 2**62]))
    expect = _invalid_or_type()
  elif mutation == "stack":
    config["stack"] = int(rng.choice([0, 65, 2**31, 2**32]))
    expect = _invalid_or_type()
  elif mutation in ("height", "width"):
    config["resize"] = True
    config[mutation] = int(rng.choice([0, 1025, 2**31]))
    expect = _invalid_or_type()
  elif mutation == "noop_max":
    config["noop_max"] = int(rng.choice([-1, 100001, 2**31 - 1, 2**40]))
    expect = _invalid_or_type()
  elif mutation == "repeat_action_probability":
    config["repeat_action_probability"] = float(rng.choice([-0.1, 1.5, np.nan, np.inf]))
  elif mutation == "max_episode_frames":
    config["max_episode_frames"] = -1
    expect = _invalid_or_type()
  elif mutation == "observation_memory":
    # 64 slots x 1024 x 1024 x RGB x 64 frames = 12.9 GB of observations.
    config.update(num_envs=64, resize=True, height=1024, width=1024, grayscale=False,
                  stack=64)
  detail = json.dumps({k: v for k, v in config.items() if k != "seed"})

  if mutation is not None:
    def run_bad():
      handle = state.ale.env_create(rom_directory=rom_directory, **config)
      tf.raw_ops.DestroyResourceOp(resource=handle, ignore_lookup_error=True)
    return FuncCase(run_bad, mutation, expect, detail)

  def run():
    env = state.create(config)
    if not 2 <= env["num_actions"] <= 18 or np.any(env["actions"] < 0) or np.any(
        env["actions"] > 17):
      return f"action set {env['actions']}"
    return None
  return FuncCase(run, None, detail=detail)


def _env(rng, state):
  return state.pool[int(rng.integers(0, len(state.pool)))]


def _handle_mutation(rng, state):
  if rng.random() < 0.5 and state.dead:
    return "destroyed_handle", state.dead[-1], (tf.errors.NotFoundError,
                                                tf.errors.InvalidArgumentError)
  return "wrong_resource_kind", state.variable.handle, (tf.errors.InvalidArgumentError,
                                                         tf.errors.NotFoundError)


def gen_ale_reset(rng):
  state = _ale(rng)
  env = _env(rng, state)
  idx = _slots(rng, env)
  seeded = rng.random() < 0.4
  seeds = (rng.integers(0, 2**31, size=len(idx)) if seeded else np.zeros(0)).astype(np.int64)
  only_played = bool(rng.random() < 0.3)
  handle = env["handle"]
  mutation = None
  expect = _invalid()
  if rng.random() < 0.4:
    mutation = str(rng.choice(["indices", "seeds_range", "seeds_length", "seeds_rank",
                               "handle", "indices_dtype"]))
  if mutation == "indices":
    kind, idx = _bad_indices(rng, env)
    mutation = f"indices_{kind}"
    seeds = np.zeros(0, np.int64)
  elif mutation == "seeds_range":
    idx = np.array([0], np.int32)
    seeds = np.array([int(rng.choice([-1, 2**31, 2**62, -2**63]))], np.int64)
  elif mutation == "seeds_length":
    idx = np.array([0], np.int32)
    seeds = np.zeros(2, np.int64)
  elif mutation == "seeds_rank":
    idx = np.array([0], np.int32)
    seeds = np.zeros((1, 1), np.int64)
  elif mutation == "handle":
    mutation, handle, expect = _handle_mutation(rng, state)
    idx, seeds = np.array([0], np.int32), np.zeros(0, np.int64)
  elif mutation == "indices_dtype":
    expect = (TypeError, tf.errors.InvalidArgumentError)

  def call():
    indices = tf.constant(idx, tf.int64 if mutation == "indices_dtype" else tf.int32)
    state.ale.reset(handle, indices, tf.constant(seeds, tf.int64), only_played=only_played)

  if mutation is not None:
    return FuncCase(call, mutation, expect, f"slots {idx.tolist()} seeds {seeds.tolist()}")

  def run():
    call()
    for s in idx:
      env["needs_reset"][s] = False
      env["has_obs"][s] = True
    return None
  return FuncCase(run, None, detail=f"slots {idx.tolist()} seeded={seeded}")


def gen_ale_step(rng):
  state = _ale(rng)
  env = _env(rng, state)
  # Slots that may step, mostly; now and then one that needs a reset (bad).
  idx = _slots(rng, env, allow=lambda s: not env["needs_reset"][s])
  actions = rng.integers(0, env["num_actions"], size=len(idx)).astype(np.int32)
  auto_reset = bool(rng.random() < 0.7)
  handle = env["handle"]
  mutation = None
  expect = _invalid()
  if rng.random() < 0.35:
    mutation = str(rng.choice(["action_range", "actions_length", "needs_reset", "indices",
                               "handle", "actions_dtype"]))
  if mutation == "action_range":
    if len(idx) == 0:
      idx = np.array([0], np.int32)
    actions = np.zeros(len(idx), np.int32)
    actions[-1] = rng.choice([env["num_actions"], -1, 2**31 - 1, -2**31])
  elif mutation == "actions_length":
    actions = np.zeros(len(idx) + 1, np.int32)
  elif mutation == "needs_reset":
    waiting = [s for s, nr in enumerate(env["needs_reset"]) if nr]
    if not waiting:
      mutation = "actions_length"
      actions = np.zeros(len(idx) + 1, np.int32)
    else:
      idx = np.array([waiting[0]], np.int32)
      actions = np.zeros(1, np.int32)
  elif mutation == "indices":
    kind, idx = _bad_indices(rng, env)
    mutation = f"indices_{kind}"
    actions = np.zeros(idx.shape[0], np.int32)
  elif mutation == "handle":
    mutation, handle, expect = _handle_mutation(rng, state)
    idx, actions = np.array([0], np.int32), np.zeros(1, np.int32)
  elif mutation == "actions_dtype":
    expect = (TypeError, tf.errors.InvalidArgumentError)

  def call():
    acts = tf.constant(actions, tf.float32 if mutation == "actions_dtype" else tf.int32)
    return state.ale.step(handle, tf.constant(idx), acts, auto_reset=auto_reset)

  if mutation is not None:
    return FuncCase(call, mutation, expect, f"slots {idx.tolist()} actions {actions.tolist()}")

  def run():
    reward, terminated, truncated, game_over = [t.numpy() for t in call()]
    k = len(idx)
    if reward.shape != (k,) or reward.dtype != np.float32 or terminated.shape != (k,):
      return f"outputs shaped {reward.shape} {terminated.shape}"
    if not np.all(np.isfinite(reward)):
      return f"reward {reward}"
    if np.any(truncated & ~game_over):
      return "truncated without game_over"
    if not env["config"]["episodic_life"] and np.any(terminated != (game_over & ~truncated)):
      return "terminated and game_over disagree"
    for s, over in zip(idx, game_over):
      if over and not auto_reset:
        env["needs_reset"][s] = True
    return None
  return FuncCase(run, None, detail=f"slots {idx.tolist()} auto_reset={auto_reset}")


def gen_ale_observe(rng):
  state = _ale(rng)
  env = _env(rng, state)
  idx = _slots(rng, env, allow=lambda s: env["has_obs"][s])
  attrs = dict(height=env["height"], width=env["width"], channels=env["channels"])
  handle = env["handle"]
  mutation = None
  expect = _invalid()
  if rng.random() < 0.4:
    mutation = str(rng.choice(["shape_attrs", "no_observation", "indices", "handle",
                               "attr_range"]))
  if mutation == "shape_attrs":
    key = str(rng.choice(["height", "width", "channels"]))
    attrs[key] += int(rng.choice([1, -1 if attrs[key] > 1 else 2, 1000]))
    if len(idx) == 0:
      idx = np.zeros(0, np.int32)
  elif mutation == "no_observation":
    waiting = [s for s, h in enumerate(env["has_obs"]) if not h]
    if waiting:
      idx = np.array([waiting[0]], np.int32)
    else:
      mutation = "shape_attrs"
      attrs["channels"] += 1
  elif mutation == "indices":
    kind, idx = _bad_indices(rng, env)
    mutation = f"indices_{kind}"
  elif mutation == "handle":
    mutation, handle, expect = _handle_mutation(rng, state)
    idx = np.array([0], np.int32)
  elif mutation == "attr_range":
    attrs["height"] = int(rng.choice([0, -1]))
    expect = _invalid_or_type()

  def call():
    return state.ale.observe(handle, tf.constant(idx), **attrs)

  if mutation is not None:
    return FuncCase(call, mutation, expect, f"slots {idx.tolist()} {attrs}")

  def run():
    obs = call().numpy()
    want = (len(idx), env["height"], env["width"], env["channels"])
    if obs.shape != want or obs.dtype != np.uint8:
      return f"observation {obs.shape} {obs.dtype}, expected {want} uint8"
    return None
  return FuncCase(run, None, detail=f"slots {idx.tolist()}")


def gen_ale_action_set(rng):
  state = _ale(rng)
  env = _env(rng, state)
  if rng.random() < 0.3:
    mutation, handle, expect = _handle_mutation(rng, state)
    return FuncCase(lambda: state.ale.action_set(handle), mutation, expect)

  def run():
    actions = state.ale.action_set(env["handle"]).numpy()
    if not np.array_equal(actions, env["actions"]):
      return f"action set {actions} changed from {env['actions']}"
    return None
  return FuncCase(run)


def gen_ale_kernel_info(rng):
  state = _ale(rng)
  del rng

  def run():
    info = state.ale.kernel_info()
    names = ["grey_levels_avx512_vbmi", "grey_levels_portable", "resize_avx2",
             "resize_portable"]
    if sorted(info) != sorted(names):
      return f"paths {sorted(info)}"
    return None
  return FuncCase(run)


# ----------------------------------------------------------------------------
# The fuzzer's own tests.


def gen_selftest_crash(rng):
  del rng
  return FuncCase(lambda: os.kill(os.getpid(), signal.SIGSEGV), None)


def gen_selftest_hang(rng):
  del rng
  return FuncCase(lambda: time.sleep(3600), None)


GENERATORS = {op: globals()["gen_" + op] for op in OPS + SELFTEST_OPS}


# ----------------------------------------------------------------------------
# The worker: runs calls, one JSON line before (start) and after (result).


def call_rng(seed, op, i):
  return np.random.default_rng([seed, OP_IDS[op], i])


def run_one(seed, op, i, ale_rng, log=None):
  """Generates and runs call i of op; returns its result record. The case
  (its mutation and shapes) goes to `log` before it runs, so that a crash is
  attributed."""
  rng = call_rng(seed, op, i)
  if op.startswith("ale_"):
    _import_tf()
    _ale(ale_rng)
  elif op.startswith("population_"):
    _import_tf()
  record = dict(op=op, i=i)
  try:
    case = GENERATORS[op](rng)
  except Exception as e:  # pylint: disable=broad-except
    record.update(outcome="valid_rejected", mutation=None,
                  detail=f"making the input failed: {type(e).__name__}: {e}"[:400],
                  error_type=type(e).__name__, message=str(e)[:400])
    return record
  record.update(mutation=case.mutation, detail=case.detail[:300])
  if log is not None:
    log.write(json.dumps(dict(op=op, i=i, case=True, mutation=case.mutation,
                              detail=record["detail"])) + "\n")
    log.flush()
  try:
    wrong = case.run()
  except Exception as e:  # pylint: disable=broad-except
    message = getattr(e, "message", None) or str(e)
    record.update(error_type=type(e).__name__, message=message[:500])
    if case.mutation is None:
      record["outcome"] = "valid_rejected"
      record["trace"] = traceback.format_exc()[-1500:]
    elif isinstance(e, case.expect) and message.strip():
      record["outcome"] = "rejected"
    else:
      record["outcome"] = "wrong_error"
    return record
  if case.mutation is not None:
    record["outcome"] = "bad_accepted"
  elif wrong:
    record.update(outcome="wrong_result", message=wrong[:500])
  else:
    record["outcome"] = "ok"
  return record


def worker(args):
  jobs = [j.split(":") for j in args.jobs.split(",")]
  ale_rng = np.random.default_rng([args.seed, 999, int(jobs[0][1])])
  with open(args.log, "a") as log:
    for op, first, count in jobs:
      for i in range(int(first), int(first) + int(count)):
        log.write(json.dumps(dict(op=op, i=i, start=True)) + "\n")
        log.flush()
        record = run_one(args.seed, op, i, ale_rng, log)
        log.write(json.dumps(record) + "\n")
        log.flush()


# ----------------------------------------------------------------------------
# The parent: deals calls to worker subprocesses and counts.


def _limit_memory(gigabytes):
  def limit():
    size = int(gigabytes * 2**30)
    resource.setrlimit(resource.RLIMIT_AS, (size, size))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    os.setsid()
  return limit


def _run_worker(jobs, seed, timeout, memory_gb, env):
  """Runs one worker over `jobs`; returns (records, started-but-unfinished
  (op, i) or None, its case {mutation, detail}, how it ended, stderr tail)."""
  with tempfile.NamedTemporaryFile("w", suffix=".jsonl", delete=False) as f:
    log_path = f.name
  spec = ",".join(f"{op}:{first}:{count}" for op, first, count in jobs)
  cmd = [sys.executable, os.path.abspath(__file__), "--worker", f"--jobs={spec}",
         f"--seed={seed}", f"--log={log_path}"]
  err_path = log_path + ".err"
  with open(err_path, "w") as err:
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=err, env=env, cwd=_ROOT,
                            preexec_fn=_limit_memory(memory_gb))
  last_size, last_change, ended = -1, time.time(), None
  while True:
    try:
      proc.wait(timeout=0.5)
      break
    except subprocess.TimeoutExpired:
      size = os.path.getsize(log_path)
      if size != last_size:
        last_size, last_change = size, time.time()
      elif time.time() - last_change > timeout:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        ended = "hang"
        break
  records, started, case = [], None, {}
  with open(log_path) as f:
    for line in f:
      if not line.endswith("\n"):
        break
      r = json.loads(line)
      if r.get("start"):
        started, case = (r["op"], r["i"]), {}
      elif r.get("case"):
        case = dict(mutation=r["mutation"], detail=r["detail"])
      else:
        records.append(r)
        started = None
  with open(err_path, errors="replace") as f:
    stderr = f.read()[-3000:]
  os.remove(log_path)
  os.remove(err_path)
  if ended is None:
    rc = proc.returncode
    ended = "ok" if rc == 0 else (f"signal {-rc} ({signal.Signals(-rc).name})" if rc < 0
                                  else f"exit status {rc}")
  return records, started, case, ended, stderr


def _repro(seed, op, i, jobs):
  """The command line that reruns call i of op (an ALE call after the calls
  of its worker before it, which made the emulators' state)."""
  command = f"python benchmarks/fuzz_ops.py --seed={seed} --repro={op}:{i}"
  if op.startswith("ale_"):
    command += " --replay=" + ",".join(f"{o}:{f}:{c}" for o, f, c in jobs)
  return command


def fuzz(ops, calls, seed=0, batch=250, timeout=120.0, memory_gb=8.0, env=None, verbose=True):
  """Runs `calls` calls of each op in `ops`; returns the summary dict."""
  env = dict(os.environ if env is None else env)
  env.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
  env["PYTHONPATH"] = os.pathsep.join([_ROOT] + [p for p in env.get("PYTHONPATH", "").split(
      os.pathsep) if p])
  queue = collections.deque((op, 0, calls) for op in ops)
  per_op = {op: dict(collections.Counter({o: 0 for o in OUTCOMES}), calls=0) for op in ops}
  mutations = {op: collections.Counter() for op in ops}
  messages = {op: {} for op in ops}
  bugs = []
  workers = 0
  start = time.time()
  while queue:
    # Up to `batch` calls per worker, across ops.
    jobs, room = [], batch
    while queue and room > 0:
      op, first, count = queue.popleft()
      take = min(count, room)
      jobs.append((op, first, take))
      if take < count:
        queue.appendleft((op, first + take, count - take))
      room -= take
    workers += 1
    records, started, case, ended, stderr = _run_worker(jobs, seed, timeout, memory_gb, env)
    for r in records:
      op = r["op"]
      per_op[op]["calls"] += 1
      per_op[op][r["outcome"]] += 1
      mutations[op][r["mutation"] or "valid"] += 1
      if r["outcome"] == "rejected" and r["mutation"] not in messages[op]:
        messages[op][r["mutation"]] = f"{r['error_type']}: {r['message']}"[:300]
      if r["outcome"] in BUGS:
        bugs.append(dict(r, repro=_repro(seed, op, r["i"], jobs)))
    if ended != "ok":
      if started is None:
        raise RuntimeError(f"a fuzz worker ended with {ended} between calls: {stderr}")
      op, i = started
      outcome = "hang" if ended == "hang" else "crash"
      per_op[op]["calls"] += 1
      per_op[op][outcome] += 1
      mutations[op][case.get("mutation") or "valid"] += 1
      job = next(j for j, (o, f, c) in enumerate(jobs) if o == op and f <= i < f + c)
      first, count = jobs[job][1], jobs[job][2]
      bugs.append(dict(op=op, i=i, outcome=outcome, ended=ended, stderr=stderr[-1500:],
                       mutation=case.get("mutation"), detail=case.get("detail", ""),
                       repro=_repro(seed, op, i, jobs)))
      if verbose:
        print(f"  {op} call {i}: {outcome} ({ended}) [{case.get('mutation') or 'valid'}] "
              f"{case.get('detail', '')}", flush=True)
      # The worker ran its jobs in order: the rest of the crashed job and
      # the jobs after it go back to the front of the queue.
      rest = [(op, i + 1, first + count - i - 1)] if i + 1 < first + count else []
      queue.extendleft(reversed(rest + jobs[job + 1:]))
    if verbose:
      done = sum(v["calls"] for v in per_op.values())
      print(f"  {done} / {calls * len(ops)} calls, {len(bugs)} bugs, "
            f"{time.time() - start:.0f} s", flush=True)
  totals = collections.Counter()
  for v in per_op.values():
    totals.update(v)
  kinds = collections.Counter(f"{b['op']} {b['outcome']} [{b.get('mutation') or 'valid'}]"
                              for b in bugs)
  return dict(
      bug_kinds=dict(kinds.most_common()),
      config=dict(ops=list(ops), calls_per_op=calls, seed=seed, batch=batch,
                  timeout_s=timeout, memory_gb=memory_gb,
                  environment={k: env[k] for k in env if k.endswith("_OPS_LIBRARY") or k in (
                      "TFRL_POPULATION_ISA", "TFRL_POPULATION_NO_AMX", "TFRL_ALE_NO_SIMD")}),
      per_op=per_op, totals=dict(totals), mutations={k: dict(v) for k, v in mutations.items()},
      first_messages=messages, bugs=bugs, workers=workers,
      seconds=round(time.time() - start, 1))


def table(summary):
  cols = ("calls",) + OUTCOMES
  head = ["op"] + list(cols)
  rows = [[op] + [str(v[c]) for c in cols] for op, v in summary["per_op"].items()]
  rows.append(["total"] + [str(summary["totals"].get(c, 0)) for c in cols])
  widths = [max(len(r[i]) for r in rows + [head]) for i in range(len(head))]
  fmt = lambda r: "  ".join(s.rjust(w) if i else s.ljust(w) for i, (s, w) in  # noqa: E731
                            enumerate(zip(r, widths)))
  return "\n".join([fmt(head), fmt(["-" * w for w in widths])] + [fmt(r) for r in rows])


def main(argv=None):
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--calls", type=int, default=5000, help="calls per op")
  parser.add_argument("--ops", default=",".join(OPS), help="comma-separated ops")
  parser.add_argument("--seed", type=int, default=0)
  parser.add_argument("--batch", type=int, default=250, help="calls per subprocess")
  parser.add_argument("--timeout", type=float, default=120.0,
                      help="seconds without progress that count as a hang")
  parser.add_argument("--memory_gb", type=float, default=8.0,
                      help="address space limit of each worker")
  parser.add_argument("--out", default="fuzz_ops.json",
                      help="JSON path (benchmarks/results/fuzz_ops_<machine>.json to keep it)")
  parser.add_argument("--repro", help="OP:N runs call N of OP here and prints it")
  parser.add_argument("--replay", default=None,
                      help="with --repro of an ALE op: its worker's jobs (OP:FIRST:COUNT,...), "
                      "run in order up to the call")
  parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
  parser.add_argument("--jobs", help=argparse.SUPPRESS)
  parser.add_argument("--log", help=argparse.SUPPRESS)
  args = parser.parse_args(argv)
  if args.worker:
    return worker(args)
  if args.repro:
    op, i = args.repro.split(":")
    i = int(i)
    jobs = [(o, int(f), int(c)) for o, f, c in (j.split(":") for j in args.replay.split(","))
           ] if args.replay else [(op, i, 1)]
    ale_rng = np.random.default_rng([args.seed, 999, jobs[0][1]])
    for o, first, count in jobs:
      for j in range(first, first + count):
        record = run_one(args.seed, o, j, ale_rng)
        if (o, j) == (op, i):
          print(json.dumps(record, indent=1))
          return 0
    print(f"{op}:{i} is not in --replay")
    return 1
  ops = [o for o in args.ops.split(",") if o]
  unknown = [o for o in ops if o not in GENERATORS]
  if unknown:
    parser.error(f"unknown ops {unknown}; known: {', '.join(OPS)}")
  summary = fuzz(ops, args.calls, args.seed, args.batch, args.timeout, args.memory_gb)
  print(table(summary))
  for kind, count in summary["bug_kinds"].items():
    print(f"{count:6d}  {kind}")
  for bug in summary["bugs"][:30]:
    print(f"BUG {bug['op']} call {bug['i']}: {bug['outcome']} "
          f"[{bug.get('mutation') or 'valid'}] {bug.get('message') or bug.get('ended', '')}"
          f"\n    {bug.get('detail', '')}\n    repro: {bug['repro']}")
  from benchmarks import provenance  # pylint: disable=import-outside-toplevel
  summary = dict(provenance.provenance(), **summary)
  if args.out:
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out, "w") as f:
      json.dump(summary, f, indent=1, default=str)
    print(f"wrote {args.out}")
  return 0 if not summary["bugs"] else 1


if __name__ == "__main__":
  sys.exit(main())
