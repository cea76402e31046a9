"""GA, ES and random search on continuous (Box) action spaces: the head, observation
normalization, learning on InvertedPendulum-v5 (MuJoCo), and bad input."""

import os
import subprocess
import sys

import gymnasium as gym
import numpy as np
import tensorflow as tf

from tfrl import es
from tfrl import ga
from tfrl import random_search
from tfrl.envs import EnvProtocol, GymEnv
from tfrl.neuroevolution import checkpoint
from tfrl.neuroevolution import evaluation
from tfrl.neuroevolution import evaluators
from tfrl.neuroevolution import heads
from tfrl.neuroevolution import normalization
from tfrl.neuroevolution import population_net as pn
from tfrl.neuroevolution import runner
from tfrl.neuroevolution import settings
from tfrl.neuroevolution import single_network
from tfrl.neuroevolution import worker

_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
if _ROOT not in sys.path:
  sys.path.insert(0, _ROOT)
from tests.neuroevolution import bad_envs  # pylint: disable=g-import-not-at-top,unused-import
from tests.neuroevolution import runs  # pylint: disable=g-import-not-at-top

_BAD = "tests.neuroevolution.bad_envs:"
_PENDULUM = EnvProtocol(env="InvertedPendulum-v5", max_episode_frames=200)
_NORM = normalization.NormalizationConfig(enabled=True, fraction=0.2)


def _spec(protocol=_PENDULUM, capacity=20, num_envs=8, groups=2, hidden=(), seed=0,
          obs_norm=True):
  probe = worker.make_worker_env(protocol, 1, seed)
  head, shape = heads.for_env(probe), tuple(probe.observation_shape)
  probe.close()
  return worker.WorkerSpec(
      env=protocol, network=pn.NetworkConfig(arch="mlp", hidden=hidden, activation="tanh"),
      observation_shape=shape, num_actions=head.size, noise_seed=0, noise_size=100_000,
      capacity=capacity, num_envs=num_envs, slot_groups=groups, cache_size=12, head=head,
      obs_norm_clip=5.0 if obs_norm else None, env_seed=seed)


def _random_policy_return(episodes=20):
  """Uniformly random actions on InvertedPendulum-v5, capped as _PENDULUM: ~4."""
  env = gym.make("InvertedPendulum-v5", max_episode_steps=200)
  rng = np.random.default_rng(0)
  returns = []
  for seed in evaluators.episode_seeds(99, 0, 0, episodes, 1).ravel():
    env.reset(seed=int(seed))
    done, total = False, 0.0
    while not done:
      _, reward, terminated, truncated, _ = env.step(
          rng.uniform(-3.0, 3.0, 1).astype(np.float32))
      total += reward
      done = terminated or truncated
    returns.append(total)
  env.close()
  return float(np.mean(returns))


