"""benchmarks/ga3c_learners.py: a run stopped early keeps its preset's
learning-rate schedule.

The command the benchmark builds is parsed by GA3C's own flags (in a process
of its own: the benchmark and GA3C define flags of the same names) and the
step size at the stopping frame read from the config it gives.
"""

import json
import os
import subprocess
import sys
import textwrap

_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

_BUILD = textwrap.dedent("""
    import json, sys
    sys.path.insert(0, "benchmarks")
    from absl import flags
    import ga3c_learners
    flags.FLAGS(["ga3c_learners", *sys.argv[1:]])
    command = ga3c_learners.run_command("ga3c_pong", 0, "/nonexistent", False)
    # GA3C's own flag set reads the command, as the run would.
    for name in list(flags.FLAGS):
      delattr(flags.FLAGS, name)
    from tfrl import presets
    from tfrl.ga3c import __main__ as ga3c
    flags.FLAGS(presets.expand(command[2:], "tfrl.ga3c"))
    config = ga3c.config_from_flags()
    print(json.dumps({"command": command, "max_frames": config.max_frames,
                      "lr_at_stop": config.learning_rate_at(config.max_frames),
                      "lr": config.learning_rate}))
""")


def _build(*args):
  out = subprocess.run([sys.executable, "-c", _BUILD, *args], cwd=_ROOT, capture_output=True,
                       text=True, timeout=300, env=dict(os.environ, PYTHONPATH=_ROOT))
  assert out.returncode == 0, out.stderr[-3000:]
  return json.loads(out.stdout.strip().splitlines()[-1])


def test_stopping_at_10m_keeps_the_presets_40m_frame_schedule():
  got = _build("--max_frames=10000000", "--stop_score=18")
  assert "--lr_decay_frames=40000000" in got["command"], got["command"]
  assert got["max_frames"] == 10_000_000
  # 5e-4 decaying linearly to 0 at 40M frames: 3/4 of it left at 10M.
  assert abs(got["lr_at_stop"] - 0.75 * got["lr"]) < 1e-12, got


def test_extra_flags_come_last_and_win():
  got = _build("--max_frames=10000000", "--extra=--lr_decay_frames=20000000")
  assert abs(got["lr_at_stop"] - 0.5 * got["lr"]) < 1e-12, got
