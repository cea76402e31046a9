"""One evaluation call of several parts (tfrl/neuroevolution/jobs.py), and the GA
and random search playing their elite candidates with the next population in
it: the same results as separate calls, one after the other."""

import copy
import dataclasses

import numpy as np
import tensorflow as tf

from tests.neuroevolution.test_algorithms import _RUN_METRICS, _local, _setup, _spec
from tfrl import ga
from tfrl.neuroevolution import evaluation
from tfrl.neuroevolution import evaluators
from tfrl.neuroevolution import worker


def _loaded(capacity=10, networks=8, num_envs=5, groups=2):
  env, layout, net, pipelined, _, _ = _setup(capacity, num_envs=num_envs, groups=groups,
                                             cap=400)
  flat = np.random.default_rng(3).standard_normal((networks, layout.dim)).astype(np.float32)
  net.load(flat * layout.init_scale * 3)
  return env, pipelined


def _seeds(phase, count, episodes):
  return evaluators.episode_seeds(7, 1, phase, count, episodes)


class EvaluatePartsTest(tf.test.TestCase):

  test_session = None  # tf.test.TestCase's deprecated helper, not a test.

  def test_parts_and_a_late_part_give_the_results_of_separate_calls(self):
    env, pipelined = _loaded()
    seen = []

    def choose(result):
      seen.append(result)
      return [5 + int(np.argmax(result.fitness))]

    first = evaluation.Part([5, 6, 7], 3, _seeds(0, 3, 3))
    second = evaluation.Part(range(5), 2, _seeds(1, 5, 2), expected_steps=[1, 9, 3, 4, 2])
    late = evaluation.LatePart(0, choose, 1, 2, _seeds(2, 1, 2))
    results = pipelined.evaluate_parts([first, second], late)
    self.assertLen(results, 3)
    # `choose` saw the first part once, complete.
    self.assertLen(seen, 1)
    alone = [pipelined.evaluate([5, 6, 7], 3, seeds=_seeds(0, 3, 3)),
             pipelined.evaluate(range(5), 2, seeds=_seeds(1, 5, 2)),
             pipelined.evaluate([5 + int(np.argmax(seen[0].fitness))], 2,
                                seeds=_seeds(2, 1, 2))]
    self.assertAllEqual(seen[0].returns, alone[0].returns)
    for together, apart in zip(results, alone):
      self.assertAllEqual(together.returns, apart.returns)
      self.assertAllEqual(together.lengths, apart.lengths)
      self.assertEqual((together.frames, together.steps), (apart.frames, apart.steps))
    # Episodes of different lengths, so that slots freed at different times.
    self.assertGreater(len(np.unique(results[1].lengths)), 1)
    # One call: its timing covers every part.
    self.assertIs(results[0].timing, results[2].timing)
    env.close()

  def test_bad_parts_are_refused(self):
    env, pipelined = _loaded()
    seeded, unseeded = evaluation.Part([0, 1], 1, _seeds(0, 2, 1)), evaluation.Part([2], 1)
    with self.assertRaisesRegex(ValueError, "every part of a call has reset seeds or none"):
      pipelined.evaluate_parts([seeded, unseeded])
    with self.assertRaisesRegex(ValueError, "a late part waits for one of the 1 parts"):
      pipelined.evaluate_parts([seeded], evaluation.LatePart(1, lambda r: [0], 1, 1,
                                                             _seeds(1, 1, 1)))
    with self.assertRaisesRegex(ValueError, r"only networks \[0, 8\) are loaded"):
      pipelined.evaluate_parts([evaluation.Part([0, 9], 1)])
    with self.assertRaisesRegex(ValueError, r"the late part chose \[0, 1\]: expected 1"):
      pipelined.evaluate_parts([seeded], evaluation.LatePart(0, lambda r: [0, 1], 1, 1,
                                                             _seeds(1, 1, 1)))
    # The evaluator still plays after a refused call.
    self.assertEqual(pipelined.evaluate([0, 1], 1, seeds=_seeds(0, 2, 1)).returns.shape,
                     (2, 1))
    env.close()


