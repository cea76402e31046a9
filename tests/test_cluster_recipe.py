"""docs/scaling.md's two-node Ray cluster, run exactly as the page gives it.

The page's namespace command (`unshare --net --pid --fork --mount-proc bash`)
gets the page's recipe on its standard input, as a shell gets lines pasted
into it: a head and a second node started with `ray start`, both on
127.0.0.1 with token authentication, a GA on them, `ray stop`. The only line
the test adds comes after `ray stop`: it lists the processes left in the
namespace. The network namespace has loopback only, and its own process
namespace keeps `ray stop` away from any other Ray on the machine (such as
tests/neuroevolution/test_ray.py's cluster). The run's generations and final
checkpoint must equal the same GA run without Ray.

Needs root (the README's test command runs as root), util-linux's `unshare`
and iproute2's `ip` and `ss`.
"""

import ast
import contextlib
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time

from absl.testing import absltest

from tests import processes

_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_DOC = os.path.join(_ROOT, "docs", "scaling.md")
_GENERATION = re.compile(r"gen\s+(\d+) \| best\s+(\S+) \| mean\s+(\S+) \| elite\s+(\S+) \| "
                         r"frames\s+(\d+)")
_LEFT = "processes left after ray stop:"
# Lists the namespace's processes by name (this line's own shell and python
# among them), after the recipe's `ray stop`.
_LIST_PROCESSES = (f"python -c \"import os; print('{_LEFT}', sorted(open(f'/proc/{{p}}/comm')"
                   ".read().strip() for p in os.listdir('/proc') if p.isdigit()))\"")
_RAY_PROCESSES = ("raylet", "gcs_server", "ray::", "dashboard", "monitor", "log_monitor",
                  "runtime_env")
# The whole test's time, under pytest's 900 s timeout (setup.cfg) so that a
# hang fails here, where the namespace is killed, not in pytest-timeout.
# Generous: the recipe takes a few minutes at most; this only catches a hang.
_BUDGET_SECONDS = 780
# Of it, kept for the run without Ray after the recipe.
_LOCAL_RUN_SECONDS = 240


def _block(marker):
  """The fenced block after `<!-- marker -->` in docs/scaling.md."""
  with open(_DOC) as f:
    text = f.read()
  found = re.search(rf"<!-- {marker} -->\n```[a-z]*\n(.*?)```", text, re.S)
  if found is None:
    raise AssertionError(f"docs/scaling.md has no block after <!-- {marker} -->")
  return found.group(1)


def _env(home, tmp):
  # The venv's `python` and `ray` first; this checkout's tfrl; a private HOME
  # for the token (~/.ray/auth_token) and TMPDIR for the recipe's mktemp.
  env = dict(os.environ, PATH=os.path.dirname(sys.executable) + os.pathsep + os.environ["PATH"],
             PYTHONPATH=_ROOT, TF_CPP_MIN_LOG_LEVEL="3", HOME=home, TMPDIR=tmp)
  # RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0, which a 'local' Ray run of another
  # test may leave in this process (tfrl/ray_cluster.py), would make the
  # recipe's second `ray start` refuse.
  for name in ("RAY_AUTH_MODE", "RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH", "RAY_ADDRESS",
               "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"):
    env.pop(name, None)
  return env


def _outcome(stdout, logdir):
  """(generation lines, checkpoint's population, elite and elite score)."""
  with open(os.path.join(logdir, "checkpoint.json")) as f:
    state = json.load(f)
  return (_GENERATION.findall(stdout),
          [state.get(k) for k in ("population", "elite", "elite_score")])


def _listeners(ss_output):
  """Local addresses of the LISTEN lines of `ss -tlnp`'s output."""
  return [line.split()[3] for line in ss_output.splitlines() if line.startswith("LISTEN")]


def _ga_command(recipe):
  [line] = [l for l in recipe.splitlines() if l.startswith("python -m tfrl.ga ")]
  return line


