"""How the fuzzer checks a result: the op's one reference (`tfrl.ops.reference`)
summed in float64, and how far a float32 op may be from it.

For each output element: its reference, the sum of the magnitudes of its
finite products (`bound`), and the tolerance (K + 2) * 2^-23 * bound. Where a
float32 sum may overflow (bound >= 1e37) an element is not checked;
elsewhere a NaN reference needs NaN, an infinite one the same infinity, a
finite one a value within the tolerance. TensorFlow's threads read
subnormals as zero (and the op's pool threads may not), so a subnormal input
widens the tolerance (`slack`), and where it meets an inf or NaN of the other
side the element is not checked (`unchecked`). All sums go through the
reference matmul: the reference of the values, of their magnitudes and of
the masks.
"""

import numpy as np
import tensorflow as tf

from tests.fuzz.cases import F32_TINY, bf16_round
from tfrl.ops import reference

OVERFLOW_BOUND = 1e37


def tiny(a):
  return (a != 0) & (np.abs(a) < F32_TINY)


def daz(v):
  """v with subnormals read as zero, as TensorFlow's threads (FTZ/DAZ) do."""
  return np.where(tiny(v), np.zeros_like(v), v)


def _matmul(a, w, index, nonzero_only=False):
  """reference.population_matmul summed in float64, as an array."""
  return reference.population_matmul(a, w, index, dtype=tf.float64,
                                     nonzero_only=nonzero_only).numpy()


def gemm_check(a, w, index, nonzero_only=False, da=None):
  """Row r of a [R, M, K] times w[index[r]] ([P, K, N] float32 values).

  Returns (ref, bound, slack, unchecked), each [R, M, N]: ref with subnormal
  values read as zero (with `nonzero_only`, the sum over the nonzero values
  of a only, where 0 * inf is 0, not NaN); bound the sum of |finite
  products|; slack what the op may differ by because of subnormals (or
  because its a may differ by `da` from the a given); unchecked the
  elements where such a doubtful value of one side meets an inf or NaN of
  the other (0 * inf or tiny * inf).
  """
  r, m, k = a.shape
  n = w.shape[2]
  if r == 0 or m == 0 or n == 0 or k == 0:
    z = np.zeros((r, m, n))
    return z, z.copy(), z.copy(), np.zeros((r, m, n), bool)
  ta, tw = tiny(a), tiny(w)
  da = ta * F32_TINY if da is None else np.maximum(da, ta * F32_TINY)
  da_inf = ~np.isfinite(da)  # the op may see a non-finite value, or a finite one
  da = np.where(da_inf, 0.0, da)
  a64 = np.where(ta, 0.0, a.astype(np.float64))
  w64 = np.where(tw, 0.0, w.astype(np.float64))
  with np.errstate(all="ignore"):
    ref = _matmul(a64, w64, index, nonzero_only)
    fa = np.where(np.isfinite(a64), np.abs(a64), 0.0)
    fw = np.where(np.isfinite(w64), np.abs(w64), 0.0)
    bound = _matmul(fa, fw, index)
    slack = _matmul(da, fw, index) + _matmul(fa, tw * F32_TINY, index) + k * F32_TINY
    bad_a, bad_w = ~np.isfinite(a), ~np.isfinite(w)
    unchecked = ((_matmul(da > 0, bad_w, index) > 0) | (_matmul(bad_a, tw, index) > 0) |
                 (_matmul(da_inf, w64 != 0, index) > 0))
  return ref, bound, slack, unchecked


def apply_epilogue(result, bias, relu):
  """The epilogue on gemm_check's result ([..., M, N] arrays): + bias
  ([..., N], the rows' networks' biases), then ReLU."""
  ref, bound, slack, unchecked = result
  if bias is not None:
    with np.errstate(all="ignore"):
      bb = bias.astype(np.float64)[..., None, :]
      ref = ref + np.where(tiny(bias)[..., None, :], 0.0, bb)
      bound = bound + np.where(np.isfinite(bb), np.abs(bb), 0.0)
      slack = slack + F32_TINY
  if relu:
    ref = np.where(ref < 0, 0.0, ref)
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


