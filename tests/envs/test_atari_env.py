"""AtariEnv: parity with ale-py, preprocessing, index subsets, bad input."""

import os
import sys
import threading

from absl.testing import parameterized
import ale_py
from ale_py import roms
import numpy as np
import tensorflow as tf

from tfrl.envs import AtariEnv, EnvProtocol
from tfrl.ops import ale as ale_ops

_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
if _ROOT not in sys.path:
  sys.path.insert(0, _ROOT)
from tests.cpu_features import cpu_flags  # pylint: disable=g-import-not-at-top


def reference_ale(game: str, seed: int, slot: int = 0) -> ale_py.ALEInterface:
  """ale-py's own emulator, configured as the op's slot `slot` is."""
  ale = ale_py.ALEInterface()
  ale.setLoggerMode(ale_py.LoggerMode.Error)
  ale.setInt("random_seed", ale_ops.slot_seed(seed, slot))
  ale.setFloat("repeat_action_probability", 0.0)
  ale.setInt("max_num_frames_per_episode", 0)
  ale.loadROM(roms.get_rom_path(game))
  ale.reset_game()
  return ale


def reference_step(ale, action, frame_skip=4):
  """One agent step as the op defines it: summed reward, max of last 2 frames."""
  reward, before, game_over = 0.0, None, False
  for f in range(frame_skip):
    reward += ale.act(action)
    if ale.game_over(with_truncation=False):
      game_over = True
      break
    if f == frame_skip - 2:
      before = ale.getScreenGrayscale()
  frame = ale.getScreenGrayscale()
  if before is not None:
    frame = np.maximum(frame, before)
  return frame, reward, game_over


class ParityTest(parameterized.TestCase):
  """Native frames, rewards and game ends equal ale-py's, pixel for pixel."""

  @parameterized.parameters(("pong", 400), ("breakout", 1500),
                            ("space_invaders", 1500), ("freeway", 300))
  def test_native_frames_rewards_and_ends_match_ale_py(self, game, steps):
    seed = 3
    env = AtariEnv(game, 1, screen_size=None, stack=1, noop_max=0,
                   fire_reset=False, seed=seed, max_episode_frames=0)
    ale = reference_ale(game, seed)
    action_set = ale.getMinimalActionSet()
    self.assertEqual(env.action_set, [a.value for a in action_set])
    rng = np.random.default_rng(0)
    obs = env.reset().numpy()
    np.testing.assert_array_equal(obs[0, :, :, 0], ale.getScreenGrayscale())
    total_reward, game_overs = 0.0, 0
    for t in range(steps):
      action = int(rng.integers(len(action_set)))
      step = env.step_detailed([action])
      want_frame, want_reward, want_over = reference_step(ale, action_set[action])
      self.assertEqual(float(step.reward[0]), want_reward, f"reward at step {t}")
      self.assertEqual(bool(step.terminated[0]), want_over, f"terminated at step {t}")
      self.assertFalse(bool(step.truncated[0]))
      if want_over:  # The op started a new game at once; so does the reference.
        game_overs += 1
        ale.reset_game()
        want_frame = ale.getScreenGrayscale()
      np.testing.assert_array_equal(step.obs.numpy()[0, :, :, 0], want_frame,
                                    err_msg=f"frame at step {t}")
      total_reward += want_reward
    if game in ("breakout", "space_invaders"):
      self.assertGreater(game_overs, 0, "the run should cover a game over")
    if game != "freeway":
      self.assertNotEqual(total_reward, 0.0, "the run should cover rewards")


