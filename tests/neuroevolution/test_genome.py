"""Noise table and seed-chain genomes: determinism, caching, serialisation."""

import hashlib
import os
import subprocess
import sys

import numpy as np
import tensorflow as tf

from tfrl.neuroevolution import genome as genome_lib
from tfrl.neuroevolution import noise as noise_lib
from tfrl.neuroevolution import population_net

_CHAIN = genome_lib.Genome(123, ((4567, 0.01), (89, 0.005), (100001, 0.02)))
_SCRIPT = """
import hashlib, sys
from tfrl.neuroevolution import genome, noise, population_net
layout = population_net.ParamLayout(population_net.NetworkConfig(arch="small"), (84, 84, 4), 6)
table = noise.NoiseTable(7, 1 << 21)
g = genome.Genome(123, ((4567, 0.01), (89, 0.005), (100001, 0.02)))
params = genome.ParamBuilder(table, layout.init_scale).build(g)
print(hashlib.sha256(params.tobytes()).hexdigest())
"""


def _repo_root():
  return os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


class GenomeTest(tf.test.TestCase):

  test_session = None  # tf.test.TestCase's deprecated helper, not a test.

  def setUp(self):
    super().setUp()
    self.layout = population_net.ParamLayout(
        population_net.NetworkConfig(arch="small"), (84, 84, 4), 6)
    self.table = noise_lib.NoiseTable(7, 1 << 21)

  def test_noise_table_is_seeded(self):
    a = noise_lib.NoiseTable(3, 1000).noise
    b = noise_lib.NoiseTable(3, 1000).noise
    c = noise_lib.NoiseTable(4, 1000).noise
    self.assertAllEqual(a, b)
    self.assertNotAllClose(a, c)
    self.assertEqual(a.dtype, np.float32)
    self.assertAllClose([a.mean(), a.std()], [0.0, 1.0], atol=0.1)
    with self.assertRaises(ValueError):
      noise_lib.NoiseTable(3, 1000).get(995, 10)

  def test_rebuild_is_bitwise_equal_in_a_fresh_process(self):
    params = genome_lib.ParamBuilder(self.table, self.layout.init_scale).build(_CHAIN)
    here = hashlib.sha256(params.tobytes()).hexdigest()
    env = dict(os.environ, PYTHONPATH=_repo_root(), TF_CPP_MIN_LOG_LEVEL="3")
    out = subprocess.run([sys.executable, "-c", _SCRIPT], env=env, check=True,
                         capture_output=True, text=True, timeout=120)
    self.assertEqual(out.stdout.strip().splitlines()[-1], here)

  def test_chain_semantics(self):
    builder = genome_lib.ParamBuilder(self.table, self.layout.init_scale)
    params = builder.build(_CHAIN)
    dim = self.layout.dim
    want = self.layout.init_scale * self.table.get(123, dim)
    for offset, sigma in _CHAIN.mutations:
      want += np.float32(sigma) * self.table.get(offset, dim)
    self.assertAllEqual(params, want)
    self.assertEqual(params.shape, (dim,))

  def test_parent_cache_costs_one_mutation_and_is_bitwise_equal(self):
    builder = genome_lib.ParamBuilder(self.table, self.layout.init_scale)
    parent = _CHAIN
    builder.remember([parent])
    before = builder.mutations_applied
    child = parent.child(999, 0.003)
    cached = builder.build(child, cache=False)
    self.assertEqual(builder.mutations_applied - before, 1)
    fresh = genome_lib.ParamBuilder(self.table, self.layout.init_scale).build(child)
    self.assertAllEqual(cached, fresh)
    self.assertEqual(child.parent, parent)

  def test_json_round_trip(self):
    self.assertEqual(genome_lib.Genome.from_json(_CHAIN.to_json()), _CHAIN)

  def test_table_too_small_rejected(self):
    with self.assertRaises(ValueError):
      genome_lib.ParamBuilder(noise_lib.NoiseTable(0, 100), self.layout.init_scale)


if __name__ == "__main__":
  tf.test.main()
