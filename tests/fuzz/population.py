"""Fuzz calls of the population ops (library `population`).

Each `gen_<op>(rng)` returns a Case: valid input (checked against
`tfrl.ops.reference` through tests/fuzz/checks.py) or input made bad in one
named way (a wrong rank, shape, length, dtype or attr, an index out of range,
an output whose size overflows int64...) that must raise the expected error.
The incremental ops are played for 1 to 4 steps with values (NaN and inf
too) appearing and disappearing, every step checked against the full
convolution of that step's input.
"""

import types

import numpy as np
import tensorflow as tf

from tests.fuzz import cases
from tests.fuzz import checks
from tests.fuzz.cases import FuncCase, INT32_EXTREMES

_LIB = []


def lib():
  """The compiled population library, loaded once per worker."""
  if not _LIB:
    from tfrl.ops import population  # pylint: disable=import-outside-toplevel
    _LIB.append(population.load_library())
  return _LIB[0]


def has_delta_conv2d() -> bool:
  """Whether the library has the per-layer op (TFRL_BUILD_DELTA_CONV2D=1)."""
  return hasattr(lib(), "population_delta_conv2d")


def _pick(rng, mutations, p):
  return str(rng.choice(mutations)) if rng.random() < p else None


def _case(rng, c, mutations, huge_empty, mutate, op, check):
  """The call of `op` on c.args: made bad by `mutate` (or a valid call with
  huge empty inputs) for half the calls, else valid, its result checked by
  check(c, y) (an error string, or None)."""
  mutation = _pick(rng, mutations, 0.5)
  if mutation == "huge_empty_valid":
    return huge_empty(rng, c)
  if mutation is not None:
    expect = mutate(rng, c, mutation)
    return FuncCase(lambda: getattr(lib(), op)(**c.args), mutation, expect, c.detail)
  return FuncCase(lambda: check(c, getattr(lib(), op)(**c.args).numpy()), None,
                  detail=c.detail)


def _check_rows(y, b, active, index, rows_result, epilogue_bias, relu, k, shape):
  """Inactive rows zero; active ones (reshaped to `shape`) against rows_result."""
  for r in range(b):
    if not active[r]:
      if np.any(y[r] != 0):
        return f"inactive row {r} not zero"
      continue
    bias = epilogue_bias[index[r]] if epilogue_bias is not None else None
    res = checks.apply_epilogue(rows_result[r], bias, relu)
    err = checks.compare(y[r].reshape(shape), *res, k=k, what=f"y[{r}]")
    if err:
      return err
  return None


# ----------------------------------------------------------------------------
# PopulationMatmul.


def _matmul_inputs(rng):
  c = types.SimpleNamespace()
  c.b, c.m = cases.size(rng, (1, 10)), cases.size(rng, (1, 4), (4, 12))
  c.k = cases.size(rng, (1, 40), (100, 260))
  c.n = cases.size(rng, (1, 40), (60, 140), p_large=0.25)
  c.p = cases.size(rng, (1, 6), p_zero=0.03)
  c.dtype = str(rng.choice(["float32", "bfloat16"]))
  c.epilogue = str(rng.choice(["none", "bias", "relu", "bias_relu"]))
  c.x = cases.rand_floats(rng, (c.b, c.m, c.k), cases.special_rate(rng))
  w, c.wq = cases.weights(rng, (c.p, c.k, c.n), c.dtype, cases.special_rate(rng))
  c.active = rng.random(c.b) < rng.choice([1.0, 0.7, 0.3])
  if c.p == 0:
    c.active[:] = False
  c.index = cases.network_index(rng, c.b, c.p, c.active)
  c.with_bias = "bias" in c.epilogue
  c.bias = cases.rand_floats(rng, (c.p, c.n), cases.special_rate(rng)) if c.with_bias else None
  bias = tf.constant(c.bias) if c.with_bias else (
      cases.empty_bias() if rng.random() < 0.7 else tf.ones([3, 2]))  # ignored when unused
  c.args = dict(x=tf.constant(c.x), w=w, index=tf.constant(c.index),
                active=tf.constant(c.active), bias=bias, epilogue=c.epilogue)
  c.detail = f"x{c.x.shape} w{(c.p, c.k, c.n)} {c.dtype} {c.epilogue}"
  return c


MATMUL_MUTATIONS = (
    "x_rank", "w_rank", "k_mismatch", "index_length", "active_length", "index_rank",
    "index_out_of_range", "bias_shape", "epilogue_attr", "w_dtype", "x_dtype",
    "output_overflows", "huge_empty_valid")