class ResizeParityTest(tf.test.TestCase):
  """84x84 frames agree with gymnasium's AtariPreprocessing (cv2 INTER_AREA)."""

  def test_resized_frames_close_to_atari_preprocessing(self):
    import gymnasium as gym  # pylint: disable=import-outside-toplevel
    gym.register_envs(ale_py)
    ref = gym.wrappers.AtariPreprocessing(
        gym.make("BreakoutNoFrameskip-v4", repeat_action_probability=0.0),
        noop_max=0, frame_skip=4, screen_size=84, grayscale_obs=True)
    want, _ = ref.reset(seed=0)
    env = AtariEnv("BreakoutNoFrameskip-v4", 1, stack=1, noop_max=0,
                   fire_reset=False)
    got = env.reset().numpy()[0, :, :, 0]
    rng = np.random.default_rng(1)
    diffs = []
    for _ in range(150):
      diffs.append(np.abs(got.astype(int) - want.astype(int)))
      action = int(rng.integers(env.num_actions))
      want, _, terminated, truncated, _ = ref.step(action)
      got = env.step([action])[0].numpy()[0, :, :, 0]
      if terminated or truncated:
        break
    diffs = np.stack(diffs)
    # Stated tolerance: every pixel within 1 grey level (rounding of the
    # area average), and almost all exactly equal.
    self.assertLessEqual(diffs.max(), 1)
    self.assertLess(diffs.mean(), 0.01)


def _play_pong(steps=120):
  """Native max-pooled and 84x84 stacked observations of a fixed action run."""
  native = AtariEnv("pong", 2, screen_size=None, stack=1, seed=5)
  resized = AtariEnv("pong", 2, seed=5)
  frames = [native.reset().numpy(), resized.reset().numpy()]
  rng = np.random.default_rng(2)
  for _ in range(steps):
    actions = rng.integers(native.num_actions, size=2)
    frames += [native.step(actions)[0].numpy(), resized.step(actions)[0].numpy()]
  return frames


class PortablePathTest(tf.test.TestCase):
  """The SIMD builds of the observation pipeline (AVX-512 VBMI grey levels,
  AVX2 resize) and the portable ones give the same bytes, and each ran where
  the test says it did."""

  def test_portable_path_matches_default(self):
    # pylint: disable-next=import-outside-toplevel,multiple-imports
    import json, os, subprocess, sys, tempfile
    if "TFRL_ALE_NO_SIMD" in os.environ:
      self.skipTest("TFRL_ALE_NO_SIMD is set: this process runs the portable builds too")
    flags = cpu_flags()
    simd = {"grey_levels_avx512_vbmi": {"avx512vbmi", "avx512bw"} <= flags,
            "resize_avx2": "avx2" in flags}
    if not flags:
      self.skipTest("no /proc/cpuinfo: cannot tell which builds should run")
    if not any(simd.values()):
      print("\n[ale] SKIPPED: this CPU has neither AVX-512 VBMI nor AVX2, so the portable "
            "builds are all that runs")
      self.skipTest("this CPU lacks AVX-512 VBMI and AVX2: only the portable builds run")
    out = os.path.join(tempfile.mkdtemp(), "frames.npz")
    code = ("import json, numpy as np, sys; sys.path.insert(0, %r); "
            "from tests.envs import test_atari_env as t; from tfrl.ops import ale; "
            "np.savez(%r, *t._play_pong()); print('INFO' + json.dumps(ale.kernel_info()))"
            ) % (os.getcwd(), out)
    env = dict(os.environ, TFRL_ALE_NO_SIMD="1")
    proc = subprocess.run([sys.executable, "-c", code], check=True, env=env, cwd=os.getcwd(),
                          capture_output=True, text=True)
    portable_ran = json.loads([l for l in proc.stdout.splitlines() if l.startswith("INFO")][-1][4:])
    portable = np.load(out)
    default = _play_pong()
    default_ran = ale_ops.kernel_info()
    # The builds that ran: SIMD where the CPU has it here, portable there.
    for path, available in simd.items():
      self.assertEqual(default_ran[path], available, path)
      self.assertFalse(portable_ran[path], path)
    self.assertTrue(portable_ran["grey_levels_portable"] and portable_ran["resize_portable"])
    self.assertEqual(default_ran["grey_levels_portable"], not simd["grey_levels_avx512_vbmi"])
    self.assertEqual(default_ran["resize_portable"], not simd["resize_avx2"])
    lacking = [p for p, available in simd.items() if not available]
    if lacking:
      print(f"\n[ale] the CPU lacks the instructions of {lacking}: compared with portable "
            "only what it has")
    self.assertLen(portable.files, len(default))
    for i, frames in enumerate(default):
      np.testing.assert_array_equal(portable[f"arr_{i}"], frames, err_msg=f"array {i}")


