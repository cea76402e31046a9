"""GA, ES and random search on CartPole (GymEnv), the evaluator, checkpoints."""

import collections
import os

import numpy as np
import tensorflow as tf

from tfrl.envs import GymEnv
from tfrl.neuroevolution import checkpoint
from tfrl.neuroevolution import es
from tfrl.neuroevolution import evaluation
from tfrl.neuroevolution import ga
from tfrl.neuroevolution import noise as noise_lib
from tfrl.neuroevolution import population_net as pn
from tfrl.neuroevolution import runner


def _setup(capacity, hidden=(8,), num_envs=16, groups=2, cap=None, seed=0):
  env = GymEnv("CartPole-v1", num_envs, seed=seed)
  layout = pn.ParamLayout(pn.NetworkConfig(arch="mlp", hidden=hidden),
                          env.observation_shape, env.num_actions)
  net = pn.PopulationNetwork(layout, capacity)
  evaluator = evaluation.PipelinedEvaluator(env, net, num_groups=groups,
                                            episode_frame_cap=cap)
  table = noise_lib.NoiseTable(seed, 100_000)
  spec = tf.TensorSpec([None, 4], tf.float32)
  return env, layout, net, evaluator, table, spec


def _short_and_balancing_networks():
  """CartPole, 4 slots, 3 linear networks: 0 and 2 fall fast, 1 balances."""
  env = GymEnv("CartPole-v1", 4, seed=0)
  net = pn.PopulationNetwork(pn.ParamLayout(pn.NetworkConfig(arch="mlp", hidden=()),
                                            (4,), 2), 4)
  w = np.zeros((3, 10), np.float32)
  w[:, 1] = 1.0              # networks 0 and 2 always push right: short episodes.
  w[1] = 0.0
  w[1, [4, 5, 6, 7]] = [-1.0, 1.0, -1.0, 1.0]  # network 1 balances the pole.
  net.load(w)
  return env, evaluation.PipelinedEvaluator(env, net, num_groups=2, episode_frame_cap=40)