def patches(f, ks, stride):
  """[B, H, W, C] -> ([B, OH * OW, ks * ks * C], OH, OW): reference.im2col,
  without calling it on an input with no channels (which may be huge)."""
  b, h, w, c = f.shape
  oh, ow = (h - ks) // stride + 1, (w - ks) // stride + 1
  if c == 0 or b == 0:
    return np.zeros((b, oh * ow, ks * ks * c), f.dtype), oh, ow
  return reference.im2col(f, ks, stride)[0].numpy(), oh, ow


def conv_check(f, df, wq, index, ks, stride, rows, nonzero_only=False):
  """gemm_check of the rows' patches of f (each value known to within df)
  with their kernels; returns ({row: (ref, bound, slack, unchecked)}, OH, OW)."""
  rows = list(rows)
  fp, oh, ow = patches(f, ks, stride)
  dp, _, _ = patches(df, ks, stride)
  result = gemm_check(fp[rows], wq, np.asarray(index)[rows].astype(np.int32), nonzero_only,
                      dp[rows])
  return {b: tuple(x[j] for x in result) for j, b in enumerate(rows)}, oh, ow


def _f_once(x, index, scale, bias, relu, flush):
  with np.errstate(all="ignore"):
    rd = daz if flush else (lambda v: v)
    prod = rd(rd(x.astype(np.float32)) * rd(np.float32(scale)))
    f = prod
    if bias is not None:
      f = rd(prod + rd(bias[index][:, None, None, :]))
    if relu:
      f = np.where(f < 0, np.float32(0), f)
  return f.astype(np.float32), prod


def layer_f(x, index, scale, bias, relu):
  """(f, df): the input an op reads, f(x) = relu?(float32(x) * scale +
  bias[index]) (reference.layer_input), as float32 arithmetic gives it with
  subnormals read as zero, and how far the op's value may be from it: it may
  fuse the multiply and the add (one rounding), and its threads may not
  flush subnormals after all (so f is worked out both ways here, in NumPy,
  which does not flush). df is inf where either changes a value between
  finite and not."""
  f, prod = _f_once(x, index, scale, bias, relu, flush=True)
  g, _ = _f_once(x, index, scale, bias, relu, flush=False)
  with np.errstate(all="ignore"):
    df = np.abs(f.astype(np.float64) - g.astype(np.float64))
    df = np.where(np.isnan(f) & np.isnan(g), 0.0, df)
    if bias is not None and scale != 1.0:
      bb = bias[index][:, None, None, :].astype(np.float64)
      df = df + 2.0 ** -24 * (np.abs(prod.astype(np.float64)) + np.abs(bb))
    df = np.where(np.isnan(df), np.inf, df)
  return f, df


def conv_input_f(x, scale, tx, round_bf16):
  """(f, df): what a convolution reads, float32(x) * scale (rounded to
  bfloat16 with `round_bf16`), and how far the op's value may be from it."""
  if tx == "uint8" or scale != 1.0:
    f, df = layer_f(x, None, scale, None, False)
  else:
    f, df = x, np.zeros(x.shape)
  if round_bf16:
    g = bf16_round(f)
    df = np.maximum(df, np.abs(g.astype(np.float64) - bf16_round(daz(f)).astype(np.float64)))
    f = g
  return f, np.where(np.isfinite(df), df, np.inf)


class Tracker:
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


def check_delta_layer(acc, f, df, wq, index, ks, stride, fresh, tracker, what, key=""):
  """acc [B, OH, OW, N] against the full convolution of f (each value known
  to within df), summed over its nonzero values as the incremental ops sum."""
  batch = f.shape[0]
  kk, n = wq.shape[1], wq.shape[2]
  refs, oh, ow = conv_check(f, df, wq, index, ks, stride, range(batch), nonzero_only=True)
  for r in range(batch):
    ref, bound, slack, unchecked = refs[r]
    cum = tracker.update((key, r), fresh[r], bound)
    err = compare(acc[r].reshape(oh * ow, n), ref, bound, slack, unchecked, kk,
                  f"{what}[{r}]", cum=cum)
    if err:
      return err
  return None
