"""A short tests/kill_resume.py: SIGKILL at a random moment, then --resume.

GA, ES and random search are killed twice each and then finished; their final
checkpoint must equal an uninterrupted run's. GA3C and TD3 are killed once
and stopped with SIGTERM after the resume. Every resume must take over the
stale lock, say where it resumed from and lose at most one checkpoint
interval (see the script's docstring).
"""

import dataclasses
import importlib.util
import os
import random
import unittest

_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _load_script():
  spec = importlib.util.spec_from_file_location(
      "kill_resume", os.path.join(_ROOT, "tests", "kill_resume.py"))
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  return module


kill_resume = _load_script()

# Shorter kill windows than the long run's: each still spans the moments the
# checkpoints are written (GA / ES / random search: every generation; GA3C:
# every 2 s; TD3: every 200 steps).
_WINDOWS = {"ga": 1.0, "es": 1.0, "random_search": 1.0, "ga3c": 3.0, "td3": 1.5}


class KillResumeTest(unittest.TestCase):

  def _run(self, name: str, kills: int, seed: int) -> dict:
    algorithm = dataclasses.replace(kill_resume.ALGORITHMS[name], window=_WINDOWS[name])
    result = kill_resume.run_algorithm(algorithm, kills, random.Random(seed), timeout=180.0,
                                       log=lambda line: None)
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

  def _neuroevolution(self, name: str) -> None:
    result = self._run(name, kills=2, seed=1)
    self.assertTrue(result["final_equal"])
    self.assertLessEqual(result["max_lost"], 1)  # generations

  def test_ga(self):
    self._neuroevolution("ga")

  def test_es(self):
    self._neuroevolution("es")

  def test_random_search(self):
    self._neuroevolution("random_search")

  def test_ga3c(self):
    result = self._run("ga3c", kills=1, seed=2)
    self.assertTrue(result["final_clean_stop"])

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