def _matmul_index_out_of_range(rng, c):
  if c.b == 0:
    c.b = 1
    c.args.update(x=tf.constant(cases.rand_floats(rng, (1, c.m, c.k))))
    c.index, c.active = np.zeros(1, np.int32), np.ones(1, bool)
  r = int(rng.integers(0, c.b))
  c.active[r] = True
  c.index[r] = rng.choice([c.p, c.p + 1, -1, *INT32_EXTREMES])
  c.args.update(index=tf.constant(c.index), active=tf.constant(c.active))


def _matmul_mutate(rng, c, mutation):
  """Makes c.args bad in the named way; returns the errors it must raise."""
  b, m, k, n, p, args = c.b, c.m, c.k, c.n, c.p, c.args
  if mutation == "x_rank":
    args["x"] = tf.constant(cases.rand_floats(rng, (b, m * k)) if rng.random() < 0.5 else
                            cases.rand_floats(rng, (b, m, k, 1)))
  elif mutation == "w_rank":
    args["w"] = tf.constant(cases.rand_floats(rng, (p, k)))
  elif mutation == "k_mismatch":
    args["w"] = tf.constant(cases.rand_floats(rng, (p, k + int(rng.choice([1, 2, 7])), n)))
  elif mutation == "index_length":
    args["index"] = tf.constant(np.zeros(b + int(rng.choice([1, -1])) if b else 1, np.int32))
  elif mutation == "active_length":
    args["active"] = tf.constant(np.ones(b + 1, bool))
  elif mutation == "index_rank":
    args["index"] = tf.constant(c.index.reshape(b, 1) if rng.random() < 0.5 else np.int32(0))
  elif mutation == "index_out_of_range":
    _matmul_index_out_of_range(rng, c)
  elif mutation == "bias_shape":
    args["epilogue"] = str(rng.choice(["bias", "bias_relu"]))
    args["bias"] = tf.constant(cases.rand_floats(rng, [(p + 1, n), (p, n + 1), (n,), (0, 0)][
        int(rng.integers(0, 4))]))
  elif mutation == "epilogue_attr":
    args["epilogue"] = str(rng.choice(["tanh", "", "BIAS"]))
    return cases.invalid_or_type()
  elif mutation == "w_dtype":
    args["w"] = tf.cast(args["w"], str(rng.choice(["float16", "float64", "int32"])))
    return (TypeError, tf.errors.InvalidArgumentError, tf.errors.NotFoundError)
  elif mutation == "x_dtype":
    args["x"] = tf.cast(args["x"], str(rng.choice(["float64", "int32", "bfloat16"])))
    return (TypeError, tf.errors.InvalidArgumentError)
  elif mutation == "output_overflows":
    # x [B, 2^40, 0] and w [P, 0, 2^40]: y [B, 2^40, 2^40] cannot exist.
    b2 = max(b, 1)
    args.update(x=tf.zeros([b2, 2**40, 0]), w=tf.zeros([1, 0, 2**40]),
                index=tf.zeros([b2], tf.int32), active=tf.ones([b2], tf.bool),
                epilogue="none", bias=cases.empty_bias())
  return cases.invalid()


def _matmul_huge_empty(rng, c):
  """Valid: an empty w with a huge P (K = 0), or an empty x with huge M (N = 0)."""
  b2 = max(c.b, 1)
  if rng.random() < 0.5:
    huge_p = int(rng.choice([2**31 - 1, 2**40, 2**62]))
    index = rng.integers(0, 2**31 - 1, size=b2).astype(np.int32)
    args = dict(x=tf.zeros([b2, c.m, 0]), w=tf.zeros([huge_p, 0, c.n]),
                index=tf.constant(index), active=tf.ones([b2], tf.bool),
                epilogue=str(rng.choice(["none", "relu"])), bias=cases.empty_bias())
    want, detail = (b2, c.m, c.n), f"x[{b2},{c.m},0] w[{huge_p},0,{c.n}]"
  else:
    huge_m = int(rng.choice([2**31, 2**40]))
    args = dict(x=tf.zeros([b2, huge_m, 0]), w=tf.zeros([c.p or 1, 0, 0]),
                index=tf.zeros([b2], tf.int32), active=tf.ones([b2], tf.bool),
                epilogue="none", bias=cases.empty_bias())
    want, detail = (b2, huge_m, 0), f"x[{b2},{huge_m},0] w[{c.p or 1},0,0]"

  def run():
    y = lib().population_matmul(**args).numpy()
    if y.shape != want or np.any(y != 0):
      return f"y shape {y.shape} (expected {want}) or nonzero values"
    return None
  return FuncCase(run, None, detail=detail)


