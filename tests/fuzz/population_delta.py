"""Fuzz calls of the incremental population ops, played for 1 to 4 steps, and
of PopulationKernelInfo.

Every step is checked against the full convolution (`tfrl.ops.reference`) of
that step's input: a NaN or inf that has left the input must not stay in the
accumulator (inf - inf). The incremental ops sum over the nonzero input
values only (a zero input times an inf or NaN weight adds nothing), and so
does the reference they are checked against. Where the library has the
per-layer PopulationDeltaConv2D (TFRL_BUILD_DELTA_CONV2D=1), PopulationDeltaNet
is also compared with the chain of those ops, which it must equal bit for bit
(any NaN equal to any NaN).
"""

import types

import numpy as np
import tensorflow as tf

from tests.fuzz import cases
from tests.fuzz import checks
from tests.fuzz.cases import FuncCase, INT32_EXTREMES
from tests.fuzz.population import has_delta_conv2d, lib
from tfrl.layers import circulant


def _pick(rng, mutations, p):
  return str(rng.choice(mutations)) if rng.random() < p else None


# ----------------------------------------------------------------------------
# PopulationDeltaConv2D (a library built with TFRL_BUILD_DELTA_CONV2D=1).


def _layer_call(c, x_now, x_before, acc_before, fresh_rows, **over):
  a = dict(x=tf.constant(x_now), x_prev=tf.constant(x_before),
           acc_prev=tf.constant(acc_before), w=c.wt, index=tf.constant(c.index),
           fresh=tf.constant(fresh_rows), input_bias=c.bias_t, **c.attrs)
  a.update(over)
  return lib().population_delta_conv2d(**a)


LAYER_MUTATIONS = (
    "x_rank", "x_prev_shape", "acc_prev_shape", "w_rank", "kernel_rows",
    "kernel_larger_than_input", "index_length", "index_rank", "index_out_of_range",
    "fresh_length", "input_bias_shape", "kernel_size_attr", "stride_attr", "x_dtype",
    "output_overflows", "huge_empty_valid")


def _layer_inputs(rng):
  c = types.SimpleNamespace()
  c.b = cases.size(rng, (1, 7))
  dense = rng.random() < 0.3
  c.h, c.w = int(rng.integers(1, 10)), int(rng.integers(1, 10))
  c.c = cases.size(rng, (1, 5), p_zero=0.04)
  if dense:
    c.h = c.w = int(rng.integers(1, 7))
    c.ks, c.stride = c.h, 1
  else:
    c.ks = int(rng.integers(1, min(c.h, c.w) + 1))
    c.stride = int(rng.integers(1, 4)) if rng.random() < 0.95 else 2**31 - 1
  c.n = cases.size(rng, (1, 20), (30, 80), p_large=0.2, p_zero=0.03)
  c.p = int(rng.integers(1, 5))
  c.dtype = str(rng.choice(["float32", "bfloat16"]))
  c.tx = str(rng.choice(["float32", "uint8"]))
  c.scale = (cases.input_scale(rng) if rng.random() < 0.7 else
             (1 / 255 if c.tx == "uint8" else 1.0))
  c.relu = bool(rng.random() < 0.5)
  has_bias = rng.random() < 0.6
  c.bias = cases.rand_floats(rng, (c.p, c.c), cases.special_rate(rng)) if has_bias else None
  c.kk = c.ks * c.ks * c.c
  c.wt, c.wq = cases.weights(rng, (c.p, c.kk, c.n), c.dtype, cases.special_rate(rng))
  c.index = rng.integers(0, c.p, size=c.b).astype(np.int32)
  if dense and rng.random() < 0.5:
    c.index[:] = int(rng.integers(0, c.p))  # runs of one network
  c.oh, c.ow = (c.h - c.ks) // c.stride + 1, (c.w - c.ks) // c.stride + 1
  c.spec = cases.special_rate(rng)
  c.x = cases.conv_input(rng, (c.b, c.h, c.w, c.c), c.tx, c.spec)
  c.attrs = dict(kernel_size=c.ks, stride=c.stride, input_scale=c.scale, input_relu=c.relu)
  c.bias_t = tf.constant(c.bias) if has_bias else cases.empty_bias()
  c.steps = int(rng.integers(1, 5))
  c.acc0 = np.full((c.b, c.oh, c.ow, c.n), np.nan, np.float32)
  c.garbage = cases.conv_input(rng, c.x.shape, c.tx, 0.3)
  c.detail = (f"x{c.x.shape} {c.tx} w{(c.p, c.kk, c.n)} {c.dtype} ks{c.ks} s{c.stride} "
              f"scale={c.scale} relu={c.relu} bias={has_bias} steps={c.steps}")
  return c