class HeadTest(tf.test.TestCase):

  test_session = None  # tf.test.TestCase's deprecated helper, not a test.

  def test_discrete_head_is_the_argmax(self):
    logits = tf.constant(np.random.default_rng(0).standard_normal((9, 5)), tf.float32)
    head = heads.discrete(5)
    self.assertAllEqual(head.actions(logits), tf.argmax(logits, axis=-1, output_type=tf.int32))
    self.assertEqual(sorted(head.policy_outputs(logits)), ["action", "probs"])

  def test_box_heads_scale_to_the_bounds_and_clip(self):
    low, high = (-0.4, 0.0, -3.0), (0.4, 2.0, 1.0)
    y = np.array([[0.0] * 3, [1e6] * 3, [-1e6] * 3, [0.5, -0.25, 2.0]], np.float32)
    mid = (np.array(high) + np.array(low)) / 2
    half = (np.array(high) - np.array(low)) / 2
    for squash, f in (("tanh", np.tanh), ("linear", lambda v: v)):
      head = heads.ActionHead(3, low, high, squash)
      a = head.actions(tf.constant(y)).numpy()
      self.assertEqual(a.dtype, np.float32)
      self.assertAllClose(a, np.clip(mid + half * f(y.astype(np.float64)), low, high),
                          atol=1e-6)
      self.assertTrue(np.all((a >= np.float32(low)) & (a <= np.float32(high))))
      self.assertAllClose(a[1], high)  # saturates at the bounds
      self.assertAllClose(a[2], low)
      self.assertEqual(list(head.policy_outputs(tf.constant(y))), ["action"])

  def test_spaces_the_head_cannot_serve(self):
    for space, message in (
        (gym.spaces.Box(-np.inf, np.inf, (2,)), "must be finite"),
        (gym.spaces.Box(-1, 1, (2, 2)), "1-D Box"),
        (gym.spaces.MultiDiscrete([3, 3]), "Discrete and 1-D Box"),
    ):
      with self.subTest(space=str(space)), self.assertRaisesRegex(ValueError, message) as e:
        heads.for_space(space)
      self.assertNotIn("\n", str(e.exception))
    with self.assertRaisesRegex(ValueError, "--action_head must be one of"):
      heads.ActionHead(1, (-1.0,), (1.0,), "sigmoid")

  def test_population_net_and_export_agree(self):
    # A tanh MLP with a Box head: the compiled op, the reference and the plain
    # (exported) network give the same actions (up to float rounding: their
    # sums run in other orders), within the bounds.
    head = heads.ActionHead(2, (-0.4, -2.0), (0.4, 1.0), "tanh")
    rng = np.random.default_rng(1)
    obs = rng.standard_normal((6, 5)).astype(np.float32)
    index = np.array([0, 1, 2, 0, 1, 2], np.int32)
    flat, actions = None, []
    for use_op in (True, False):
      layout = pn.ParamLayout(pn.NetworkConfig(arch="mlp", hidden=(16, 8), use_op=use_op,
                                               activation="tanh"), (5,), 2, head)
      if flat is None:
        flat = (rng.standard_normal((3, layout.dim)) * layout.init_scale * 30
                ).astype(np.float32)
      net = pn.PopulationNetwork(layout, 4)
      net.load(flat)
      actions.append(net.act(obs, index, np.ones(6, bool)).numpy())
    self.assertAllClose(actions[0], actions[1], atol=1e-6)
    self.assertIn("box(2, tanh)", layout.describe())
    for row in range(3):
      single = single_network.SingleNetwork(layout, flat[row])(obs[row::3])["action"].numpy()
      self.assertAllClose(single, actions[0][row::3], atol=1e-6)
    self.assertTrue(np.all(np.abs(actions[0][:, 0]) <= 0.4))
    self.assertGreater(len(np.unique(actions[0])), 6)  # not all saturated


