"""EnvProtocol (JSON round trip, checks), make_env and the shared episode loop."""

import json
import os
import subprocess
import sys

from absl.testing import parameterized
import numpy as np
import tensorflow as tf

from tfrl import resume
from tfrl.envs import EnvProtocol, GymEnv, make_env, play_episodes
from tfrl.envs import protocol as protocol_lib
from tfrl.ops import population


class EnvProtocolTest(parameterized.TestCase):

  @parameterized.named_parameters(
      ("atari", EnvProtocol(game="ALE/Pong-v5", frame_skip=3, noop_max=0,
                            episodic_life=True, full_action_space=True,
                            max_episode_frames=20000)),
      ("atari_defaults", EnvProtocol(game="pong")),
      ("gym", EnvProtocol(env="CartPole-v1", max_episode_frames=0)),
  )
  def test_json_round_trip(self, protocol):
    data = protocol.to_json()
    self.assertEqual(EnvProtocol.from_json(data), protocol)
    self.assertEqual(EnvProtocol.from_json(json.dumps(data)), protocol)  # as written
    self.assertEqual(EnvProtocol.from_json(protocol.resolved().to_json()),
                     protocol.resolved())

  def test_resolved_writes_out_the_game_ids_sticky_actions(self):
    self.assertEqual(EnvProtocol(game="ALE/Pong-v5").resolved().repeat_action_probability, 0.25)
    self.assertEqual(EnvProtocol(game="PongNoFrameskip-v4").resolved()
                     .repeat_action_probability, 0.0)
    self.assertEqual(EnvProtocol(game="ALE/Pong-v5", repeat_action_probability=0.0)
                     .resolved().repeat_action_probability, 0.0)
    self.assertEqual(EnvProtocol(game="pong").identity()["repeat_action_probability"], 0.0)

  def test_gym_protocols_ignore_atari_settings(self):
    self.assertEqual(EnvProtocol(env="CartPole-v1", frame_skip=2, noop_max=0,
                                 repeat_action_probability=0.25),
                     EnvProtocol(env="CartPole-v1"))
    self.assertEqual(EnvProtocol(env="CartPole-v1", max_episode_frames=9).max_episode_steps, 9)
    self.assertEqual(EnvProtocol(game="pong", max_episode_frames=9).max_episode_steps, 3)
    self.assertIsNone(EnvProtocol(game="pong", max_episode_frames=0).max_episode_steps)

  @parameterized.named_parameters(
      ("neither", {}, "exactly one of --game"),
      ("both", {"game": "pong", "env": "CartPole-v1"}, "exactly one of --game"),
      ("bad_game", {"game": "pong!"}, "unknown game 'pong!'"),
      ("frame_skip", {"game": "pong", "frame_skip": 0}, "--frame_skip must be an int >= 1"),
      ("sticky", {"game": "pong", "repeat_action_probability": 1.5},
       "--repeat_action_probability must be in [0, 1]"),
      ("cap", {"env": "CartPole-v1", "max_episode_frames": -1},
       "--max_episode_frames must be an int >= 0"),
      ("implementation", {"env": "CartPole-v1", "env_implementation": "c"},
       "--env_implementation must be one of auto, ops, gymnasium, got 'c'"),
      ("atari_on_gymnasium", {"game": "pong", "env_implementation": "gymnasium"},
       "--env_implementation=gymnasium plays --env ids; Atari games"),
      ("isa", {"game": "pong", "kernel_isa": "avx9000"},
       "--kernel_isa must be one of auto, amx, avx512, avx2, sse, portable, got 'avx9000'"),
  )
  def test_bad_values(self, values, message):
    with self.assertRaisesRegex(ValueError, message.replace("[", r"\[").replace("]", r"\]")):
      EnvProtocol(**values)

  def test_resolved_records_what_runs_and_identity_leaves_the_kernel_isa_out(self):
    cartpole = EnvProtocol(env="CartPole-v1")
    self.assertEqual(cartpole.env_implementation, "auto")
    self.assertEqual(cartpole.resolved().env_implementation, "gymnasium")
    self.assertEqual(EnvProtocol(game="pong").resolved().env_implementation, "ops")
    self.assertEqual(cartpole.describe(), "CartPole-v1 on gymnasium")
    # Once the population kernels are loaded, the resolved protocol (an
    # export's metadata) records the build that runs ...
    chosen = population.select_isa()
    self.assertTrue(population.loaded())
    self.assertIn(chosen, ("amx", "avx512", "avx2", "sse", "portable"))
    self.assertEqual(cartpole.resolved().kernel_isa, chosen)
    self.assertEqual(EnvProtocol.from_json(cartpole.resolved().to_json()), cartpole.resolved())
    # ... but a checkpoint's identity does not: a GA3C or TD3 run started in
    # a process that loaded them (a test process) resumes in one that did not.
    self.assertNotIn("kernel_isa", cartpole.identity())
    self.assertEqual(set(cartpole.identity()),
                     set(cartpole.to_json()) - {"kernel_isa"})

  def test_kernel_isa_choices_are_the_ops(self):
    self.assertEqual(protocol_lib.KERNEL_ISAS, population.KERNEL_ISAS)

  def test_from_json_refuses_what_is_not_a_protocol(self):
    with self.assertRaisesRegex(ValueError, r"unknown env protocol field\(s\) \['sticky'\]"):
      EnvProtocol.from_json({"game": "pong", "sticky": 1})
    with self.assertRaisesRegex(ValueError, "must be a JSON object"):
      EnvProtocol.from_json("[1, 2]")

  def test_a_resume_with_another_protocol_names_the_field(self):
    saved = resume.as_json(EnvProtocol(game="pong", repeat_action_probability=0.0).identity())
    now = EnvProtocol(game="pong", repeat_action_probability=0.25).identity()
    self.assertEqual(resume.mismatches(saved, now),
                     ["repeat action probability 0.0 != 0.25"])
    self.assertEqual(resume.mismatches(saved, EnvProtocol(game="ALE/Pong-v5").identity()),
                     ["game pong != ALE/Pong-v5", "repeat action probability 0.0 != 0.25"])

  def test_env_replaces_only_the_default_game(self):
    defaults = {"game": "pong", "env": None}
    values = dict(EnvProtocol(game="pong").to_json(), env="CartPole-v1")
    self.assertEqual(EnvProtocol.from_flag_values(values, defaults).env, "CartPole-v1")
    with self.assertRaisesRegex(ValueError, "exactly one"):
      EnvProtocol.from_flag_values(dict(values, game="breakout"), defaults)