def _layer_mutation(rng, c, mutation):
  """(overrides of the call's arguments, the errors they must raise)."""
  b, h, w, ch, p, kk, n, x = c.b, c.h, c.w, c.c, c.p, c.kk, c.n, c.x
  if mutation == "x_rank":
    return dict(x=tf.constant(x.reshape(b, h, w * ch)),
                x_prev=tf.constant(x.reshape(b, h, w * ch))), cases.invalid()
  if mutation == "x_prev_shape":
    return dict(x_prev=tf.constant(cases.conv_input(rng, (b, h, w + 1, ch), c.tx, 0))), \
        cases.invalid()
  if mutation == "index_out_of_range":
    bad = c.index.copy()
    bad[int(rng.integers(0, b))] = rng.choice([p, -1, *INT32_EXTREMES])
    return dict(index=tf.constant(bad)), cases.invalid()
  if mutation == "kernel_size_attr":
    return dict(kernel_size=0), cases.invalid_or_type()
  if mutation == "stride_attr":
    return dict(stride=-1), cases.invalid_or_type()
  if mutation == "x_dtype":
    return (dict(x=tf.cast(tf.constant(x), tf.float64), x_prev=tf.cast(tf.constant(x),
                                                                        tf.float64)),
            (TypeError, tf.errors.InvalidArgumentError, tf.errors.NotFoundError))
  if mutation == "output_overflows":
    return dict(x=tf.zeros([1, 2**31, 2**31, 0]), x_prev=tf.zeros([1, 2**31, 2**31, 0]),
                acc_prev=tf.zeros([1, 1, 1, 1]), w=tf.zeros([1, 0, 2**40]),
                index=tf.zeros([1], tf.int32), fresh=tf.ones([1], tf.bool),
                input_bias=cases.empty_bias(), kernel_size=1, stride=1,
                input_scale=1.0), cases.invalid()
  over = {
      "acc_prev_shape": lambda: dict(acc_prev=tf.zeros([b, c.oh, c.ow, n + 1])),
      "w_rank": lambda: dict(w=tf.zeros([p, kk * n])),
      "kernel_rows": lambda: dict(w=tf.cast(tf.zeros([p, kk + 1, n]), c.wt.dtype)),
      "kernel_larger_than_input": lambda: dict(
          kernel_size=int(rng.choice([max(h, w) + 1, 2**31 - 1]))),
      "index_length": lambda: dict(index=tf.zeros([b + 1], tf.int32)),
      "index_rank": lambda: dict(index=tf.zeros([b, 1], tf.int32)),
      "fresh_length": lambda: dict(fresh=tf.ones([b + 1], tf.bool)),
      "input_bias_shape": lambda: dict(input_bias=[
          tf.ones([p + 1, ch]), tf.ones([p, ch + 1]), tf.ones([p * ch + 1]),
          tf.zeros([0, 1])][int(rng.integers(0, 4))]),
  }[mutation]()
  return over, cases.invalid()


def _layer_huge_empty(rng, c):
  b2 = max(c.b, 1)
  big = int(rng.choice([2**20, 2**30]))  # B * big^2 must fit in int64
  fr2 = rng.random(b2) < 0.5
  huge_p = int(rng.choice([1, 2**40]))

  empty = tf.zeros([b2, big, big, 0])
  return cases.shape_case(lambda: lib().population_delta_conv2d(
      x=empty, x_prev=empty, acc_prev=empty, w=tf.zeros([huge_p, 0, 0]),
      index=tf.zeros([b2], tf.int32), fresh=tf.constant(fr2), input_bias=cases.empty_bias(),
      kernel_size=1, stride=1, input_scale=1.0, input_relu=False), (b2, big, big, 0), "acc",
                          f"x[{b2},{big},{big},0]")