class NormalizationTest(tf.test.TestCase):

  test_session = None  # tf.test.TestCase's deprecated helper, not a test.

  def test_chosen_episodes_depend_on_the_seed_only(self):
    seeds = evaluators.episode_seeds(3, 2, 0, 400, 5)
    chosen = normalization.chosen(seeds, 0.1)
    self.assertEqual(chosen.shape, seeds.shape)
    self.assertAllEqual(chosen, normalization.chosen(seeds, 0.1))
    self.assertAllEqual(chosen[7:9], normalization.chosen(seeds[7:9], 0.1))
    self.assertBetween(chosen.mean(), 0.08, 0.12)
    self.assertTrue(np.all(normalization.chosen(seeds, 1.0)))
    self.assertFalse(np.any(normalization.chosen(seeds, 1e-9)))

  def test_running_stats_merge_in_key_order(self):
    rng = np.random.default_rng(0)
    sums = normalization.EpisodeSums(np.array([[2, 0], [0, 1], [0, 0]]),
                                     rng.standard_normal((3, 4)) * 1e8,
                                     rng.random((3, 4)), np.array([5, 7, 9]))
    shuffled = normalization.EpisodeSums(*(a[[1, 2, 0]] for a in (
        sums.keys, sums.sum, sums.sumsq, sums.count)))
    a, b = normalization.RunningStats(4), normalization.RunningStats(4)
    self.assertEqual(a.add(sums), 3)
    b.add(shuffled)
    self.assertEqual(a.sum.tobytes(), b.sum.tobytes())
    ref = np.zeros(4)
    for i in (2, 1, 0):  # keys (0, 0), (0, 1), (2, 0)
      ref = ref + sums.sum[i]
    self.assertEqual(a.sum.tobytes(), ref.tobytes())
    self.assertEqual(a.count, 21)
    empty = normalization.RunningStats(4)
    mean, std = empty.mean_std()
    self.assertAllEqual(mean, np.zeros(4))
    self.assertAllEqual(std, np.ones(4))

  def test_evaluator_sums_each_episode_wherever_it_plays(self):
    # The observation sums of the chosen episodes are bit for bit the same
    # for any slot count, group count and graph call length, and equal a
    # plain float64 loop over the episode's observations.
    spec = _spec()
    layout = spec.layout()
    flat = (np.random.default_rng(2).standard_normal((6, layout.dim)) *
            layout.init_scale * 3).astype(np.float32)
    seeds = evaluators.episode_seeds(5, 0, 0, 6, 2)
    observe = np.zeros((6, 2), bool)
    observe[[0, 3, 5], [1, 0, 1]] = True
    mean, std = np.array([0.1, 0, -0.1, 0], np.float32), np.array([1, 2, 0.5, 3], np.float32)
    results = []
    for num_envs, groups, steps_per_call in ((3, 1, 32), (7, 3, 5), (12, 2, 1)):
      env = worker.make_worker_env(_PENDULUM, num_envs, seed=num_envs)
      net = pn.PopulationNetwork(layout, 8)
      net.load(flat)
      pipelined = evaluation.PipelinedEvaluator(env, net, num_groups=groups,
                                                episode_frame_cap=200,
                                                steps_per_call=steps_per_call,
                                                obs_norm_clip=5.0)
      pipelined.set_normalization(mean, std)
      results.append(pipelined.evaluate(6, 2, seeds=seeds, observe=observe))
      env.close()
    ref = results[0]
    self.assertEqual(sorted(map(tuple, ref.observations.keys)), [(0, 1), (3, 0), (5, 1)])
    for res in results[1:]:
      self.assertAllEqual(res.returns, ref.returns)
      order_a = np.lexsort(ref.observations.keys.T[::-1])
      order_b = np.lexsort(res.observations.keys.T[::-1])
      self.assertEqual(ref.observations.sum[order_a].tobytes(),
                       res.observations.sum[order_b].tobytes())
      self.assertEqual(ref.observations.sumsq[order_a].tobytes(),
                       res.observations.sumsq[order_b].tobytes())
    # Reference: play episode (3, 0) by hand, normalizing as the evaluator does.
    filt = normalization.ObservationFilter(4, 5.0, mean, std)
    single = single_network.SingleNetwork(layout, flat[3])
    env = gym.make("InvertedPendulum-v5", max_episode_steps=200)
    obs, _ = env.reset(seed=int(seeds[3, 0]))
    total, squares, steps, done = np.zeros(4), np.zeros(4), 0, False
    while not done:
      total, squares = total + obs, squares + obs * obs
      action = single(filt(obs[None]))["action"].numpy()[0]
      obs, _, terminated, truncated, _ = env.step(action)
      steps += 1
      done = terminated or truncated
    env.close()
    k = [tuple(key) for key in ref.observations.keys].index((3, 0))
    self.assertEqual(int(ref.observations.count[k]), steps)
    self.assertEqual(int(ref.lengths[3, 0]), steps)
    self.assertAllClose(ref.observations.sum[k], total, rtol=1e-12)
    self.assertAllClose(ref.observations.sumsq[k], squares, rtol=1e-12)

  def test_bad_normalization_settings(self):
    for kwargs, message in (({"fraction": 0.0}, "--obs_norm_fraction must be in"),
                            ({"fraction": 1.5}, "--obs_norm_fraction must be in"),
                            ({"clip": 0.0}, "--obs_norm_clip must be > 0")):
      with self.subTest(**kwargs), self.assertRaisesRegex(ValueError, message):
        normalization.NormalizationConfig(enabled=True, **kwargs)
    with self.assertRaisesRegex(ValueError, "needs vector observations"):
      normalization.Normalizer(_NORM, (84, 84, 4))


def _search_config(kind, seed=0):
  if kind == "es":
    return es.ESConfig(population=16, sigma=0.1, learning_rate=0.1, center_episodes=3,
                       seed=seed, normalization=_NORM)
  return ga.GAConfig(population=16 if kind == "ga" else 32, truncation=4,
                     mutation_power=0.2, elite_candidates=3, elite_episodes=3, seed=seed,
                     random_search=kind == "random_search", normalization=_NORM)


_BUILDS = {"es": es.build, "ga": ga.build, "random_search": random_search.build}