class PreprocessingTest(tf.test.TestCase, parameterized.TestCase):

  def test_shapes_dtypes_and_attributes(self):
    env = AtariEnv("Pong", 3)
    self.assertEqual(env.observation_shape, (84, 84, 4))
    self.assertEqual(env.num_actions, 6)
    obs = env.reset()
    self.assertEqual(obs.dtype, tf.uint8)
    self.assertEqual(obs.shape, (3, 84, 84, 4))
    obs, reward, terminated, truncated = env.step([0, 1, 2])
    self.assertEqual(obs.shape, (3, 84, 84, 4))
    self.assertEqual((reward.dtype, terminated.dtype, truncated.dtype),
                     (tf.float32, tf.bool, tf.bool))

  @parameterized.parameters(
      (dict(grayscale=False), (84, 84, 12)),
      (dict(screen_size=None, stack=2), (210, 160, 2)),
      (dict(screen_size=(64, 48), stack=1), (64, 48, 1)),
  )
  def test_observation_variants(self, kwargs, shape):
    env = AtariEnv("Breakout", 2, **kwargs)
    self.assertEqual(env.observation_shape, shape)
    self.assertEqual(env.reset().shape, (2,) + shape)
    self.assertEqual(env.step([1, 1])[0].shape, (2,) + shape)

  def test_full_action_space(self):
    self.assertEqual(AtariEnv("Pong", 1, full_action_space=True).num_actions, 18)

  def test_frame_stack_shifts_oldest_first(self):
    env = AtariEnv("Breakout", 1, noop_max=0)
    first = env.reset().numpy()[0]
    for k in range(1, 4):  # A new game repeats its first frame.
      self.assertAllEqual(first[..., 0], first[..., k])
    previous = first
    for _ in range(5):
      obs = env.step([3])[0].numpy()[0]
      self.assertAllEqual(obs[..., :3], previous[..., 1:])
      previous = obs

  def test_gym_ids_set_the_protocol(self):
    # v5 means sticky actions; with p=1 every action repeats the first NOOP,
    # so the game plays as if only NOOP were pressed.
    sticky = AtariEnv("ALE/Breakout-v5", 1, noop_max=0, fire_reset=False,
                      repeat_action_probability=1.0)
    still = AtariEnv("BreakoutNoFrameskip-v4", 1, noop_max=0, fire_reset=False)
    sticky.reset()
    still.reset()
    for _ in range(40):
      a = sticky.step([1])[0].numpy()  # FIRE, ignored.
      b = still.step([0])[0].numpy()
      self.assertAllEqual(a, b)

  def test_truncation_at_frame_cap(self):
    # The protocol's cap: 200 frames of play.
    env = AtariEnv("Pong", 1, noop_max=0, fire_reset=False, max_episode_frames=200)
    self.assertEqual(env.max_episode_steps, 50)
    env.reset()
    truncated_at = []
    for t in range(120):
      _, _, terminated, truncated, over = env.step_detailed([0])
      self.assertFalse(bool(terminated[0]))
      if truncated[0]:
        self.assertTrue(bool(over[0]))
        truncated_at.append(t)
    # 200 frames at 4 frames per step: the 50th step of each episode.
    self.assertEqual(truncated_at, [49, 99])

  def test_ales_own_frame_cap_counts_from_the_reset(self):
    # The op's max_episode_frames (ALE's 108,000 in every protocol), here 200:
    # ALE counts the reset's frames too (none without no-ops and FIRE).
    from tfrl.envs import atari_env  # pylint: disable=import-outside-toplevel
    handle = ale_ops.env_create(game="pong", rom_directory=atari_env.default_rom_directory(),
                                num_envs=1, noop_max=0, fire_reset=False,
                                max_episode_frames=200)
    ale_ops.reset(handle, [0], tf.zeros([0], tf.int64))
    truncated_at = [t for t in range(60)
                    if bool(ale_ops.step(handle, [0], [0], auto_reset=True)[2][0])]
    self.assertEqual(truncated_at, [49])

  def test_step_cap_counts_steps_not_the_no_op_start(self):
    # Slot 0 steps every call, slot 1 every other: their caps come at their own
    # 30th step, whatever their (random) no-op starts; until then each plays
    # the game an uncapped env of the same seed plays.
    capped = AtariEnv("Pong", 2, noop_max=30, seed=4, max_episode_frames=120)  # 30 steps
    free = AtariEnv("Pong", 2, noop_max=30, seed=4)
    step = tf.function(lambda a, i: capped.step(a, i))  # in a graph too
    self.assertAllEqual(capped.reset(), free.reset())
    ends = {0: [], 1: []}
    for t in range(70):
      for slot in (0, 1) if t % 2 == 0 else (0,):
        obs, _, terminated, truncated = (x.numpy() for x in step([0], [slot]))
        free_obs = free.step([0], [slot])[0].numpy()
        self.assertFalse(terminated[0])
        if truncated[0]:
          ends[slot].append(t)
          # Auto-reset: a new game's first frame, repeated over the stack.
          self.assertAllEqual(obs[0], obs[0][..., :1].repeat(4, -1))
        elif not ends[slot]:
          self.assertAllEqual(obs[0], free_obs[0])
    self.assertEqual(ends, {0: [29, 59], 1: [58]})

  def test_step_cap_without_auto_reset_and_reset_counts_anew(self):
    env = AtariEnv("Pong", 1, noop_max=0, fire_reset=False, max_episode_frames=12,
                   auto_reset=False)  # 3 steps
    env.reset()
    outcomes = [tuple(bool(x[0]) for x in env.step_detailed([0])[3:]) for _ in range(3)]
    self.assertEqual(outcomes, [(False, False), (False, False), (True, True)])
    with self.assertRaisesRegex(tf.errors.InvalidArgumentError, "needs a reset"):
      env.step([0])
    env.reset()  # a new episode: three steps again
    env.step([0])
    env.reset()
    outcomes = [bool(env.step_detailed([0])[3][0]) for _ in range(3)]
    self.assertEqual(outcomes, [False, False, True])

  def test_episodic_life_marks_lost_lives(self):
    env = AtariEnv("Breakout", 1, episodic_life=True, noop_max=0, seed=1)
    env.reset()
    rng = np.random.default_rng(0)
    lives_lost = 0
    for _ in range(3000):
      _, _, terminated, _, over = env.step_detailed([int(rng.integers(4))])
      if over[0]:
        break
      lives_lost += int(terminated[0])
    self.assertTrue(bool(over[0]), "a random Breakout game ends within 3000 steps")
    self.assertEqual(lives_lost, 4)  # 5 lives: 4 losses, then game over.

  def test_noop_starts_are_seeded(self):
    def first_frames(seed):
      env = AtariEnv("SpaceInvaders", 4, noop_max=30, seed=seed)
      return env.reset().numpy()
    self.assertAllEqual(first_frames(5), first_frames(5))
    self.assertNotAllEqual(first_frames(5), first_frames(6))