def _matmul_check(c, y):
  if y.shape != (c.b, c.m, c.n):
    return f"y shape {y.shape}, expected {(c.b, c.m, c.n)}"
  rows = np.flatnonzero(c.active)
  result = checks.gemm_check(c.x[rows], c.wq, c.index[rows])
  by_row = {r: tuple(a[j] for a in result) for j, r in enumerate(rows)}
  return _check_rows(y, c.b, c.active, c.index, by_row, c.bias, "relu" in c.epilogue, c.k,
                     (c.m, c.n))


def gen_population_matmul(rng):
  return _case(rng, _matmul_inputs(rng), MATMUL_MUTATIONS, _matmul_huge_empty, _matmul_mutate,
               "population_matmul", _matmul_check)


# ----------------------------------------------------------------------------
# PopulationConv2D.


def _conv_inputs(rng):
  c = types.SimpleNamespace()
  c.b = cases.size(rng, (1, 6))
  c.h, c.w = int(rng.integers(1, 13)), int(rng.integers(1, 13))
  c.c = cases.size(rng, (1, 6), p_zero=0.04)
  c.ks = int(rng.integers(1, min(c.h, c.w) + 1))
  c.stride = int(rng.integers(1, 5)) if rng.random() < 0.95 else 2**31 - 1
  c.n = cases.size(rng, (1, 20), (30, 70), p_large=0.15)
  c.p = cases.size(rng, (1, 5), p_zero=0.03)
  c.dtype = str(rng.choice(["float32", "bfloat16"]))
  c.tx = str(rng.choice(["float32", "uint8"]))
  c.input_dtype = "bfloat16" if c.dtype == "bfloat16" and rng.random() < 0.5 else "float32"
  c.scale = cases.input_scale(rng)
  c.epilogue = str(rng.choice(["none", "bias", "relu", "bias_relu"]))
  c.x = cases.conv_input(rng, (c.b, c.h, c.w, c.c), c.tx, cases.special_rate(rng))
  c.kk = c.ks * c.ks * c.c
  c.wt, c.wq = cases.weights(rng, (c.p, c.kk, c.n), c.dtype, cases.special_rate(rng))
  c.active = rng.random(c.b) < rng.choice([1.0, 0.6])
  if c.p == 0:
    c.active[:] = False
  c.index = cases.network_index(rng, c.b, c.p, c.active)
  with_bias = "bias" in c.epilogue
  c.bias = cases.rand_floats(rng, (c.p, c.n), cases.special_rate(rng)) if with_bias else None
  c.args = dict(x=tf.constant(c.x), w=c.wt, index=tf.constant(c.index),
                active=tf.constant(c.active),
                bias=tf.constant(c.bias) if with_bias else cases.empty_bias(),
                kernel_size=c.ks, stride=c.stride, input_dtype=c.input_dtype,
                input_scale=c.scale, epilogue=c.epilogue)
  c.detail = (f"x{c.x.shape} {c.tx} w{(c.p, c.kk, c.n)} {c.dtype} ks{c.ks} s{c.stride} "
              f"in={c.input_dtype} scale={c.scale} {c.epilogue}")
  return c


CONV_MUTATIONS = (
    "x_rank", "w_rank", "k_mismatch", "image_too_small", "index_length", "active_length",
    "index_out_of_range", "bias_shape", "kernel_size_attr", "stride_attr",
    "input_dtype_needs_bf16", "input_dtype_attr", "w_dtype", "x_dtype", "output_overflows",
    "kernel_rows_overflow", "huge_empty_valid")


def _conv_mutate_shapes(rng, c, mutation):
  """The bad shapes and indices of a convolution; False if not one of them."""
  b, h, w, ch, p, kk, n, args = c.b, c.h, c.w, c.c, c.p, c.kk, c.n, c.args
  if mutation == "x_rank":
    args["x"] = tf.constant(cases.conv_input(rng, (b, h, w * ch), c.tx, 0))
  elif mutation == "w_rank":
    args["w"] = tf.constant(cases.rand_floats(rng, (p, kk * n)))
  elif mutation == "k_mismatch":
    args["w"] = tf.cast(tf.constant(cases.rand_floats(rng, (p, kk + int(rng.choice([1, 3])),
                                                             n))), c.wt.dtype)
  elif mutation == "image_too_small":
    args["kernel_size"] = int(rng.choice([min(h, w) + 1, max(h, w) + 5, 2**31 - 1]))
  elif mutation == "index_length":
    args["index"] = tf.constant(np.zeros(b + 1, np.int32))
  elif mutation == "active_length":
    args["active"] = tf.constant(np.ones(max(b - 1, 0) if b > 0 else 2, bool))
  elif mutation == "index_out_of_range":
    if b == 0:
      c.b = b = 1
      args["x"] = tf.constant(cases.conv_input(rng, (1, h, w, ch), c.tx, 0))
      c.index, c.active = np.zeros(1, np.int32), np.ones(1, bool)
    r = int(rng.integers(0, b))
    c.active[r] = True
    c.index[r] = rng.choice([p, -1, *INT32_EXTREMES])
    args.update(index=tf.constant(c.index), active=tf.constant(c.active))
  elif mutation == "bias_shape":
    args["epilogue"] = "bias"
    args["bias"] = tf.constant(cases.rand_floats(rng, [(p + 1, n), (p, n + 2), (p * n,)][
        int(rng.integers(0, 3))]))
  else:
    return False
  return True


