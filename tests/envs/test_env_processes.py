"""GymEnv(processes=N): the same results as in-process stepping, errors in one line,
and no child process outliving its env or its parent."""

import gc
import os
import signal
import sys
import textwrap
import time

import numpy as np
import tensorflow as tf

from tfrl.envs import GymEnv

_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
if _ROOT not in sys.path:
  sys.path.insert(0, _ROOT)
from tests import processes  # pylint: disable=g-import-not-at-top
from tests.envs import failing_envs  # pylint: disable=g-import-not-at-top,unused-import

_FAILING = "tests.envs.failing_envs:"


def _alive(pid: int) -> bool:
  """Whether `pid` runs (a zombie, exited but not reaped yet, does not)."""
  try:
    with open(f"/proc/{pid}/stat") as f:
      return f.read().rsplit(")", 1)[1].split()[0] != "Z"
  except FileNotFoundError:
    return False


def _wait_gone(pids, timeout=20.0):
  deadline = time.monotonic() + timeout
  while time.monotonic() < deadline and any(_alive(p) for p in pids):
    time.sleep(0.05)
  return [p for p in pids if _alive(p)]


def _assert_same(test, here, there):
  for a, b in zip(here, there):
    test.assertAllEqual(a.numpy(), b.numpy())


class SameResultsTest(tf.test.TestCase):

  def _compare(self, env_id, auto_reset, steps, max_episode_steps):
    kwargs = dict(seed=3, auto_reset=auto_reset, max_episode_steps=max_episode_steps)
    here = GymEnv(env_id, 7, **kwargs)
    there = GymEnv(env_id, 7, processes=3, **kwargs)  # blocks of 3, 2 and 2 slots
    self.addCleanup(here.close)
    self.addCleanup(there.close)
    self.assertEqual((here.processes, there.processes), (0, 3))
    self.assertAllEqual(here.reset(), there.reset())
    rng = np.random.default_rng(1)
    ended = 0
    for t in range(steps):
      slots = rng.permutation(7)[:rng.integers(1, 8)]  # subsets over 1 to 3 processes
      actions = rng.uniform(-1, 1, (len(slots),) + here.action_shape).astype(np.float32)
      out = here.step(actions, slots)
      _assert_same(self, out, there.step(actions, slots))
      ended += int(np.sum(out[2].numpy() | out[3].numpy()))
      if t % 47 == 0:
        seeds = rng.integers(0, 2 ** 31, len(slots))
        self.assertAllEqual(here.reset(slots, seeds=seeds), there.reset(slots, seeds=seeds))
      if t % 31 == 0:
        self.assertAllEqual(here.reset(only_played=True), there.reset(only_played=True))
    self.assertGreater(ended, 5)  # episodes ended (and were reset) along the way
    return there

  def test_halfcheetah_with_and_without_auto_reset(self):
    for auto_reset in (True, False):
      with self.subTest(auto_reset=auto_reset):
        self._compare("HalfCheetah-v5", auto_reset, 300, 15)

  def test_inverted_pendulum_ends_episodes_itself(self):
    self._compare("InvertedPendulum-v5", True, 300, None)

  def test_children_load_no_tensorflow(self):
    env = GymEnv("InvertedPendulum-v5", 2, processes=2)
    self.addCleanup(env.close)
    for pid in env._processes.pids:  # pylint: disable=protected-access
      with open(f"/proc/{pid}/maps") as f:
        maps = f.read()
      self.assertIn("mujoco", maps)
      self.assertNotIn("tensorflow", maps)

  def test_discrete_actions_and_bad_input_stay_in_the_parent(self):
    here, there = GymEnv("CartPole-v1", 3, seed=2), GymEnv("CartPole-v1", 3, seed=2,
                                                           processes=2)
    self.addCleanup(there.close)
    self.assertAllEqual(here.reset(), there.reset())
    for t in range(60):
      actions = [t % 2, 0, 1]
      _assert_same(self, here.step(actions), there.step(actions))
    with self.assertRaisesRegex(Exception, r"action 7 .* outside the action set 0..1"):
      there.step([0, 7], indices=[0, 2])
    with self.assertRaisesRegex(Exception, r"env index 3 is out of range: allowed 0..2"):
      there.step([0], indices=[3])
    with self.assertRaisesRegex(Exception, "duplicate env indices"):
      there.step([0, 0], indices=[1, 1])
    with self.assertRaisesRegex(Exception, r"in \[0, 2\^31\)"):
      there.reset([0], seeds=[2 ** 31])
    _assert_same(self, here.step([1, 1, 1]), there.step([1, 1, 1]))  # still in step

  def test_bad_process_counts(self):
    for bad in (-1, 1.5):
      with self.assertRaisesRegex(ValueError, "processes must be an int >= 0"):
        GymEnv("CartPole-v1", 2, processes=bad)


