"""WorkerPool.stop_all returns only when every worker's thread has ended.

A trainer's first optimizer step on a slow CPU (the Zen 1 VM) took longer
than the 10 s stop_all used to wait: the final checkpoint was then written
while the step changed the weights, and the process crashed at exit
(SIGSEGV) with the thread still inside TensorFlow.
"""

import threading

from absl.testing import absltest

from tfrl.ga3c.workers import Worker, WorkerPool


class StopAllTest(absltest.TestCase):

  def test_waits_for_a_call_longer_than_the_report_interval(self):
    entered, release = threading.Event(), threading.Event()
    calls = []

    def long_call():
      calls.append(1)
      entered.set()
      # Outlasts several report intervals; a timer ends it, not stop_all.
      release.wait(timeout=30)

    def make(kind, index):
      return Worker(f"{kind}_{index}", long_call, stopping=lambda: False,
                    on_error=lambda e: None)

    pool = WorkerPool({"trainers": 1}, make)
    pool.resize("trainers", 1)
    self.assertTrue(entered.wait(timeout=30))
    timer = threading.Timer(1.0, release.set)
    timer.start()
    with self.assertLogs(logger="absl", level="INFO") as logs:
      pool.stop_all(report_every=0.2)
    [worker] = pool._workers["trainers"]  # pylint: disable=protected-access
    self.assertFalse(worker.thread.is_alive())
    self.assertTrue(release.is_set())
    self.assertEqual(calls, [1])  # stop_event ended the loop after the call
    self.assertTrue(any("Waiting for trainers_0 to finish its call" in line
                        for line in logs.output), logs.output)
    timer.join()


if __name__ == "__main__":
  absltest.main()