class MakeEnvTest(tf.test.TestCase):

  def test_atari_env_has_the_protocols_settings(self):
    env = make_env(EnvProtocol(game="ALE/Breakout-v5", frame_skip=3, full_action_space=True),
                   2, seed=1)
    self.assertEqual((env.num_envs, env.frame_skip, env.num_actions), (2, 3, 18))
    self.assertIsNone(env.max_episode_steps)
    capped = make_env(EnvProtocol(game="pong", max_episode_frames=10), 1)
    self.assertEqual(capped.max_episode_steps, 3)  # ceil(10 / 4)
    uncapped = make_env(EnvProtocol(game="pong", max_episode_frames=10), 1,
                        enforce_frame_cap=False)
    self.assertIsNone(uncapped.max_episode_steps)

  def test_gym_env_caps_episodes_on_top_of_its_own_limit(self):
    env = make_env(EnvProtocol(env="CartPole-v1", max_episode_frames=7), 1, seed=0)
    self.assertIsInstance(env, GymEnv)
    env.reset()
    ends = [t for t in range(20) if bool(env.step([t % 2])[3][0])]
    self.assertEqual(ends, [6, 13])  # alternating pushes keep the pole up: truncated

  def test_unknown_names_are_one_line_value_errors(self):
    for protocol, message in ((EnvProtocol(game="NoSuchGameNoFrameskip-v4"),
                               "unknown or unusable --game=NoSuchGameNoFrameskip-v4: "),
                              (EnvProtocol(env="NoSuchEnv-v0"),
                               "unknown or unusable --env=NoSuchEnv-v0: ")):
      with self.assertRaises(ValueError) as cm:
        make_env(protocol, 1)
      self.assertStartsWith(str(cm.exception), message)
      self.assertNotIn("\n", str(cm.exception))

  def test_the_frame_cap_default_is_ales(self):
    self.assertEqual(protocol_lib.ALE_MAX_EPISODE_FRAMES, 108_000)
    self.assertEqual(EnvProtocol(game="pong").ale_frame_cap, 108_000)
    self.assertEqual(EnvProtocol(game="pong", max_episode_frames=400).ale_frame_cap, 108_000)
    self.assertEqual(EnvProtocol(game="pong", max_episode_frames=0).ale_frame_cap, 0)

  def test_an_evaluation_never_checks_the_kernel_isa(self):
    # Only the code that runs the population kernels asks for the build
    # (neuroevolution's evaluator): a process that never loads them (an
    # evaluation of a policy trained elsewhere) plays on; one whose kernels
    # run chooses it (as neuroevolution's run identity does), and a build this
    # library cannot run is refused then, in one line.
    code = ("from tfrl.envs import EnvProtocol, make_env\n"
            "from tfrl.ops import population\n"
            "p = EnvProtocol(env='CartPole-v1', kernel_isa='amx')\n"
            "make_env(p, 1).reset()\n"
            "print('PLAYED', p.resolved().kernel_isa)\n"
            "try:\n  population.select_isa(p.kernel_isa)\n"
            "except ValueError as e:\n  print('REFUSED', e)\n")
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    env.pop("TFRL_POPULATION_ISA", None)
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                         text=True, timeout=300, check=True).stdout
    self.assertIn("PLAYED amx", out)
    info = population.kernel_info()
    if "avx512" not in info["cpu_isas"]:  # amx runs on the AVX-512 build
      self.assertIn("REFUSED --kernel_isa=amx asks for the avx512 build of the population "
                    "kernels, which this CPU cannot run", out)
    elif "amx" not in info["options"]:
      self.assertIn("REFUSED --kernel_isa=amx needs a library built with the AMX option", out)


class PlayEpisodesTest(tf.test.TestCase):

  def test_seeded_episodes_do_not_depend_on_the_slots(self):
    # A fixed linear CartPole policy; episode k starts from seed 100 + k, so
    # one slot playing them in turn and four slots side by side score the same
    # (in another order: scores come as episodes end).
    w = tf.constant([[0.0, 0.0], [-1.0, 1.0], [0.0, 0.0], [0.0, 0.0]])
    policy = lambda obs: {"action": tf.argmax(tf.matmul(obs, w), axis=1,
                                              output_type=tf.int32)}
    seeds = np.arange(6) + 100
    results = []
    for num_envs in (1, 4):
      env = GymEnv("CartPole-v1", num_envs, seed=7 * num_envs)
      scores, lengths, _ = play_episodes(policy, env, 6, episode_seeds=seeds)
      self.assertAllEqual(scores, lengths)  # CartPole: reward 1 per step
      results.append(sorted(scores))
    self.assertEqual(results[0], results[1])
    self.assertGreater(len(set(results[0])), 1)  # the seeds matter