class ClusterRecipeTest(absltest.TestCase):

  def test_two_nodes_on_loopback_play_the_local_run(self):
    deadline = time.monotonic() + _BUDGET_SECONDS
    for tool in ("unshare", "ip", "ss"):
      self.assertIsNotNone(shutil.which(tool), f"needs {tool}: apt-get install util-linux "
                           "iproute2 (the README's test command installs them)")
    self.assertEqual(os.geteuid(), 0, "needs root for a network namespace (the README's "
                     "test command runs as root)")
    namespace = _block("cluster-namespace").strip()
    recipe = _block("cluster-recipe")
    lines = recipe.splitlines()
    stop = lines.index("ray stop")
    stdin = "\n".join(lines[:stop + 1] + [_LIST_PROCESSES] + lines[stop + 1:]) + "\n"

    # A short TMPDIR: Ray's socket paths under it must stay within 107 bytes.
    tmp = tempfile.mkdtemp(prefix="tc", dir="/tmp")
    self.addCleanup(shutil.rmtree, tmp, ignore_errors=True)
    home = os.path.join(tmp, "home")
    os.makedirs(home)
    env = _env(home, tmp)
    out = _run_in_namespace(shlex.split(namespace), stdin, env, tmp,
                            timeout=deadline - _LOCAL_RUN_SECONDS - time.monotonic())
    log = out.stdout + out.stderr
    self.assertEqual(out.returncode, 0, log[-5000:])

    # Both nodes on 127.0.0.1, and every listening socket on loopback.
    self.assertEqual(log.count("Local node IP: 127.0.0.1"), 2, log[-5000:])
    listeners = _listeners(out.stdout)
    self.assertTrue([a for a in listeners if a.endswith(":6379")], out.stdout[-5000:])
    for address in listeners:
      self.assertRegex(address, r"^(127\.0\.0\.1|\[::ffff:127\.0\.0\.1\]|\[::1\]):\d+$")
    # The run used two workers, one per node (each node has one CPU).
    self.assertTrue("ray: 2 workers" in out.stdout, log[-5000:])
    self.assertNotIn("workers started; going on", log)
    # GA3C on the same nodes: fed by two runners only, it wrote its checkpoint and policy.
    self.assertIn("ray 2 runners", log, log[-5000:])
    [ga3c] = [os.path.join(tmp, d, "ga3c") for d in os.listdir(tmp) if d.startswith("tmp.")]
    for written in ("saved_model", os.path.join("checkpoints", "checkpoint")):
      self.assertTrue(os.path.exists(os.path.join(ga3c, written)), log[-5000:])
    # `ray stop` left nothing but the shell and the listing's python.
    [left] = re.findall(rf"{_LEFT} (\[.*\])", out.stdout)
    left = ast.literal_eval(left)
    self.assertLen(left, 2, left)
    self.assertFalse([p for p in left if p.startswith(_RAY_PROCESSES)], left)
    self.assertEqual(_left_after(tmp, deadline), [])

    # The same GA without Ray, outside the namespace: the same run.
    [logdir] = [os.path.join(tmp, d, "ga") for d in os.listdir(tmp) if d.startswith("tmp.")]
    local_logdir = os.path.join(tmp, "local")
    command = re.sub(r" --ray_\S+", "", _ga_command(recipe)).split()
    command = [sys.executable] + command[1:]
    command = [a if not a.startswith("--logdir=") else f"--logdir={local_logdir}"
               for a in command]
    local = subprocess.run(command, env=env, cwd=_ROOT, capture_output=True, text=True,
                           timeout=max(deadline - time.monotonic(), 1.0))
    self.assertEqual(local.returncode, 0, local.stderr[-3000:])
    self.assertNotIn("ray:", local.stdout)
    on_ray, alone = _outcome(out.stdout, logdir), _outcome(local.stdout, local_logdir)
    self.assertLen(on_ray[0], 2)
    self.assertEqual(on_ray, alone)


def _left_after(marker, deadline):
  """Command lines of processes that mention `marker`, once none does or at
  `deadline` (a killed namespace's processes take a moment to go)."""
  while processes.mentioning(marker) and time.monotonic() < deadline:
    time.sleep(0.1)
  return list(processes.mentioning(marker).values())


def _run_in_namespace(command, stdin, env, cwd, timeout):
  """Runs the namespace's shell on `stdin`. On a timeout, or any exception
  (pytest-timeout's, Ctrl-C), kills its process group, and with the
  namespace's first process every process in it."""
  proc = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, env=env, cwd=cwd, text=True,
                          start_new_session=True)
  try:
    stdout, stderr = proc.communicate(stdin, timeout=timeout)
  except subprocess.TimeoutExpired:
    os.killpg(proc.pid, signal.SIGKILL)
    stdout, stderr = proc.communicate()
    raise AssertionError(f"the recipe did not end within {timeout:.0f} s:\n"
                         f"{stdout[-3000:]}\n{stderr[-3000:]}") from None
  finally:
    if proc.poll() is None:
      with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
      proc.wait()
  return subprocess.CompletedProcess(command, proc.returncode, stdout, stderr)


if __name__ == "__main__":
  absltest.main()
