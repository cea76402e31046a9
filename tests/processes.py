"""Command lines in tests: start one, wait for a line of its output, signal it.

    with processes.cli(["-u", "-m", "tfrl.ga", "--logdir=..."]) as proc:
      processes.wait_for_line(proc, "[ga] gen    2", timeout=300)
      out = processes.stop(proc, signal.SIGINT, timeout=120)
    assert proc.returncode == 0, out[-3000:]

Each process runs `python ARGS` from the repository root in a session (and
so a process group) of its own. A thread collects its output line by line,
so a wait times out even when the process prints nothing, and a full pipe
never blocks it. A wait or stop that fails kills the whole group and raises
AssertionError with the end of the output; leaving the `cli` block kills
whatever of the group is still running, so no process outlives its test.

Import it as `from tests import processes`, with the repository root on
`sys.path` (as `python -m pytest` from the root has it).
"""

import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from typing import Dict, Iterator, List, Optional, Pattern, Sequence, Union

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_ENDED = "its output ended"


def cli_env(**overrides: str) -> dict:
  """`os.environ` with tfrl importable from ROOT and TensorFlow's C++ logs off."""
  env = dict(os.environ, PYTHONPATH=ROOT, TF_CPP_MIN_LOG_LEVEL="3")
  env.update(overrides)
  return env


class CliProcess(subprocess.Popen):
  """A Popen whose stdout a thread reads into `lines` as it comes (and its stderr
  into stdout, or into a file kept as `stderr_file`)."""

  def __init__(self, args, **kwargs):
    super().__init__(args, stdout=subprocess.PIPE, text=True, errors="replace",
                     start_new_session=True, **kwargs)
    stderr = kwargs.get("stderr")
    self.stderr_file = stderr if hasattr(stderr, "read") else None
    self.lines: List[str] = []
    self._waited = 0  # lines already looked at by next_line
    self._ended = False
    self._changed = threading.Condition()
    self._reader = threading.Thread(target=self._read, daemon=True)
    self._reader.start()

  def _read(self):
    try:
      for line in self.stdout:
        with self._changed:
          self.lines.append(line)
          self._changed.notify_all()
    except (OSError, ValueError):  # a closed pipe
      pass
    finally:
      with self._changed:
        self._ended = True
        self._changed.notify_all()

  @property
  def output(self) -> str:
    """All output read so far."""
    with self._changed:
      return "".join(self.lines)

  def join_output(self, timeout: float) -> bool:
    """Waits up to `timeout` seconds for the output to end; whether it did."""
    self._reader.join(max(0.0, timeout))
    return not self._reader.is_alive()

  def next_line(self, match, timeout: float):
    """(line, None) for the next line not yet looked at that `match` accepts, or
    (None, why not) if the output ends or `timeout` seconds pass first."""
    deadline = time.monotonic() + timeout
    with self._changed:
      while True:
        while self._waited < len(self.lines):
          line = self.lines[self._waited]
          self._waited += 1
          if match(line):
            return line, None
        if self._ended:
          return None, _ENDED
        left = deadline - time.monotonic()
        if left <= 0:
          return None, f"none within {timeout:g} s"
        self._changed.wait(left)


def start_cli(args: Sequence[str], env: Optional[dict] = None, *, cwd: str = ROOT,
              stderr=subprocess.STDOUT) -> CliProcess:
  """Starts `python ARGS` (env: `cli_env()` if None; stderr: into stdout by default,
  or a file (opened "w+", a failure shows its end too), or None to inherit).
  Prefer `cli`, which always cleans up."""
  return CliProcess([sys.executable, *args], env=cli_env() if env is None else env, cwd=cwd,
                    stderr=stderr)


@contextlib.contextmanager
def cli(args: Sequence[str], env: Optional[dict] = None, *, cwd: str = ROOT,
        stderr=subprocess.STDOUT) -> Iterator[CliProcess]:
  """`start_cli` as a context: on leaving it, the process group is killed."""
  proc = start_cli(args, env, cwd=cwd, stderr=stderr)
  try:
    yield proc
  finally:
    kill(proc)


def _fail(proc: CliProcess, what: str):
  kill(proc)
  message = (f"{' '.join(proc.args[1:])!r} (pid {proc.pid}, exit code {proc.returncode}): "
             f"{what}; its output ends:\n{proc.output[-3000:]}")
  if proc.stderr_file is not None:  # a file the test opened for reading too ("w+")
    with contextlib.suppress(OSError, ValueError):
      proc.stderr_file.seek(0)
      message += f"\nits stderr ends:\n{proc.stderr_file.read()[-3000:]}"
  raise AssertionError(message)


def wait_for_line(proc: CliProcess, pattern: Union[str, Pattern[str]], timeout: float) -> str:
  """Returns the next line of output (after those already waited for) that contains
  `pattern` (a str, or a compiled regex searched in the line). If none comes within
  `timeout` seconds or the output ends first, kills the group and fails."""
  if isinstance(pattern, str):
    match = lambda line: pattern in line
  else:
    match = lambda line: pattern.search(line) is not None
  line, why_not = proc.next_line(match, timeout)
  if line is None:
    _fail(proc, f"no line with {pattern!r} ({why_not})")
  return line


def read_line(proc: CliProcess, timeout: float) -> str:
  """Returns the next line of output, '' if the output ended; kills the group and
  fails if none comes within `timeout` seconds."""
  line, why_not = proc.next_line(lambda _: True, timeout)
  if line is None:
    if why_not == _ENDED:
      return ""
    _fail(proc, f"no line ({why_not})")
  return line


def stop(proc: CliProcess, sig: int = signal.SIGTERM, timeout: float = 120.0) -> str:
  """Sends `sig` to the process (not its group: what it starts is its own to stop),
  waits up to `timeout` seconds for it to exit and its output to end, and returns
  all its output. If either takes longer, kills the group and fails."""
  deadline = time.monotonic() + timeout
  if proc.poll() is None:
    proc.send_signal(sig)
  try:
    proc.wait(timeout)
  except subprocess.TimeoutExpired:
    _fail(proc, f"still running {timeout:g} s after {signal.Signals(sig).name}")
  if not proc.join_output(deadline - time.monotonic()):
    _fail(proc, f"exited, but its output (held open by a child?) did not end within "
          f"{timeout:g} s of {signal.Signals(sig).name}")
  return proc.output


def kill(proc: CliProcess) -> None:
  """SIGKILLs the process group (the process and whatever it started in its session
  that is still there), reaps the process and closes its output. Safe to repeat."""
  try:
    os.killpg(proc.pid, signal.SIGKILL)
  except (ProcessLookupError, PermissionError):
    pass  # the group is gone
  try:
    proc.wait(30)
  except subprocess.TimeoutExpired:
    pass
  if proc.join_output(30) and proc.stdout:
    proc.stdout.close()


def mentioning(text: str, environ: bool = False) -> Dict[int, str]:
  """{pid: command line} of this machine's processes whose command line (or,
  with `environ`, environment: Ray's workers carry their session folder there)
  contains `text`, this process excepted (a zombie's command line is empty)."""
  found = {}
  for pid in filter(str.isdigit, os.listdir("/proc")):
    try:
      with open(f"/proc/{pid}/cmdline", "rb") as f:
        cmdline = f.read().replace(b"\0", b" ").decode(errors="replace")
      env = b""
      if environ:
        with open(f"/proc/{pid}/environ", "rb") as f:
          env = f.read()
    except OSError:
      continue
    if (text in cmdline or text.encode() in env) and int(pid) != os.getpid():
      found[int(pid)] = cmdline
  return found