class GraphAndSubsetTest(tf.test.TestCase):

  def test_tf_function_matches_eager(self):
    eager, graph = AtariEnv("Pong", 4, seed=2), AtariEnv("Pong", 4, seed=2)
    eager.reset()
    graph.reset()

    @tf.function(input_signature=[tf.TensorSpec([4], tf.int32)])
    def step(actions):
      return graph.step(actions)

    op_types = {op.type for op in step.get_concrete_function().graph.get_operations()}
    self.assertContainsSubset({"AleStep", "AleObserve"}, op_types)
    rng = np.random.default_rng(0)
    for _ in range(30):
      actions = rng.integers(6, size=4).astype(np.int32)
      for want, got in zip(eager.step(actions), step(tf.constant(actions))):
        self.assertAllEqual(want, got)

  def test_concurrent_groups_match_one_batch(self):
    """Two threads stepping halves of one batch give the whole-batch results."""
    whole, split = AtariEnv("Breakout", 4, seed=7), AtariEnv("Breakout", 4, seed=7)
    whole.reset()
    split.reset()
    rng = np.random.default_rng(0)
    actions = rng.integers(4, size=(50, 4)).astype(np.int32)
    results = {}

    @tf.function(input_signature=[tf.TensorSpec([2], tf.int32),
                                  tf.TensorSpec([2], tf.int32)])
    def step_group(actions, indices):
      return split.step(actions, indices)

    def run(group):
      indices = np.array(group, np.int32)
      results[tuple(group)] = [step_group(a[indices], indices)[0] for a in actions]

    threads = [threading.Thread(target=run, args=(g,)) for g in ([0, 1], [2, 3])]
    for t in threads:
      t.start()
    for t in threads:
      t.join()
    for t, a in enumerate(actions):
      obs = whole.step(a)[0]
      self.assertAllEqual(obs[:2], results[(0, 1)][t])
      self.assertAllEqual(obs[2:], results[(2, 3)][t])

  def test_only_played_resets_keep_unplayed_games(self):
    # Slot 0 is mid-game, slot 1 auto-reset at the end of a (truncated) game,
    # slots 2 and 3 were never stepped. A reset with only_played must equal
    # resetting slot 0 alone: slots 1-3 keep their games and their no-op
    # draws, so both envs play on identically.
    kept, one = (AtariEnv("Pong", 4, seed=3, max_episode_frames=200) for _ in range(2))
    for env in (kept, one):
      env.reset()
      for _ in range(5):
        env.step([0], indices=[0])
      for _ in range(80):
        if bool(env.step_detailed([0], indices=[1])[-1][0]):
          break
      else:
        self.fail("slot 1's game did not end at its 200-frame cap")
    got = kept.reset(only_played=True)
    one.reset([0])
    self.assertAllEqual(got, one.observe())
    rng = np.random.default_rng(1)
    for _ in range(30):
      actions = rng.integers(6, size=4).astype(np.int32)
      for want, have in zip(one.step(actions), kept.step(actions)):
        self.assertAllEqual(want, have)
    # Every slot has now played: all of them start new games.
    obs = kept.reset(only_played=True).numpy()
    self.assertAllEqual(obs[..., :1].repeat(4, -1), obs)

  def test_without_auto_reset_a_finished_slot_needs_reset(self):
    env = AtariEnv("Pong", 1, max_episode_frames=8, noop_max=0, fire_reset=False,
                   auto_reset=False)
    env.reset()
    env.step([0])
    _, _, _, truncated, over = env.step_detailed([0])
    self.assertTrue(bool(truncated[0]) and bool(over[0]))
    with self.assertRaisesRegex(tf.errors.InvalidArgumentError, "needs a reset"):
      env.step([0])
    env.reset([0])
    env.step([0])  # Fine again.


