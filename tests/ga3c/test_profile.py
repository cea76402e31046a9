"""--profile_steps records a TensorBoard profiler trace of the op pipeline."""

import glob
import gzip
import json
import os
import subprocess
import sys
import time

import tensorflow as tf

from tfrl.envs import EnvProtocol
from tfrl.ga3c import GA3CConfig

_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, _ROOT)

from tests.ga3c import runs  # pylint: disable=g-import-not-at-top


class ProfileTest(tf.test.TestCase):
  test_session = None

  def test_trace_names_the_ale_step_op_and_queue_ops(self):
    logdir = self.get_temp_dir()
    config = GA3CConfig(
        protocol=EnvProtocol(game="PongNoFrameskip-v4"), agents=2, max_agents=2,
        envs_per_agent=2, prediction_batch_size=4, t_max=5, logdir=logdir, checkpoint_every=0,
        stats_every=100, profile_steps=(1, 4), max_seconds=120)
    run = runs.Background(config)
    run.start()
    pattern = os.path.join(logdir, "profile", "plugins", "profile", "*", "*.xplane.pb")
    deadline = time.time() + 120
    while not glob.glob(pattern) and time.time() < deadline:
      time.sleep(0.2)
    run.stop()  # the trace is complete once the run has ended
    traces = glob.glob(pattern)
    self.assertNotEmpty(traces, "no .xplane.pb trace written")
    data = b"".join(open(p, "rb").read() for p in traces)
    if data[:2] == b"\x1f\x8b":
      data = gzip.decompress(data)
    for name in (b"AleStep", b"AleObserve", b"QueueEnqueueManyV2",
                 b"QueueDequeueManyV2"):
      self.assertIn(name, data, f"{name!r} missing from the trace")
    # benchmarks/profile_summary.py reads the same trace: the emulator's op
    # shows up by its type with some of the traced self time. (A subprocess:
    # its absl flags must not join this process's.)
    report = os.path.join(logdir, "summary_of_trace.json")
    subprocess.run([sys.executable, os.path.join(_ROOT, "benchmarks", "profile_summary.py"),
                    os.path.join(logdir, "profile"), f"--output={report}"],
                   check=True, capture_output=True, timeout=120)
    with open(report) as f:
      summary = json.load(f)
    ops = {o["op"]: o["seconds"] for g in summary["groups"] for o in g["ops"]}
    self.assertGreater(ops.get("AleStep", 0.0), 0.0, sorted(ops)[:40])
    self.assertGreater(summary["span_seconds"], 0.0)


if __name__ == "__main__":
  tf.test.main()
