"""A short tests/kill_resume.py: SIGKILL at a random moment, then --resume.

GA, ES and random search are killed twice each and then finished; their final
checkpoint must equal an uninterrupted run's, the GA's observation
normalizer (--obs_norm) included. So is an ES with observation
normalization on HalfCheetah-v5 (the MuJoCo ops), killed only once it has a
checkpoint: its resumes restore the normalizer too, and its final state,
normalizer included, equals the uninterrupted run's bit for bit. GA3C and TD3
are killed once and stopped with SIGTERM after the resume; GA3C's kill comes
after its first checkpoint and is aimed at a write, and must land inside one
and resume from a checkpoint. Every resume must take over the stale lock, say
where it resumed from and lose at most one checkpoint interval (see the
script's docstring).
"""

import dataclasses
import random
import unittest

from tests import kill_resume

# Shorter kill windows than the long run's: each still spans the moments the
# checkpoints are written (GA / ES / random search: every generation; GA3C:
# every 2 s; TD3: every 200 steps).
_WINDOWS = {"ga": 1.0, "es": 1.0, "random_search": 1.0, "es_mujoco": 1.0, "ga3c": 3.0,
            "td3": 1.5}
# A checkpoint's observation normalizer (--obs_norm).
_NORMALIZER_ARRAYS = {"obs_norm_sum", "obs_norm_sumsq", "obs_norm_count",
                      "obs_norm_elite_mean", "obs_norm_elite_std"}


class KillResumeTest(unittest.TestCase):

  def _run(self, name: str, kills: int, seed: int, **kwargs) -> dict:
    algorithm = dataclasses.replace(kill_resume.ALGORITHMS[name], window=_WINDOWS[name])
    result = kill_resume.run_algorithm(algorithm, kills, random.Random(seed), timeout=180.0,
                                       log=lambda line: None, **kwargs)
    problems = [f"kill {t.get('kill')}: {t.get('problem')}"
                for t in result["trials"] if not t.get("ok")]
    if result.get("final_problem"):
      problems.append(result["final_problem"])
    self.assertEqual(problems, [], f"{name}: logs kept in {result['workdir']}")
    self.assertEqual(result["kills"], kills)
    self.assertEqual(result["resumes_ok"], kills)
    self.assertEqual(result["failures"], 0)
    for trial in result["trials"]:
      self.assertIn(trial["resume"], ("resumed", "no checkpoint"))
      self.assertLessEqual(trial["lost"], trial["allowed"])
    return result

  def _neuroevolution(self, name: str, **kwargs) -> dict:
    result = self._run(name, kills=2, seed=1, **kwargs)
    self.assertTrue(result["final_equal"])
    self.assertLessEqual(result["max_lost"], 1)  # generations
    return result

  def test_ga(self):
    result = self._neuroevolution("ga")
    # The compared final state holds the observation statistics.
    self.assertLessEqual(_NORMALIZER_ARRAYS, set(result["final_arrays"]))

  def test_es(self):
    self._neuroevolution("es")

  def test_random_search(self):
    self._neuroevolution("random_search")

  def test_es_normalized_on_mujoco(self):
    result = self._neuroevolution("es_mujoco", after_checkpoint=True)
    self.assertIn("(MujocoEnv)", result["setup_line"])
    self.assertEqual([t["resume"] for t in result["trials"]], ["resumed", "resumed"])
    # The compared final state holds the observation statistics.
    self.assertLessEqual(_NORMALIZER_ARRAYS | {"theta"}, set(result["final_arrays"]))

  def test_ga3c(self):
    result = self._run("ga3c", kills=1, seed=2, aimed_fraction=1.0, after_checkpoint=True)
    self.assertTrue(result["final_clean_stop"])
    # The kill came inside a write, and the resume restored a checkpoint
    # (check_resume: the newest complete one, or the one before it).
    [trial] = result["trials"]
    self.assertEqual(trial["resume"], "resumed", trial)
    self.assertTrue(trial["aimed_at_a_write"], trial)
    self.assertGreaterEqual(result["mid_write_kills"], 1, trial)

  def test_td3(self):
    result = self._run("td3", kills=1, seed=3)
    self.assertTrue(result["final_clean_stop"])
    self.assertLessEqual(result["max_lost"], kill_resume.TD3_CHECKPOINT_EVERY)

  def test_table_and_checks_without_runs(self):
    # check_resume on made-up console lines: a GA resume that went back two
    # generations and did not take over the lock is two problems.
    algorithm = kill_resume.ALGORITHMS["ga"]

    class Killed:
      pid = 123
      lines = [(1.0, "[ga] gen    4 | best 1 | mean 1 | elite 1 | frames         400 | x"),
               (2.0, "[ga] gen    5 | best 1 | mean 1 | elite 1 | frames         500 | x")]

    started = kill_resume.Start(True, "resumed", 3, 300, progress_at=1.0)
    resumed = kill_resume.Start(True, "resumed", 3, 300, lock_taken_over_from=None)
    record = kill_resume.check_resume(algorithm, Killed, started, 2.5, resumed,
                                      {"checkpoint.json": 2.4}, None, 1.0)
    self.assertFalse(record["ok"])
    self.assertEqual((record["lost"], record["lost_frames"]), (2, 200))
    self.assertIn("went back 2 generations", record["problem"])
    self.assertIn("stale lock of pid 123 not taken over", record["problem"])
    resumed = kill_resume.Start(True, "resumed", 4, 400, lock_taken_over_from=123)
    record = kill_resume.check_resume(algorithm, Killed, started, 2.5, resumed,
                                      {"checkpoint.json": 2.4}, None, 1.0)
    self.assertTrue(record["ok"], record["problem"])
    self.assertEqual(record["lost"], 1)
    self.assertIn("ga ", kill_resume.table([{
        "algorithm": "ga", "kills": 1, "resumes_ok": 1, "failures": 0, "max_lost": 1,
        "total_lost": 1, "unit": "generations", "max_lost_seconds": 0.5,
        "aimed_kills": 1, "mid_write_kills": 0, "no_checkpoint_resumes": 0,
        "final_equal": True}]))


if __name__ == "__main__":
  unittest.main()
