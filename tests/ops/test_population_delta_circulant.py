"""PopulationDeltaNet reading block-circulant kernels compact (`circulant_blocks`):
bit for bit the same op on the kernels expanded by `tfrl.layers.circulant`'s
index, step after step, with the compact path counted; bad layouts refused."""

import os
import sys

from absl.testing import parameterized
import numpy as np
import tensorflow as tf

from tfrl.layers import circulant
from tfrl.ops import population
from tfrl.ops import population_delta as delta

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
if ROOT not in sys.path:
  sys.path.insert(0, ROOT)
from tests.ops.delta_helpers import change, first_input  # pylint: disable=g-import-not-at-top


def _circulant_layer(rng, p, k, n, b):
  """(compact [P, Q * I, 2b], expanded [P, K, N]) kernels of one layer."""
  out_blocks, in_blocks = -(-n // b), -(-k // b)
  vectors = (rng.standard_normal((p, out_blocks * in_blocks, b)) / np.sqrt(k)).astype(np.float32)
  compact = np.concatenate([vectors, vectors], axis=2)
  expanded = vectors.reshape(p, -1)[:, circulant.kernel_index(k, n, b)]
  return compact, expanded


def _net(rng, obs_shape, layers, p):
  """Kernels (compact where a layer has a block), expanded kernels, biases,
  the op's geometry and the acc shapes. layers: (kernel size, stride, N, b)."""
  compact, expanded, biases, shapes = [], [], [], []
  h, w, c = obs_shape
  for ks, stride, n, b in layers:
    k = ks * ks * c
    if b:
      ck, ek = _circulant_layer(rng, p, k, n, b)
    else:
      ek = (rng.standard_normal((p, k, n)) / ks).astype(np.float32)
      ck = ek
    compact.append(ck)
    expanded.append(ek)
    biases.append((rng.standard_normal((p, n)) * 0.3).astype(np.float32))
    h, w, c = (h - ks) // stride + 1, (w - ks) // stride + 1, n
    shapes.append((h, w, n))
  geometry = dict(kernel_sizes=[l[0] for l in layers], strides=[l[1] for l in layers],
                  relus=[True] * (len(layers) - 1))
  return compact, expanded, biases, geometry, shapes, [l[3] for l in layers]


class CirculantDeltaNetTest(tf.test.TestCase, parameterized.TestCase):

  test_session = None  # tf.test.TestCase's deprecated helper, not a test.

  @parameterized.named_parameters(
      # name, obs dtype, (H, W, C), layers (kernel size, stride, N, block or 0)
      ("frames_conv_then_circulant", np.uint8, (20, 20, 4),
       ((8, 4, 16, 0), (4, 1, 40, 16), (1, 1, 6, 0))),
      # K = 175 (a partial input block), whole register blocks of N = 256
      ("circulant_over_feature_map", np.float32, (5, 5, 7),
       ((5, 1, 256, 32), (1, 1, 5, 0))),
      # the logits layer circulant too: N = 18, a partial output block
      ("two_circulant_layers", np.float32, (1, 1, 50),
       ((1, 1, 64, 16), (1, 1, 18, 16))),
  )
  def test_bitwise_the_expanded_kernels(self, dtype, hwc, layers):
    rng = np.random.default_rng(hwc[0] * 10 + hwc[2])
    batch, p = 7, 4
    compact, expanded, biases, geometry, shapes, blocks = _net(rng, hwc, layers, p)
    index = rng.integers(0, p, batch).astype(np.int32)
    obs = first_input(rng, (batch,) + hwc, dtype)
    state_c = state_e = [np.zeros((batch,) + s, np.float32) for s in shapes]
    fresh = np.ones(batch, bool)
    before = population.kernel_info()["calls"]["delta_circulant"]
    for step in range(6):
      prev = obs if step == 0 else obs_prev
      logits_c, state_c = delta.population_delta_net_op(
          obs, prev, state_c, compact, biases, index, fresh, circulant_blocks=blocks,
          **geometry)
      logits_e, state_e = delta.population_delta_net_op(
          obs, prev, state_e, expanded, biases, index, fresh, **geometry)
      self.assertAllEqual(logits_c, logits_e, msg=f"step {step}")
      for i, (a, b) in enumerate(zip(state_c, state_e)):
        self.assertAllEqual(a, b, msg=f"step {step} layer {i}")
      obs_prev, obs = obs, change(rng, obs, 0.05)
      fresh = rng.random(batch) < 0.2
    # The compact calls ran the compact path; the expanded ones did not.
    self.assertEqual(population.kernel_info()["calls"]["delta_circulant"] - before, 6)

  def _call(self, kernels, blocks, dtype=tf.float32):
    rng = np.random.default_rng(0)
    obs = rng.standard_normal((2, 1, 1, 32)).astype(np.float32)
    biases = [np.zeros((3, 32), np.float32), np.zeros((3, 4), np.float32)]
    state = [np.zeros((2, 1, 1, 32), np.float32), np.zeros((2, 1, 1, 4), np.float32)]
    return delta.population_delta_net_op(
        obs, obs, state, [tf.cast(k, dtype) for k in kernels], biases,
        np.zeros(2, np.int32), np.ones(2, bool), kernel_sizes=[1, 1], strides=[1, 1],
        relus=[True], circulant_blocks=blocks)

  def test_bad_layouts_are_refused(self):
    good = [np.zeros((3, 4, 32), np.float32), np.zeros((3, 32, 4), np.float32)]
    self._call(good, [16, 0])  # [P, Q * I = 2 * 2, 2b = 32]
    cases = [
        (good, [8, 0], "positive multiple of 16"),
        (good, [16], "circulant_blocks needs L = 2"),
        ([np.zeros((3, 32, 32), np.float32), good[1]], [16, 0], r"must be \[P = 3, 4, 32\]"),
    ]
    for kernels, blocks, message in cases:
      with self.assertRaisesRegex((tf.errors.InvalidArgumentError, ValueError), message):
        self._call(kernels, blocks)
    with self.assertRaisesRegex(tf.errors.InvalidArgumentError, "must be float32"):
      self._call(good, [16, 0], tf.bfloat16)


if __name__ == "__main__":
  tf.test.main()