def _seeded_game(env, slot, seed, actions):
  """Observations and rewards of `actions` in slot `slot` after a reset seeded `seed`."""
  obs = [env.reset([slot], seeds=[seed]).numpy()[0]]
  rewards = []
  for a in actions:
    o, r, _, _ = env.step([a], indices=[slot])
    obs.append(o.numpy()[0])
    rewards.append(float(r[0]))
  return np.stack(obs), np.array(rewards)


class SeededResetTest(tf.test.TestCase):
  """A seeded reset makes a slot's game depend on the seed alone."""

  def test_seeded_game_independent_of_slot_and_history(self):
    # Pong with sticky actions 0.25 (so the sticky stream matters too) and
    # random no-op starts: slot 2 of an env that has played other games
    # (an unseeded one, and a seeded one cut short) replays, for a fixed
    # action sequence, the game of slot 1 of a fresh, differently seeded env.
    actions = np.random.default_rng(0).integers(6, size=300).astype(np.int32)
    used = AtariEnv("pong", 3, seed=1, repeat_action_probability=0.25)
    used.reset()
    for a in np.random.default_rng(1).integers(6, size=(150, 3)).astype(np.int32):
      used.step(a)
    _seeded_game(used, 2, 99, actions[:40])
    fresh = AtariEnv("pong", 2, seed=7, repeat_action_probability=0.25)
    want_obs, want_rewards = _seeded_game(fresh, 1, 1234, actions)
    got_obs, got_rewards = _seeded_game(used, 2, 1234, actions)
    self.assertAllEqual(got_obs, want_obs)
    self.assertAllEqual(got_rewards, want_rewards)
    self.assertLess(want_rewards.min(), 0)  # the game reached the scoring
    # A seeded reset always starts a new game, even with only_played.
    again = used.reset([2], only_played=True, seeds=[1234]).numpy()[0]
    self.assertAllEqual(again, want_obs[0])
    # Another seed, another game.
    other_obs, _ = _seeded_game(fresh, 1, 1235, actions)
    self.assertNotAllEqual(other_obs, want_obs)

  def test_bad_seeds_rejected_and_env_untouched(self):
    env, twin = AtariEnv("pong", 2, seed=0), AtariEnv("pong", 2, seed=0)
    env.reset()
    twin.reset()
    for seeds, message in (([5], "one seed per index"), ([5, 6, 7], "one seed per index"),
                           ([-1, 0], "seed -1 at position 0 is out of range"),
                           ([0, 2 ** 31], "out of range: allowed 0..2147483647")):
      with self.assertRaisesRegex(tf.errors.InvalidArgumentError, message, msg=str(seeds)):
        env.reset([0, 1], seeds=seeds)
    # Nothing was reset: the env plays on as its twin, and takes good seeds.
    rng = np.random.default_rng(0)
    for _ in range(20):
      actions = rng.integers(6, size=2).astype(np.int32)
      self.assertAllEqual(env.step(actions)[0], twin.step(actions)[0])
    self.assertAllEqual(env.reset(seeds=[0, 2 ** 31 - 1]), twin.reset(seeds=[0, 2 ** 31 - 1]))
    env.step([1, 2])