def gen_population_delta_conv2d(rng):
  c = _layer_inputs(rng)
  mutation = _pick(rng, LAYER_MUTATIONS, 0.45)
  fresh = np.ones(c.b, bool)
  if mutation == "huge_empty_valid":
    return _layer_huge_empty(rng, c)
  if mutation == "index_out_of_range" and c.b == 0:
    x1 = np.zeros((1, c.h, c.w, c.c), c.x.dtype)
    return FuncCase(lambda: _layer_call(c, x1, x1, np.zeros((1, c.oh, c.ow, c.n), np.float32),
                                        np.ones(1, bool), index=tf.constant([c.p], tf.int32)),
                    mutation, cases.invalid(), c.detail)
  if mutation is not None:
    over, expect = _layer_mutation(rng, c, mutation)
    return FuncCase(lambda: _layer_call(c, c.x, c.garbage, c.acc0, fresh, **over), mutation,
                    expect, c.detail)

  def run():
    tracker = checks.Tracker()
    acc, xp, xt, fr = c.acc0, c.garbage, c.x, fresh
    for step in range(c.steps):
      if step > 0:
        xp, xt = xt, cases.next_input(rng, xt, c.tx, c.spec)
        fr = rng.random(c.b) < 0.2
      out = _layer_call(c, xt, xp, acc, fr).numpy()
      if out.shape != (c.b, c.oh, c.ow, c.n):
        return f"step {step}: acc shape {out.shape}, expected {(c.b, c.oh, c.ow, c.n)}"
      f, df = checks.layer_f(xt, c.index, c.scale, c.bias, c.relu)
      err = checks.check_delta_layer(out, f, df, c.wq, c.index, c.ks, c.stride, fr, tracker,
                                     f"step {step}: acc")
      if err:
        return err
      acc = out
    return None
  return FuncCase(run, None, detail=c.detail)


# ----------------------------------------------------------------------------
# PopulationDeltaNet.


def _net_layers(rng, c):
  """(kernel size, stride, N) of 1 to 3 layers over [h, w], the last one dense."""
  layers, hh, ww = [], c.h, c.w
  num_layers = int(rng.integers(1, 4))
  for i in range(num_layers):
    if c.huge and i == 0:  # down to one position
      ks, stride = hh - int(rng.integers(0, 3)), hh
    elif i == num_layers - 1:
      ks = min(hh, ww)
      stride = max(hh, ww) - ks + 1
    else:
      ks = int(rng.integers(1, min(hh, ww) + 1))
      stride = int(rng.integers(1, 4))
    n = cases.size(rng, (1, 10), (20, 70), p_large=0.2, p_zero=0.04)
    layers.append((ks, stride, n))
    hh, ww = (hh - ks) // stride + 1, (ww - ks) // stride + 1
  return layers


def _net_call(c, obs_now, obs_before, acc_before, fresh_rows, **over):
  a = dict(obs=tf.constant(obs_now), obs_prev=tf.constant(obs_before),
           acc_prev=[tf.constant(v) for v in acc_before], w=c.kernels,
           bias=[tf.constant(v) for v in c.biases], index=tf.constant(c.index),
           fresh=tf.constant(fresh_rows), **c.geometry)
  a.update(over)
  return lib().population_delta_net(**a)