class EvaluatorTest(tf.test.TestCase):

  test_session = None  # tf.test.TestCase's deprecated helper, not a test.

  def test_every_job_is_played_once(self):
    for groups in (1, 3):
      env, layout, net, evaluator, table, _ = _setup(8, num_envs=6, groups=groups)
      flat = np.random.default_rng(0).standard_normal((5, layout.dim)).astype(np.float32)
      net.load(flat * layout.init_scale)
      res = evaluator.evaluate(5, 3)
      self.assertEqual(res.returns.shape, (5, 3))
      self.assertTrue(np.all(res.lengths >= 8))   # CartPole lasts >= 8 steps
      self.assertAllEqual(res.returns, res.lengths)  # reward 1 per step
      self.assertEqual(res.frames, int(res.lengths.sum()))
      env.close()

  def test_episode_frame_cap(self):
    env, layout, net, evaluator, _, _ = _setup(4, num_envs=4, cap=12)
    # A good linear controller (push toward the pole's lean) survives > 12 steps.
    flat = np.zeros((2, layout.dim), np.float32)
    net2 = pn.PopulationNetwork(pn.ParamLayout(pn.NetworkConfig(arch="mlp", hidden=()),
                                               (4,), 2), 4)
    w = np.zeros((2, 10), np.float32)
    w[:, 5] = 1.0   # logit of action 1 grows with the pole angle (obs[2])...
    w[:, 4] = -1.0  # ...and of action 0 falls with it.
    w[:, 7] = 1.0
    w[:, 6] = -1.0
    net2.load(w)
    capped = evaluation.PipelinedEvaluator(env, net2, num_groups=2, episode_frame_cap=12)
    res = capped.evaluate(2, 4)
    self.assertAllEqual(res.lengths, np.full((2, 4), 12))
    env.close()

  def test_evaluate_named_networks(self):
    env, evaluator = _short_and_balancing_networks()
    res = evaluator.evaluate([1, 2], 2)       # rows follow the order asked for
    self.assertAllEqual(res.lengths[0], [40, 40])
    self.assertTrue(np.all(res.lengths[1] < 20))
    with self.assertRaises(ValueError):
      evaluator.evaluate([0, 3])               # network 3 was not loaded
    env.close()

  def test_expected_steps_reorder_play_not_results(self):
    env, evaluator = _short_and_balancing_networks()
    for expected in ([1.0, 5.0, 3.0], [5.0, 1.0, 3.0], [0.0, 0.0, 0.0]):
      res = evaluator.evaluate(3, 2, expected_steps=expected)
      self.assertAllEqual(res.lengths[1], [40, 40], msg=f"expected_steps={expected}")
      self.assertTrue(np.all(res.lengths[[0, 2]] < 20), msg=f"expected_steps={expected}")
    with self.assertRaisesRegex(ValueError, "one value per network"):
      evaluator.evaluate(3, 1, expected_steps=[1.0, 2.0])
    env.close()

  def test_first_jobs_keep_a_network_in_one_group_and_spread_networks(self):
    jobs = collections.deque((net, ep) for net in range(2) for ep in range(1))
    self.assertEqual(evaluation.deal_first_jobs(jobs, [16, 16]), [[(0, 0)], [(1, 0)]])
    jobs = collections.deque((net, ep) for net in range(5) for ep in range(4))
    dealt = evaluation.deal_first_jobs(jobs, [8, 8])
    self.assertEqual(dealt, [[(0, e) for e in range(4)] + [(2, e) for e in range(4)],
                             [(1, e) for e in range(4)] + [(3, e) for e in range(4)]])
    self.assertEqual(list(jobs), [(4, e) for e in range(4)])  # left for free slots
    # A network with more episodes than its group has free slots spills over.
    jobs = collections.deque((0, ep) for ep in range(5))
    dealt = evaluation.deal_first_jobs(jobs, [3, 3])
    self.assertEqual(dealt, [[(0, 0), (0, 1), (0, 2)], [(0, 3), (0, 4)]])

  def test_results_independent_of_steps_per_call(self):
    # One slot group plays deterministically: a graph call of 1 step or of up
    # to 32 steps must give the same episodes, with and without a cap.
    results = []
    for steps_per_call in (1, 7, 32):
      env, layout, net, _, _, _ = _setup(4, num_envs=3, groups=1)
      flat = np.random.default_rng(3).standard_normal((4, layout.dim)).astype(np.float32)
      net.load(flat * layout.init_scale)
      for cap in (None, 30):
        evaluator = evaluation.PipelinedEvaluator(env, net, num_groups=1, episode_frame_cap=cap,
                                                  steps_per_call=steps_per_call)
        results.append((steps_per_call, cap, evaluator.evaluate(4, 2)))
      env.close()
    for steps_per_call, cap, res in results[2:]:
      ref = results[0 if cap is None else 1][2]
      self.assertAllEqual(res.returns, ref.returns, msg=f"steps_per_call={steps_per_call}")
      self.assertAllEqual(res.lengths, ref.lengths)
      self.assertEqual(res.frames, ref.frames)
    self.assertTrue(np.all(results[1][2].lengths <= 30))
    with self.assertRaisesRegex(ValueError, "steps_per_call"):
      evaluation.PipelinedEvaluator(env, net, steps_per_call=0)

  def test_incremental_inference_independent_of_steps_per_call(self):
    # Pong with the small conv net, played incrementally: which steps are
    # computed in full depends only on the step of the episode, so a graph
    # call of 1, 7 or 32 steps gives the same episodes, bit for bit.
    from tfrl.envs import AtariEnv  # pylint: disable=import-outside-toplevel
    layout = pn.ParamLayout(pn.NetworkConfig(arch="small"), (84, 84, 4), 6)
    net = pn.PopulationNetwork(layout, 4)
    flat = np.random.default_rng(3).standard_normal((4, layout.dim)).astype(np.float32)
    net.load(flat * layout.init_scale)
    results = []
    for steps_per_call in (1, 7, 32):
      env = AtariEnv("pong", 3, seed=0)  # the same emulator states each time
      evaluator = evaluation.PipelinedEvaluator(env, net, num_groups=1, episode_frame_cap=240,
                                                steps_per_call=steps_per_call,
                                                incremental=True, refresh_steps=20)
      self.assertTrue(evaluator.incremental)
      results.append(evaluator.evaluate(4, 2))
      env.close()
    for res in results[1:]:
      self.assertAllEqual(res.returns, results[0].returns)
      self.assertAllEqual(res.lengths, results[0].lengths)
    self.assertAllEqual(results[0].lengths, np.full((4, 2), 60))
    with self.assertRaisesRegex(ValueError, "refresh_steps"):
      evaluation.PipelinedEvaluator(AtariEnv("pong", 1), net, incremental=True,
                                    refresh_steps=0)

  def test_wrong_group_count_rejected(self):
    env, _, net, _, _, _ = _setup(2, num_envs=2)
    with self.assertRaises(ValueError):
      evaluation.PipelinedEvaluator(env, net, num_groups=3)
    env.close()