class OverlappedSearchTest(tf.test.TestCase):
  """GA and random search give the same run with the candidates overlapped."""

  test_session = None  # tf.test.TestCase's deprecated helper, not a test.

  def _run(self, config, num_envs, groups, generations=4):
    spec = _spec(config.capacity(), num_envs, groups)
    evaluator = worker.build_local(spec)
    try:
      algo = ga.GeneticAlgorithm(config, spec.layout(), evaluator.builder.table, evaluator)
      history = [algo.step() for _ in range(generations)]
      return history, algo.state(), evaluator.overlapped_calls, algo
    finally:
      evaluator.close()

  def test_same_run_with_and_without_overlap(self):
    for random_search in (False, True):
      config = ga.GAConfig(population=12, truncation=4, mutation_power=0.1,
                           elite_candidates=3, elite_episodes=2, episodes_per_eval=2,
                           random_search=random_search, seed=5)
      self.assertEqual(config.capacity(), 16)
      apart = dataclasses.replace(config, overlap_elite=False)
      runs = [self._run(config, 7, 2), self._run(config, 4, 1), self._run(apart, 7, 2)]
      self.assertEqual([r[2] for r in runs], [4, 4, 0])  # which path each took
      ref_history, ref_state = runs[2][0], runs[2][1]
      for history, state, _, _ in runs[:2]:
        for gen, (m, ref) in enumerate(zip(history, ref_history)):
          for key in _RUN_METRICS:
            self.assertEqual(m[key], ref[key], msg=f"generation {gen + 1}: {key}")
        # The same run but for the switch itself, recorded in the config.
        (state, arrays), (ref, ref_arrays) = copy.deepcopy((state, ref_state))
        self.assertEqual(state["config"].pop("overlap_elite"), True)
        self.assertEqual(ref["config"].pop("overlap_elite"), False)
        self.assertEqual((state, arrays), (ref, ref_arrays))

  def test_resumed_run_goes_on_as_the_uninterrupted_one(self):
    config = ga.GAConfig(population=12, truncation=4, mutation_power=0.1,
                         elite_candidates=3, elite_episodes=2, seed=6)
    spec = _spec(config.capacity(), 6, 2)
    evaluator = worker.build_local(spec)
    try:
      algo = ga.GeneticAlgorithm(config, spec.layout(), evaluator.builder.table, evaluator)
      for _ in range(2):
        algo.step()
      fresh = ga.GeneticAlgorithm(config, spec.layout(), evaluator.builder.table, evaluator)
      fresh.restore(*algo.state())
      resumed = fresh.step()  # plays its population first: nothing was kept
      uninterrupted = algo.step()
      for key in _RUN_METRICS:
        self.assertEqual(resumed[key], uninterrupted[key], msg=key)
      self.assertEqual(fresh.state(), algo.state())
    finally:
      evaluator.close()

  def test_without_room_the_calls_go_one_after_the_other(self):
    # Capacity = population: no room for the candidates next to the children.
    env, layout, _, pipelined, table, _ = _setup(12)
    evaluator = _local(pipelined, table, layout)
    config = ga.GAConfig(population=12, truncation=4, elite_candidates=3,
                         elite_episodes=2, mutation_power=0.1, seed=2)
    algo = ga.GeneticAlgorithm(config, layout, table, evaluator)
    metrics = algo.step()
    self.assertEqual(evaluator.overlapped_calls, 0)
    self.assertGreater(metrics["time"]["elite"], 0.0)
    with self.assertRaisesRegex(ValueError, "cannot play in one call"):
      evaluator.evaluate_overlapped(
          evaluators.Request(algo.population[:4], 1, _seeds(0, 4, 1)),
          evaluators.Request(algo.population, 1, _seeds(1, 12, 1)))
    env.close()


if __name__ == "__main__":
  tf.test.main()