def _conv_mutate(rng, c, mutation):
  """Makes c.args bad in the named way; returns the errors it must raise."""
  args = c.args
  if _conv_mutate_shapes(rng, c, mutation):
    return cases.invalid()
  if mutation == "kernel_size_attr":
    args["kernel_size"] = int(rng.choice([0, -1, -2**31]))
    return cases.invalid_or_type()
  if mutation == "stride_attr":
    args["stride"] = int(rng.choice([0, -3]))
    return cases.invalid_or_type()
  if mutation == "input_dtype_needs_bf16":
    args["input_dtype"] = "bfloat16"
    args["w"] = tf.constant(c.wq)
  elif mutation == "input_dtype_attr":
    args["input_dtype"] = str(rng.choice(["float16", "int8", ""]))
    return cases.invalid_or_type()
  elif mutation == "w_dtype":
    args["w"] = tf.cast(args["w"], "float16")
    return (TypeError, tf.errors.InvalidArgumentError, tf.errors.NotFoundError)
  elif mutation == "x_dtype":
    args["x"] = tf.cast(args["x"], str(rng.choice(["int32", "float64", "int8"])))
    return (TypeError, tf.errors.InvalidArgumentError, tf.errors.NotFoundError)
  elif mutation == "output_overflows":
    # x [1, 2^31, 2^31, 0] (empty) and N = 2^40: y would have 2^102 elements.
    args.update(x=tf.zeros([1, 2**31, 2**31, 0]), w=tf.zeros([1, 0, 2**40]),
                index=tf.zeros([1], tf.int32), active=tf.ones([1], tf.bool), kernel_size=1,
                stride=1, input_dtype="float32", epilogue="none", bias=cases.empty_bias())
  elif mutation == "kernel_rows_overflow":
    # An empty x with a huge kernel: kernel_size^2 * C overflows int64.
    args.update(x=tf.zeros([0, 2**40, 2**40, 2**20]), w=tf.zeros([1, 0, 3]),
                index=tf.zeros([0], tf.int32), active=tf.zeros([0], tf.bool),
                kernel_size=2**31 - 1, stride=1, input_dtype="float32", epilogue="none",
                bias=cases.empty_bias())
  return cases.invalid()


def _conv_huge_empty(rng, c):
  b2 = max(c.b, 1)
  big = int(rng.choice([2**20, 2**30]))  # B * big^2 must fit in int64
  huge_p = int(rng.choice([1, 2**40]))
  ks2 = int(rng.choice([1, 3]))
  args = dict(c.args, x=tf.zeros([b2, big, big, 0]), w=tf.zeros([huge_p, 0, 0]),
              index=tf.zeros([b2], tf.int32), active=tf.ones([b2], tf.bool),
              kernel_size=ks2, stride=1, input_dtype="float32", epilogue="none",
              bias=cases.empty_bias())

  return cases.shape_case(lambda: lib().population_conv2d(**args),
                          (b2, big - ks2 + 1, big - ks2 + 1, 0), "y",
                          f"x[{b2},{big},{big},0] w[{huge_p},0,0]")


def _conv_check(c, y):
  oh, ow = (c.h - c.ks) // c.stride + 1, (c.w - c.ks) // c.stride + 1
  if y.shape != (c.b, oh, ow, c.n):
    return f"y shape {y.shape}, expected {(c.b, oh, ow, c.n)}"
  f, df = checks.conv_input_f(c.x, c.scale, c.tx, c.input_dtype == "bfloat16")
  refs, _, _ = checks.conv_check(f, df, c.wq, c.index, c.ks, c.stride, np.flatnonzero(c.active))
  return _check_rows(y, c.b, c.active, c.index, refs, c.bias, "relu" in c.epilogue, c.kk,
                     (oh * ow, c.n))


def gen_population_conv2d(rng):
  return _case(rng, _conv_inputs(rng), CONV_MUTATIONS, _conv_huge_empty, _conv_mutate,
               "population_conv2d", _conv_check)