class AlgorithmTest(tf.test.TestCase):

  test_session = None  # tf.test.TestCase's deprecated helper, not a test.

  def test_ga_solves_cartpole(self):
    env, layout, net, evaluator, table, spec = _setup(24, groups=1)  # deterministic
    config = ga.GAConfig(population=24, truncation=6, mutation_power=0.1,
                         elite_candidates=3, elite_episodes=3, seed=1)
    algo = ga.GeneticAlgorithm(config, layout, table, net, evaluator)
    history = runner.run(algo, runner.RunConfig(
        logdir=self.get_temp_dir() + "/ga", generations=15, export=False,
        target_score=475.0), spec, print_fn=lambda s: None)
    self.assertGreaterEqual(history[-1]["elite"], 475.0)
    # Elitism: the elite is carried over unchanged.
    self.assertEqual(algo.population[0], algo.elite)
    self.assertTrue(all(len(g.mutations) >= 1 for g in algo.population[1:]))
    env.close()

  def test_es_solves_cartpole(self):
    # One slot group: jobs reach slots in a fixed order, so the run is
    # deterministic (two groups race for jobs).
    env, layout, net, evaluator, table, spec = _setup(32, hidden=(), groups=1)
    # (Seeds 0-3 all reach 195 within 15 generations with these settings.)
    config = es.ESConfig(population=32, sigma=0.1, learning_rate=0.1, l2=0.005,
                         center_episodes=5, seed=0)
    algo = es.EvolutionStrategy(config, layout, table, net, evaluator)
    history = runner.run(algo, runner.RunConfig(
        logdir=self.get_temp_dir() + "/es", generations=30, export=False,
        target_score=195.0), spec, print_fn=lambda s: None)
    self.assertGreaterEqual(history[-1]["elite"], 195.0)  # CartPole "solved" (v0)
    self.assertGreater(history[-1]["mean"], history[0]["mean"])
    env.close()

  def test_next_population_staged_while_elites_play(self):
    # The weights staged during the elite re-evaluation are exactly the next
    # population's, elite in row 0, for the GA and for random search.
    for random_search in (False, True):
      env, layout, net, evaluator, table, _ = _setup(12)
      config = ga.GAConfig(population=12, truncation=4, mutation_power=0.1,
                           elite_candidates=3, elite_episodes=2,
                           random_search=random_search, seed=2)
      algo = ga.GeneticAlgorithm(config, layout, table, net, evaluator)
      for _ in range(3):
        algo.step()
        staged = algo._staged  # pylint: disable=protected-access
        rebuilt = net.stage(algo.builder.build_many(algo.population))
        self.assertEqual(staged.loaded, 12)
        for a, b in zip(staged.kernels + staged.biases, rebuilt.kernels + rebuilt.biases):
          self.assertAllEqual(a, b)
      env.close()

  def test_random_search_draws_fresh_populations(self):
    env, layout, net, evaluator, table, spec = _setup(16)
    config = ga.GAConfig(population=16, truncation=1, elite_candidates=3,
                         elite_episodes=2, random_search=True, seed=3)
    algo = ga.GeneticAlgorithm(config, layout, table, net, evaluator)
    self.assertEqual(algo.name, "random_search")
    first = None
    for _ in range(2):
      algo.step()
      self.assertTrue(all(not g.mutations for g in algo.population))
      first = first or list(algo.population)
    self.assertNotEqual(first, algo.population)
    self.assertIsNotNone(algo.elite)
    env.close()

  def test_ga_checkpoint_resume(self):
    logdir = self.get_temp_dir() + "/ga_resume"
    env, layout, net, evaluator, table, spec = _setup(8)
    config = ga.GAConfig(population=8, truncation=3, mutation_power=0.1,
                         elite_candidates=2, elite_episodes=2, seed=4)
    algo = ga.GeneticAlgorithm(config, layout, table, net, evaluator)
    runner.run(algo, runner.RunConfig(logdir=logdir, generations=2, export=False),
               spec, print_fn=lambda s: None)
    saved_population, saved_elite = list(algo.population), algo.elite
    self.assertTrue(checkpoint.exists(logdir))

    fresh = ga.GeneticAlgorithm(config, layout, table, net, evaluator)
    lines = []
    history = runner.run(fresh, runner.RunConfig(logdir=logdir, generations=3,
                                                 resume=True, export=False),
                         spec, print_fn=lines.append)
    self.assertIn("resumed", lines[0])
    self.assertEqual(len(history), 1)
    self.assertEqual(history[0]["generation"], 3)
    # Children of generation 3 descend from the restored population.
    self.assertGreater(fresh.frames, algo.frames)
    state, _ = checkpoint.load(logdir)
    self.assertEqual(state["generation"], 3)
    restored = ga.GeneticAlgorithm(config, layout, table, net, evaluator)
    restored.restore(*checkpoint.load(logdir))
    self.assertEqual(restored.population, fresh.population)
    # The first checkpoint's population was what generation 3 evaluated.
    self.assertIn(fresh.elite, saved_population + [saved_elite] + fresh.population)
    env.close()

  def test_es_checkpoint_resume(self):
    logdir = self.get_temp_dir() + "/es_resume"
    env, layout, net, evaluator, table, spec = _setup(8, hidden=())
    config = es.ESConfig(population=8, sigma=0.05, learning_rate=0.1, center_episodes=1)
    algo = es.EvolutionStrategy(config, layout, table, net, evaluator)
    runner.run(algo, runner.RunConfig(logdir=logdir, generations=2, export=False),
               spec, print_fn=lambda s: None)
    fresh = es.EvolutionStrategy(config, layout, table, net, evaluator)
    fresh.restore(*checkpoint.load(logdir))
    self.assertAllEqual(fresh.theta, algo.theta)
    self.assertAllEqual(fresh.adam.m, algo.adam.m)
    self.assertEqual((fresh.generation, fresh.adam.t), (2, 2))
    with self.assertRaises(ValueError):
      ga.GeneticAlgorithm(ga.GAConfig(population=8, truncation=2), layout, table, net,
                          evaluator).restore(*checkpoint.load(logdir))
    env.close()


if __name__ == "__main__":
  tf.test.main()