class BadInputTest(tf.test.TestCase):
  """Bad input raises a TF error that says what is allowed; nothing crashes."""

  def setUp(self):
    super().setUp()
    self.env = AtariEnv("Pong", 3)
    self.env.reset()

  def test_index_out_of_range(self):
    with self.assertRaisesRegex(tf.errors.InvalidArgumentError,
                                r"env index 5 .* out of range: allowed 0..2"):
      self.env.step([0], indices=[5])

  def test_negative_and_duplicate_indices(self):
    with self.assertRaisesRegex(tf.errors.InvalidArgumentError, "out of range"):
      self.env.observe([-1])
    with self.assertRaisesRegex(tf.errors.InvalidArgumentError, "appears twice"):
      self.env.step([0, 0], indices=[1, 1])

  def test_action_outside_action_set(self):
    with self.assertRaisesRegex(tf.errors.InvalidArgumentError,
                                r"action 6 .* outside the action set: allowed 0..5"):
      self.env.step([0, 6, 0])

  def test_mismatched_actions(self):
    with self.assertRaisesRegex((tf.errors.InvalidArgumentError, ValueError),
                                "one action per index|Dimensions must be equal"):
      self.env.step([0, 1])

  def test_step_before_reset(self):
    env = AtariEnv("Pong", 2)
    with self.assertRaisesRegex(tf.errors.InvalidArgumentError,
                                "slot 0 needs a reset"):
      env.step([0, 0])
    with self.assertRaisesRegex(tf.errors.InvalidArgumentError,
                                "no observation yet"):
      env.observe()

  def test_unknown_game(self):
    with self.assertRaisesRegex(tf.errors.NotFoundError,
                                "no ROM for game 'pongg'.*available games: .*pong"):
      AtariEnv("Pongg", 1)
    with self.assertRaisesRegex(ValueError, "unknown game"):
      AtariEnv("Pong!", 1)

  def test_missing_rom(self):
    empty = self.get_temp_dir()
    with self.assertRaisesRegex(tf.errors.NotFoundError,
                                "no ROM for game 'pong'.*available games: \\(none\\)"):
      AtariEnv("Pong", 1, rom_directory=empty)
    with self.assertRaisesRegex(tf.errors.NotFoundError, "does not exist"):
      AtariEnv("Pong", 1, rom_directory=empty + "/nowhere")

  def test_bad_constructor_arguments(self):
    for kwargs in (dict(frame_skip=0), dict(stack=0), dict(noop_max=-1),
                   dict(repeat_action_probability=1.5), dict(screen_size=(0, 84))):
      with self.assertRaises(ValueError, msg=str(kwargs)):
        AtariEnv("Pong", 1, **kwargs)
    with self.assertRaises(ValueError):
      AtariEnv("Pong", 0)
    # The protocol's checks, once: the same messages as make_env's.
    with self.assertRaisesRegex(ValueError, "--noop_max must be an int >= 0"):
      AtariEnv("Pong", 1, noop_max=-1)
    with self.assertRaisesRegex(TypeError, r"unexpected argument\(s\) \['max_episode_steps'\]"):
      AtariEnv("Pong", 1, max_episode_steps=3)
    with self.assertRaisesRegex(TypeError, r"a protocol and also \['noop_max'\]"):
      AtariEnv(EnvProtocol(game="pong"), 1, noop_max=0)
    with self.assertRaisesRegex(ValueError, "CartPole-v1 is a gymnasium id"):
      AtariEnv(EnvProtocol(env="CartPole-v1"), 1)

  def test_a_game_name_and_its_protocol_make_the_same_env(self):
    by_name = AtariEnv("ALE/Breakout-v5", 2, seed=3, noop_max=5, max_episode_frames=400)
    protocol = EnvProtocol(game="ALE/Breakout-v5", noop_max=5, max_episode_frames=400)
    by_protocol = AtariEnv(protocol, 2, seed=3)
    self.assertEqual(by_name.protocol, protocol.resolved())
    self.assertEqual(by_name.protocol.repeat_action_probability, 0.25)  # the v5 id's
    self.assertEqual(by_protocol.max_episode_steps, 100)
    self.assertAllEqual(by_name.reset(), by_protocol.reset())
    for t in range(30):
      for x, y in zip(by_name.step([t % 4] * 2), by_protocol.step([t % 4] * 2)):
        self.assertAllEqual(x, y)

  def test_op_rejects_attrs_that_would_crash_or_hang(self):
    # The raw op (no Python checks in front): values that wrapped around in
    # the emulator's ints, steps that would never end, and batches whose
    # observations would not fit in memory are refused, saying what is allowed.
    from tfrl.envs import atari_env  # pylint: disable=import-outside-toplevel
    rom_directory = atari_env.default_rom_directory()
    for kwargs, message in (
        (dict(frame_skip=2**32), r"frame_skip must be in 1..1000, got 4294967296"),
        (dict(frame_skip=2**31 - 1), r"frame_skip must be in 1..1000"),
        (dict(stack=2**32), r"stack must be in 1..64, got 4294967296"),
        (dict(noop_max=2**31), r"noop_max must be in 0..100000"),
        (dict(num_envs=64, height=1024, width=1024, grayscale=False, stack=64),
         r"stacked observations would take 12884901888 bytes .* at most 8589934592")):
      with self.assertRaisesRegex(tf.errors.InvalidArgumentError, message, msg=str(kwargs)):
        ale_ops.env_create(game="pong", rom_directory=rom_directory,
                           **dict(dict(num_envs=1), **kwargs))

  def test_closed_env_raises(self):
    env = AtariEnv("Pong", 1)
    handle = env.handle
    env.close()
    self.assertIsNone(env.handle)
    with self.assertRaises(tf.errors.NotFoundError):
      ale_ops.observe(handle, [0], height=84, width=84, channels=4)

  def test_closed_while_a_function_is_traced_frees_it_eagerly(self):
    # The garbage collector may finalize an env in the middle of a trace,
    # inside TF's graph lock: an op added to that graph then deadlocks.
    env = AtariEnv("Pong", 1)
    handle = env.handle

    @tf.function
    def traced(x):
      env.close()
      return x + 1

    graph = traced.get_concrete_function(tf.constant(1)).graph
    self.assertNotIn("DestroyResourceOp", [op.type for op in graph.get_operations()])
    with self.assertRaises(tf.errors.NotFoundError):
      ale_ops.observe(handle, [0], height=84, width=84, channels=4)


if __name__ == "__main__":
  tf.test.main()
