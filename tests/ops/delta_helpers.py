"""Inputs and checks shared by the incremental-op tests (test_population_delta.py,
delta_conv2d_cases.py)."""

import numpy as np
import tensorflow as tf

from tfrl.ops import reference


def change(rng, x, fraction):
  """x with about `fraction` of its values redrawn (some rows untouched)."""
  x = x.copy()
  mask = rng.random(x.shape) < fraction
  if x.dtype == np.uint8:
    x[mask] = rng.integers(0, 256, mask.sum())
  else:
    x[mask] = rng.standard_normal(mask.sum())
  return x


def first_input(rng, shape, dtype):
  if dtype == np.uint8:
    return rng.integers(0, 256, shape).astype(np.uint8)
  return rng.standard_normal(shape).astype(np.float32)


def full_sparse(x, w, index, ks, stride, scale=1.0, bias=None, relu=False):
  """The full convolution of f(x) summed in float64 over the nonzero values of
  f(x) only, as the incremental ops sum (a zero input adds nothing, even
  times an inf or NaN weight)."""
  return reference.population_delta_conv2d(
      x, w, index, kernel_size=ks, stride=stride, input_scale=scale, input_bias=bias,
      input_relu=relu, dtype=tf.float64, nonzero_only=True).numpy()


def assert_like(test, got, want, atol, msg=""):
  """Same NaN and infinity pattern, finite values close."""
  got = np.asarray(got, np.float64)
  want = np.asarray(want, np.float64)
  test.assertAllEqual(np.isnan(got), np.isnan(want), msg=f"NaN pattern {msg}")
  test.assertAllEqual(np.isposinf(got), np.isposinf(want), msg=f"+inf pattern {msg}")
  test.assertAllEqual(np.isneginf(got), np.isneginf(want), msg=f"-inf pattern {msg}")
  fin = np.isfinite(want)
  test.assertAllClose(got[fin], want[fin], rtol=1e-4, atol=atol, msg=msg)


def non_finite_inputs(rng, shape, values):
  """Four steps of input [B, H, W, C] (B >= 5, C >= 2): finite, then `values`
  put in three places, then finite again there, then a step later."""
  b, h, w, c = shape
  x0 = rng.standard_normal((b, h, w, c)).astype(np.float32)
  x1 = x0.copy()
  x1[0, 1, 2, 0] = values[0]
  x1[3, 2, 1, c - 1] = values[1 % len(values)]
  x1[4, 0, 0, 1] = values[-1]
  x2 = x1.copy()
  x2[~np.isfinite(x2) | (np.abs(x2) > 1e30)] = 0.5
  x3 = x2.copy()
  x3[:, 1, 1, :] += 1.0
  return x0, x1, x2, x3


def assert_comes_and_goes(test, steps):
  """steps: (an incremental layer's acc, its full convolution) at each of the
  four steps of `non_finite_inputs`."""
  (a0, _), (a1, f1), (a2, f2), (a3, f3) = steps
  test.assertTrue(np.isfinite(a0).all())
  # While present: NaN or inf where the full convolution has them.
  test.assertFalse(np.isfinite(a1).all())
  assert_like(test, a1, f1, 1e-3, "with the values")
  # Gone: every output finite again and equal to the full convolution.
  test.assertTrue(np.isfinite(a2).all(), "inf - inf left in the accumulator")
  assert_like(test, a2, f2, 1e-3, "after they left")
  assert_like(test, a3, f3, 1e-3, "a step later")


class Net:
  """A random population network for PopulationDeltaNet: `layers` are
  (kernel size, stride, N) over an [H, W, C] observation, the last one dense."""

  def __init__(self, rng, obs_shape, layers, p, dtype=tf.float32, relus=None,
               kernel_scale=None):
    self.layers = tuple(layers)
    self.relus = [True] * (len(layers) - 1) if relus is None else list(relus)
    self.kernels, self.biases, self.shapes = [], [], []
    h, w, c = obs_shape
    for ks, stride, n in layers:
      scale = 1.0 / ks if kernel_scale is None else kernel_scale
      self.kernels.append(tf.cast(rng.standard_normal((p, ks * ks * c, n)) * scale, dtype))
      self.biases.append(rng.standard_normal((p, n)).astype(np.float32) * 0.3)
      h, w, c = (h - ks) // stride + 1, (w - ks) // stride + 1, n
      self.shapes.append((h, w, n))

  def geometry(self, input_scale=1.0):
    return dict(kernel_sizes=[l[0] for l in self.layers], strides=[l[1] for l in self.layers],
                relus=self.relus, input_scale=input_scale)

  def state(self, batch, fill=np.nan):
    """acc_prev for `batch` rows (NaN by default: fresh rows must not read it)."""
    return [np.full((batch,) + s, fill, np.float32) for s in self.shapes]

  def reference(self, obs, index, input_scale=1.0, dtype=tf.float32, nonzero_only=False):
    """(logits, accs) of the full forward, `tfrl.ops.reference`."""
    logits, accs = reference.population_delta_net(
        obs, self.kernels, self.biases, index, dtype=dtype, nonzero_only=nonzero_only,
        **self.geometry(input_scale))
    return logits.numpy(), [a.numpy() for a in accs]