def _net_inputs(rng):
  c = types.SimpleNamespace()
  c.b = cases.size(rng, (1, 7))
  c.h, c.w = int(rng.integers(1, 13)), int(rng.integers(1, 13))
  c.c0 = cases.size(rng, (1, 4), p_zero=0.08)
  c.huge = c.c0 == 0 and rng.random() < 0.5  # an empty obs [B, 2^20, 2^20, 0]
  if c.huge:
    c.h = c.w = 2**20
  c.layers = _net_layers(rng, c)
  c.p = int(rng.integers(1, 4))
  c.dtype = str(rng.choice(["float32", "bfloat16"]))
  c.tx = str(rng.choice(["float32", "uint8"]))
  c.scale = (cases.input_scale(rng) if rng.random() < 0.6 else
             (1 / 255 if c.tx == "uint8" else 1.0))
  c.relus = [bool(v) for v in rng.random(len(c.layers) - 1) < 0.7]
  c.kernels, c.kq, c.biases, c.shapes = [], [], [], []
  hh, ww, ch = c.h, c.w, c.c0
  for ks, stride, n in c.layers:
    wt, wq = cases.weights(rng, (c.p, ks * ks * ch, n), c.dtype, cases.special_rate(rng) * 0.5)
    c.kernels.append(wt)
    c.kq.append(wq)
    c.biases.append(cases.rand_floats(rng, (c.p, n), cases.special_rate(rng) * 0.5))
    hh, ww = (hh - ks) // stride + 1, (ww - ks) // stride + 1
    c.shapes.append((hh, ww, n))
    ch = n
  c.chain_kernels = list(c.kernels)
  c.blocks = [0] * len(c.layers)
  if c.dtype == "float32" and rng.random() < 0.3:
    _make_circulant(rng, c, int(rng.integers(0, len(c.layers))))
  c.index = rng.integers(0, c.p, size=c.b).astype(np.int32)
  if rng.random() < 0.4:
    c.index[:] = int(rng.integers(0, c.p))
  c.spec = cases.special_rate(rng) * 0.5
  c.obs = cases.conv_input(rng, (c.b, c.h, c.w, c.c0), c.tx, c.spec)
  c.steps = int(rng.integers(1, 5))
  c.geometry = dict(kernel_sizes=[l[0] for l in c.layers], strides=[l[1] for l in c.layers],
                    relus=c.relus, input_scale=c.scale, circulant_blocks=c.blocks)
  c.acc0 = [np.full((c.b,) + s, np.nan, np.float32) for s in c.shapes]
  c.garbage = cases.conv_input(rng, c.obs.shape, c.tx, 0.3)
  c.detail = (f"obs{c.obs.shape} {c.tx} layers={c.layers} relus={c.relus} P={c.p} {c.dtype} "
              f"scale={c.scale} steps={c.steps} circulant_blocks={c.blocks}")
  return c


