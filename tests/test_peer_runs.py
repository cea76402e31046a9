"""The races' run helper leaves nothing behind when the race itself is interrupted."""

import os
import subprocess
import sys
import tempfile
import textwrap
import time

from absl.testing import absltest

from tests import processes

_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


class RunForTest(absltest.TestCase):

  def setUp(self):
    super().setUp()
    self.workdir = tempfile.mkdtemp()

  def test_ctrl_c_of_the_race_stops_the_run_and_what_it_started(self):
    # A run in its own session (as the races start them) with a grandchild;
    # the race gets SIGINT while it waits.
    marker = f"sleep 3{os.getpid() % 1000:03d}"
    script = textwrap.dedent(f"""
        import os, signal, sys, threading, time
        sys.path.insert(0, {_ROOT!r})
        from benchmarks.peers import runs
        # Ctrl-C as a terminal delivers it, even where the suite was started in
        # the background (which starts it with SIGINT ignored).
        signal.signal(signal.SIGINT, signal.default_int_handler)
        def interrupt():
          time.sleep(2)
          os.kill(os.getpid(), signal.SIGINT)
        threading.Thread(target=interrupt, daemon=True).start()
        try:
          runs.run_for([sys.executable, "-c", "import subprocess, time; "
                        "subprocess.Popen('{marker}'.split()); time.sleep(300)"], 120,
                       {os.path.join(self.workdir, 'run.out')!r})
        except KeyboardInterrupt:
          print("interrupted")
        """)
    race = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=120)
    self.assertIn("interrupted", race.stdout, race.stderr)
    deadline = time.time() + 5
    while list(processes.mentioning(marker)) and time.time() < deadline:
      time.sleep(0.2)
    left = list(processes.mentioning(marker))
    for pid in left:
      os.kill(pid, 9)
    self.assertEmpty(left)


if __name__ == "__main__":
  absltest.main()