class LearningTest(tf.test.TestCase):
  """InvertedPendulum-v5 (MuJoCo), episodes capped at 200 steps (return <= 200)."""

  test_session = None  # tf.test.TestCase's deprecated helper, not a test.

  def test_ga_es_and_random_search_beat_a_random_policy(self):
    random_return = _random_policy_return()
    self.assertLess(random_return, 10.0)   # measured: 4.2
    # Measured (seed 0): ES and the GA reach the cap, 200, in 10-25
    # generations; random search (population 32) the best of 120-190.
    network = settings.NetworkSettings(arch="mlp", hidden=(), activation="tanh")
    slots = settings.EvaluatorSettings(num_envs=8, slot_groups=2, noise_table_size=100_000)
    for kind, floor in (("es", 150.0), ("ga", 150.0), ("random_search", 80.0)):
      _, run = runs.run(_BUILDS[kind](runs.config(
          _search_config(kind), os.path.join(self.get_temp_dir(), kind), env=_PENDULUM,
          network=network, evaluator=slots, generations=25, target_score=200.0),
                                      print_fn=lambda line: None))
      best_elite = max(m["elite"] for m in run.history)
      self.assertGreaterEqual(best_elite, floor, msg=kind)
      self.assertGreater(best_elite, 15 * random_return, msg=kind)
      self.assertGreater(run.search.normalizer.episodes, 0, msg=kind)
      self.assertGreater(run.search.normalizer.stats.count, 0, msg=kind)


def _cli(args, cwd=None, with_tfrl=True, check=True):
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
  env.pop("MUJOCO_GL", None)  # tfrl.evaluate picks the headless renderer itself
  env.pop("PYTHONPATH", None)
  if with_tfrl:
    env["PYTHONPATH"] = _ROOT
  out = subprocess.run([sys.executable] + args, env=env, cwd=cwd or _ROOT,
                       capture_output=True, text=True, timeout=300)
  if check and out.returncode != 0:
    raise AssertionError(f"{args} failed ({out.returncode}):\n{out.stdout}\n{out.stderr}")
  return out


def _error_line(test, out, prog):
  """The one `prog: error:` line of a run that ended on bad input (exit 2)."""
  test.assertEqual(out.returncode, 2, out.stderr[-3000:])
  lines = [l for l in out.stderr.splitlines() if l.startswith(f"{prog}: error:")]
  test.assertLen(lines, 1, out.stderr[-3000:])
  test.assertNotIn("Traceback", out.stderr)
  return lines[0]


_ES = ["-m", "tfrl.es", "--env=InvertedPendulum-v5", "--max_episode_frames=100",
       "--hidden=8", "--activation=tanh", "--population=8", "--center_episodes=2",
       "--num_envs=4", "--noise_table_size=100000", "--obs_norm", "--obs_norm_fraction=0.5"]