def _make_circulant(rng, c, i):
  """Layer i's kernel block-circulant, passed compact (each vector twice); the
  checks and the per-layer chain use its expansion."""
  k, n = int(c.kernels[i].shape[1]), c.layers[i][2]
  if k == 0 or n == 0:
    return
  b = int(rng.choice([16, 32]))
  vectors, vq = cases.weights(rng, (c.p, -(-n // b) * -(-k // b), b), "float32",
                              cases.special_rate(rng) * 0.5)
  del vectors
  expanded = vq.reshape(c.p, -1)[:, circulant.kernel_index(k, n, b)]
  c.kernels[i] = tf.constant(np.concatenate([vq, vq], axis=2))
  c.kq[i] = expanded
  c.chain_kernels[i] = tf.constant(expanded)
  c.blocks[i] = b


def _net_layer_mutation(rng, c, mutation):
  """Overrides that break one layer's weights, biases or state."""
  i = int(rng.integers(0, len(c.layers)))
  p, layers = c.p, c.layers
  if mutation == "kernel_rows":
    ws = list(c.kernels)
    ws[i] = tf.cast(tf.zeros([p, int(ws[i].shape[1]) + 1, int(ws[i].shape[2])]), ws[i].dtype)
    return dict(w=ws)
  if mutation == "bias_shape":
    bs = [tf.constant(v) for v in c.biases]
    bs[i] = tf.zeros([p, layers[i][2] + 1])
    return dict(bias=bs)
  if mutation == "acc_prev_shape":
    ac = [tf.constant(v) for v in c.acc0]
    ac[i] = tf.zeros([c.b] + [s + (j == 2) for j, s in enumerate(c.shapes[i])])
    return dict(acc_prev=ac)
  if len(layers) == 1:  # population_mismatch
    return dict(bias=[tf.zeros([p + 1, layers[0][2]])])
  ws = list(c.kernels)
  ws[1] = tf.cast(tf.zeros([p + 1] + list(ws[1].shape[1:])), ws[1].dtype)
  return dict(w=ws)


def _net_mutation(rng, c, mutation):
  """(the mutation's name, overrides of the call's arguments, the errors)."""
  b, h, w, c0, p, index = c.b, c.h, c.w, c.c0, c.p, c.index
  ks_list = list(c.geometry["kernel_sizes"])
  if mutation in ("kernel_rows", "bias_shape", "acc_prev_shape", "population_mismatch"):
    return mutation, _net_layer_mutation(rng, c, mutation), cases.invalid()
  if mutation == "index_out_of_range" and b == 0:
    return "index_length", dict(index=tf.zeros([1], tf.int32)), cases.invalid()
  if mutation == "index_out_of_range":
    bad = index.copy()
    bad[int(rng.integers(0, b))] = rng.choice([p, -1, *INT32_EXTREMES])
    return mutation, dict(index=tf.constant(bad)), cases.invalid()
  if mutation == "kernel_larger_than_input":
    ks_list[0] = max(h, w) + 1
    return mutation, dict(kernel_sizes=ks_list), cases.invalid()
  if mutation == "kernel_size_attr":
    ks_list[-1] = 0
    return mutation, dict(kernel_sizes=ks_list), cases.invalid()
  if mutation == "mixed_weight_dtypes":
    if len(c.layers) == 1:
      return mutation, dict(w=[c.kernels[0], tf.zeros([p, c.layers[0][2], 2], tf.bfloat16)],
                            bias=[tf.constant(c.biases[0]), tf.zeros([p, 2])]), \
          cases.invalid_or_type()
    ws = list(c.kernels)
    ws[1] = tf.cast(ws[1], tf.float32 if ws[1].dtype == tf.bfloat16 else tf.bfloat16)
    return mutation, dict(w=ws), cases.invalid_or_type()
  if mutation == "circulant_block":
    blocks = [int(rng.choice([8, 24, -16]))] + [0] * (len(c.layers) - 1)
    return mutation, dict(circulant_blocks=blocks), cases.invalid()
  if mutation == "circulant_shape":  # an expanded kernel where a compact one belongs
    k, n = int(c.chain_kernels[0].shape[1]), c.layers[0][2]
    if (-(-n // 16) * -(-k // 16), 32) != (k, n):  # (unless the shapes coincide)
      ws = [tf.cast(c.chain_kernels[0], tf.float32)] + list(c.chain_kernels[1:])
      return mutation, dict(circulant_blocks=[16] + [0] * (len(c.layers) - 1), w=ws), \
          cases.invalid_or_type()
    mutation = "index_length"
  if mutation == "obs_rank":
    return mutation, dict(obs=tf.zeros([b, h, w]), obs_prev=tf.zeros([b, h, w])), \
        cases.invalid_or_type()
  return mutation, {
      "kernel_sizes_length": lambda: dict(kernel_sizes=ks_list + [1]),
      "relus_length": lambda: dict(relus=c.relus + [True]),
      "index_length": lambda: dict(index=tf.zeros([b + 1], tf.int32)),
      "fresh_length": lambda: dict(fresh=tf.ones([b + 2], tf.bool)),
      "obs_prev_shape": lambda: dict(obs_prev=tf.constant(cases.conv_input(
          rng, (b, h + 1, w, c0), c.tx, 0))),
  }[mutation](), cases.invalid()


def _net_last_not_dense(rng, c):
  # One 1x1 layer over an input of more than one position.
  hb, wb, b, p = max(c.h, 2), c.w, c.b, c.p
  o = cases.conv_input(rng, (b, hb, wb, c.c0), c.tx, 0)
  return FuncCase(lambda: lib().population_delta_net(
      obs=tf.constant(o), obs_prev=tf.constant(o), acc_prev=[tf.zeros([b, hb, wb, 3])],
      w=[tf.zeros([p, c.c0, 3])], bias=[tf.zeros([p, 3])], index=tf.zeros([b], tf.int32),
      fresh=tf.ones([b], tf.bool), kernel_sizes=[1], strides=[1], relus=[],
      input_scale=1.0), "last_layer_not_dense", cases.invalid(), c.detail)


def _chain(c, o, op, acc_prev, fresh):
  """The step as PopulationDeltaConv2D ops chained."""
  accs, x, xp = [], o, op
  for i, (ks, stride, _) in enumerate(c.layers):
    kwargs = (dict(input_scale=c.scale, input_relu=False, input_bias=cases.empty_bias())
              if i == 0 else dict(input_scale=1.0, input_relu=c.relus[i - 1],
                                  input_bias=tf.constant(c.biases[i - 1])))
    out = lib().population_delta_conv2d(
        x=tf.constant(x), x_prev=tf.constant(xp), acc_prev=tf.constant(acc_prev[i]),
        w=c.chain_kernels[i], index=tf.constant(c.index), fresh=tf.constant(fresh),
        kernel_size=ks,
        stride=stride, **kwargs).numpy()
    accs.append(out)
    x, xp = out, acc_prev[i]
  return accs


def _net_check_step(c, step, o, accs, logits, fr, tracker):
  """Each layer against the full convolution of its input (the op's own
  output of the layer below, through its bias and ReLU); logits."""
  for i, a in enumerate(accs):
    if a.shape != (c.b,) + c.shapes[i]:
      return f"step {step}: acc[{i}] shape {a.shape}, expected {(c.b,) + c.shapes[i]}"
  x_in = o
  for i, (ks, stride, _) in enumerate(c.layers):
    f, df = (checks.layer_f(x_in, c.index, c.scale, None, False) if i == 0 else
             checks.layer_f(x_in, c.index, 1.0, c.biases[i - 1], c.relus[i - 1]))
    err = checks.check_delta_layer(accs[i], f, df, c.kq[i], c.index, ks, stride, fr, tracker,
                                   f"step {step}: acc[{i}]", key=i)
    if err:
      return err
    x_in = accs[i]
  with np.errstate(all="ignore"):
    want = accs[-1][:, 0, 0, :] + c.biases[-1][c.index]
  # Subnormals may be flushed to zero (TensorFlow's threads run so).
  if not np.array_equal(checks.daz(logits), checks.daz(want), equal_nan=True):
    return f"step {step}: logits differ from acc[-1] + bias"
  return None


def _first_difference(step, accs, chained):
  for i, (a, want) in enumerate(zip(accs, chained)):
    if not np.array_equal(a, want, equal_nan=True):
      j = tuple(int(v) for v in np.argwhere(~((a == want) | (np.isnan(a) & np.isnan(want))))[0])
      return (f"step {step}: acc[{i}]{j} = {a[j]!r} differs from the chain of "
              f"PopulationDeltaConv2D ops ({want[j]!r})")
  return None


def gen_population_delta_net(rng):
  c = _net_inputs(rng)
  mutation = None
  if rng.random() < 0.45 and not c.huge:  # (a bad variant of a huge obs would not fit)
    mutation = str(rng.choice([
        "kernel_sizes_length", "relus_length", "kernel_rows", "bias_shape",
        "acc_prev_shape", "index_out_of_range", "index_length", "fresh_length",
        "obs_prev_shape", "population_mismatch", "kernel_larger_than_input",
        "last_layer_not_dense", "kernel_size_attr", "mixed_weight_dtypes", "obs_rank",
        "circulant_block", "circulant_shape"]))
  fresh = np.ones(c.b, bool)
  if mutation == "last_layer_not_dense":
    return _net_last_not_dense(rng, c)
  if mutation is not None:
    mutation, over, expect = _net_mutation(rng, c, mutation)
    return FuncCase(lambda: _net_call(c, c.obs, c.garbage, c.acc0, fresh, **over), mutation,
                    expect, c.detail)
  with_chain = has_delta_conv2d()

  def run():
    tracker = checks.Tracker()
    state, chain_state, op, o, fr = c.acc0, c.acc0, c.garbage, c.obs, fresh
    for step in range(c.steps):
      if step > 0:
        op, o = o, cases.next_input(rng, o, c.tx, c.spec)
        fr = rng.random(c.b) < 0.2
      logits, accs = _net_call(c, o, op, state, fr)
      logits, accs = logits.numpy(), [a.numpy() for a in accs]
      err = _net_check_step(c, step, o, accs, logits, fr, tracker)
      if err:
        return err
      if with_chain:
        chained = _chain(c, o, op, chain_state, fr)
        err = _first_difference(step, accs, chained)
        if err:
          return err
        chain_state = chained
      state = accs
    return None
  return FuncCase(run, None, detail=c.detail)


# ----------------------------------------------------------------------------
# PopulationKernelInfo.


def gen_population_kernel_info(rng):
  del rng

  def run():
    isa, cpu, amx, names, calls, options = lib().population_kernel_info()
    isa, cpu = isa.numpy().decode(), [c.decode() for c in cpu.numpy()]
    names = [n.decode() for n in names.numpy()]
    if isa not in cpu:
      return f"isa {isa!r} not among the CPU's {cpu}"
    if (names[1:] != ["avx2", "avx512", "amx", "gemm_streamed", "gemm_k_chunked", "gemm_tiles",
                      "delta_circulant"]
        or names[0] not in ("sse", "portable")):
      return f"path names {names}"
    if np.any(calls.numpy() < 0) or amx.dtype != tf.bool:
      return "negative call counts"
    if not {o.decode() for o in options.numpy()} <= {"amx", "delta_conv2d"}:
      return f"options {options}"
    return None
  return FuncCase(run)