class ChildFailureTest(tf.test.TestCase):

  def _env(self, name):
    env = GymEnv(_FAILING + name, 4, processes=2)
    self.addCleanup(env.close)
    env.reset()
    for _ in range(2):
      env.step(np.zeros((4, 1), np.float32))
    return env

  def test_an_env_error_is_one_line_and_the_others_go_on(self):
    # Eager calls raise them as they are (in a graph: InvalidArgumentError, UnknownError).
    for name, error in (("RefusesAction-v0", ValueError), ("Breaks-v0", RuntimeError)):
      with self.subTest(name):
        env = self._env(name)
        with self.assertRaises(error) as caught:  # slot 0 fails, 2 and 3 step
          env.step(np.array([[1.0], [0.0], [0.0]], np.float32), [0, 2, 3])
        message = str(caught.exception)
        self.assertRegex(message, r"env process 0 \(slots 0..1, pid \d+\): (ValueError: this "
                         r"env refuses the action|KeyError: 'a broken model')$")
        # Process 1's slots stepped meanwhile, and process 0 goes on.
        self.assertAllEqual(env.step(np.zeros((1, 1), np.float32), [1])[0], [[3.0, 3.0]])
        self.assertAllEqual(env.step(np.zeros((1, 1), np.float32), [3])[0], [[4.0, 4.0]])

  def test_a_dead_child_is_an_error_not_a_hang(self):
    env = self._env("Dies-v0")
    pids = env._processes.pids  # pylint: disable=protected-access
    for _ in range(2):  # that call, and every later one
      with self.assertRaisesRegex(RuntimeError,
                                  r"env process 1 \(slots 2..3, pid \d+\) ended "
                                  r"unexpectedly \(exit code 3\)"):
        env.step(np.array([[0.0], [0.0], [0.0], [1.0]], np.float32))
    # Process 0 stepped in both calls and goes on.
    _assert_same(self, env.step(np.zeros((2, 1), np.float32), [0, 1]),
                 (tf.fill([2, 2], 5.0), tf.ones(2), tf.zeros(2, tf.bool), tf.zeros(2, tf.bool)))
    env.close()
    self.assertEqual(_wait_gone(pids), [])


class LifetimeTest(tf.test.TestCase):

  def test_close_and_garbage_collection_end_the_children(self):
    env = GymEnv("InvertedPendulum-v5", 3, processes=2)
    pids = env._processes.pids  # pylint: disable=protected-access
    self.assertTrue(all(_alive(p) for p in pids))
    env.close()
    env.close()  # again: nothing left to do
    self.assertEqual(_wait_gone(pids, timeout=0.1), [])
    env = GymEnv("InvertedPendulum-v5", 3, processes=2)
    pids = env._processes.pids  # pylint: disable=protected-access
    del env
    gc.collect()
    self.assertEqual(_wait_gone(pids, timeout=0.1), [])

  def _playing_parent(self):
    # A parent that prints its children's pids, then steps its envs until killed.
    script = textwrap.dedent("""
        import numpy as np
        from tfrl.envs import GymEnv
        env = GymEnv("HalfCheetah-v5", 4, processes=2)
        print("children", *env._processes.pids, flush=True)
        env.reset()
        while True:
          env.step(np.zeros((4, 6), np.float32))
        """)
    return processes.cli(["-c", script])

  def test_children_end_when_the_parent_is_killed(self):
    with self._playing_parent() as parent:
      line = processes.wait_for_line(parent, "children", timeout=120)
      pids = [int(p) for p in line.split()[1:]]
      self.assertLen(pids, 2)
      time.sleep(0.5)  # mid-step, most likely
      os.kill(parent.pid, signal.SIGKILL)  # the parent only, not its process group
      parent.wait(30)
      self.assertEqual(_wait_gone(pids), [], "children outlived their killed parent")

  def test_ctrl_c_of_the_terminal_does_not_hang(self):
    with self._playing_parent() as parent:
      line = processes.wait_for_line(parent, "children", timeout=120)
      pids = [int(p) for p in line.split()[1:]]
      time.sleep(0.5)
      os.killpg(parent.pid, signal.SIGINT)  # as a terminal's Ctrl-C: the whole group
      out = processes.stop(parent, signal.SIGINT, timeout=60)
      self.assertIn("KeyboardInterrupt", out)
      self.assertEqual(_wait_gone(pids), [], "children outlived their interrupted parent")


if __name__ == "__main__":
  tf.test.main()