class CliTest(tf.test.TestCase):

  test_session = None  # tf.test.TestCase's deprecated helper, not a test.

  def test_es_exports_a_continuous_policy_that_plays_and_records(self):
    logdir = os.path.join(self.get_temp_dir(), "es")
    out = _cli([*_ES, "--generations=2", f"--logdir={logdir}"]).stdout
    self.assertIn("[es] gen    2", out)
    self.assertIn("tanh -> box(1, tanh)", out)
    policy = os.path.join(logdir, "elite")

    # Stock TensorFlow, without tfrl: float32 actions [B, 1] within [-3, 3],
    # the network of the checkpoint's centre behind the normalization it was
    # scored with (a numpy reference), even for observations far out of range.
    obs = np.array([[0.0, 0.1, -0.2, 0.3], [5.0, -4.0, 30.0, -1e3], [1e6, -1e6, 0.0, 1.0]])
    script = ("import sys, numpy as np, tensorflow as tf\n"
              f"p = tf.saved_model.load({policy!r})\n"
              f"out = p.signatures['serving_default'](obs=tf.constant({obs.tolist()!r}, "
              "tf.float64))\n"
              "a = out['action'].numpy()\n"
              "assert 'tfrl' not in sys.modules\n"
              "print(sorted(out), a.dtype, repr(a.tolist()))\n")
    printed = _cli(["-c", script], cwd=self.get_temp_dir(), with_tfrl=False).stdout
    keys, dtype, values = printed.strip().split(" ", 2)[0], printed.split()[1], None
    self.assertEqual((keys, dtype), ("['action']", "float32"))
    values = np.array(eval(printed.strip().split(" ", 2)[2]))  # pylint: disable=eval-used
    self.assertEqual(values.shape, (3, 1))
    self.assertTrue(np.all(np.abs(values) <= 3.0))
    state, arrays = checkpoint.load(logdir)
    self.assertEqual(state["observation_normalization"], {"fraction": 0.5, "clip": 5.0})
    layout = _spec(hidden=(8,)).layout()
    (w0, b0), (w1, b1) = layout.expand(arrays["theta"][None])
    x = (obs.astype(np.float32) - arrays["obs_norm_elite_mean"]) / arrays["obs_norm_elite_std"]
    h = np.tanh(np.clip(x, -5, 5) @ w0[0] + b0[0])
    self.assertAllClose(values, 3.0 * np.tanh(h @ w1[0] + b1[0]), atol=1e-5)
    self.assertNotAllClose(arrays["obs_norm_elite_std"], np.ones(4))

    report = os.path.join(self.get_temp_dir(), "eval.json")
    video = os.path.join(self.get_temp_dir(), "pendulum.gif")
    out = _cli(["-m", "tfrl.evaluate", f"--policy={policy}", "--episodes=2",
                "--max_episode_frames=12", f"--record={video}", f"--output={report}"])
    with open(report) as f:
      played = __import__("json").load(f)
    self.assertEqual(played["episodes"], 2)
    self.assertEqual(played["env"], "InvertedPendulum-v5")
    self.assertEqual(played["record"]["view"], "screen")   # MuJoCo's rgb_array render
    self.assertEqual(played["record"]["frames"], played["lengths"][0] + 1)
    from PIL import Image  # pylint: disable=import-outside-toplevel
    with Image.open(video) as image:
      self.assertGreater(image.size[0], 100)

    # A resume with other normalization flags, or on another observation
    # spec, is refused in one line.
    for extra, message in (
        (["--noobs_norm"], "observation normalization (--obs_norm_fraction=0.5 "
                           "--obs_norm_clip=5) is not this run's (off)"),
        (["--env=Pendulum-v1"], "observation spec [None, 4] float64 != [None, 3] float32")):
      out = _cli([*_ES, "--generations=3", f"--logdir={logdir}", "--resume", *extra],
                 check=False)
      self.assertIn(message, _error_line(self, out, "tfrl.es"))

  def test_bad_envs_end_in_one_line(self):
    logdir = os.path.join(self.get_temp_dir(), "bad")
    for env_id, message in (
        ("NaNObservation-v0", "gave a non-finite observation (NaN or inf) to network"),
        ("MultiDiscreteActions-v0", "GymEnv supports Discrete and Box action spaces")):
      out = _cli(["-m", "tfrl.ga", f"--env={_BAD}{env_id}", "--population=4",
                  "--truncation=2", "--elite_candidates=2", "--num_envs=2",
                  "--noise_table_size=10000", "--generations=1", f"--logdir={logdir}"],
                 check=False)
      self.assertIn(message, _error_line(self, out, "tfrl.ga"))


class BadInputTest(tf.test.TestCase):
  """What the entry points refuse before they play (their one line is the ValueError's)."""

  test_session = None  # tf.test.TestCase's deprecated helper, not a test.

  def _build(self, *args, algorithm_cls=ga.GAConfig):
    from absl import flags  # pylint: disable=import-outside-toplevel
    from tfrl import flagconfig  # pylint: disable=import-outside-toplevel
    from tfrl.neuroevolution import cli as ne_cli  # pylint: disable=import-outside-toplevel
    fv = flags.FlagValues()
    ne_cli.define_flags(algorithm_cls, fv)
    fv(["prog", "--population=4", "--noise_table_size=10000", "--num_envs=2", *args])
    config = ne_cli.config_from_flags(flagconfig.build(algorithm_cls, fv=fv), fv)
    return runner.worker_spec(config, 4)

  def test_refused_in_one_line(self):
    for args, message in (
        ([f"--env={_BAD}UnboundedActions-v0"], "which must be finite"),
        ([f"--env={_BAD}MatrixActions-v0"], "Discrete and 1-D Box action spaces"),
        (["--env=Pendulum-v1", "--obs_norm", "--obs_norm_fraction=0"],
         "--obs_norm_fraction must be in (0, 1]"),
        (["--env=Pendulum-v1", "--obs_norm", "--obs_norm_clip=-1"], "--obs_norm_clip must be > 0"),
        (["--game=pong", "--obs_norm"], "--obs_norm needs vector observations"),
        (["--game=pong", "--activation=tanh"], "tanh for the mlp"),
    ):
      with self.subTest(args=args):
        with self.assertRaises(ValueError) as e:
          self._build(*args)
        self.assertIn(message, str(e.exception))
        self.assertNotIn("\n", str(e.exception))

  def test_a_continuous_spec(self):
    spec, observation_spec = self._build("--env=Pendulum-v1", "--obs_norm", "--hidden=4",
                                         "--action_head=linear")
    self.assertEqual((spec.head.size, spec.head.squash, spec.obs_norm_clip), (1, "linear", 5.0))
    self.assertEqual(observation_spec.shape.as_list(), [None, 3])
