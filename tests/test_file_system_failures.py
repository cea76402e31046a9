"""A full disk and a read-only logdir, on real (small) file systems.

Each test runs its Python in a private mount namespace (`unshare -m`, or
`unshare -r -m` without root) on a tmpfs of a few MB mounted for it alone: the
mount vanishes with the process and nothing on the machine changes. Where the
machine cannot make one (no unshare, no user namespaces, a container without
CAP_SYS_ADMIN), the tests fail and say why: a machine that runs the README's
test command (as root) can.

The full-disk tests check what `tfrl.atomic_files` promises: the write that
runs out of space fails, the previous checkpoint (or policy) stays intact and
loadable, and no temporary file is left behind.
"""

import functools
import json
import os
import shutil
import subprocess
import sys
import textwrap

import pytest

_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_ENV = dict(os.environ, PYTHONPATH=_ROOT, TF_CPP_MIN_LOG_LEVEL="3")

# mount the tmpfs ($0: options) on $1, then run the rest of the arguments.
_MOUNT_AND_RUN = 'mount -t tmpfs -o "$0" tfrl_test "$1" && shift && exec "$@"'

# Shared by the scripts: fill the file system up to `leave` free bytes.
_FILL = textwrap.dedent("""
    import os
    def fill(mountpoint, leave=0):
      st = os.statvfs(mountpoint)
      free = st.f_bavail * st.f_frsize
      with open(os.path.join(mountpoint, "filler"), "wb") as f:
        f.write(b"\\0" * max(0, free - leave))
    def leftovers(directory):
      return [os.path.join(d, n) for d, dirs, names in os.walk(directory)
              for n in names + dirs if n.endswith((".tmp", ".old"))]
""")


def _namespace(options, mountpoint, command):
  unshare = ["unshare", "-m"] if os.geteuid() == 0 else ["unshare", "-r", "-m"]
  return unshare + ["sh", "-c", _MOUNT_AND_RUN, options, mountpoint] + command


@functools.lru_cache(maxsize=None)
def _cannot_mount():
  """Why this machine cannot mount a private tmpfs ("" when it can)."""
  if shutil.which("unshare") is None:
    return "no `unshare` command (util-linux)"
  probe = "/tmp" if os.path.isdir("/tmp") else os.getcwd()
  try:
    out = subprocess.run(_namespace("size=64k", probe, ["true"]), capture_output=True,
                         text=True, timeout=30)
  except (OSError, subprocess.TimeoutExpired) as e:
    return f"unshare failed: {e}"
  if out.returncode != 0:
    return f"cannot mount a private tmpfs: {out.stderr.strip()[:200]}"
  return ""


def _in_tmpfs(tmp_path, script, size="4m", options=""):
  """Runs `script` (python, argv[1] = the tmpfs) on a fresh tmpfs of `size`."""
  reason = _cannot_mount()
  if reason:
    pytest.fail(reason)
  mountpoint = tmp_path / "fs"
  mountpoint.mkdir()
  opts = f"size={size}" + (f",{options}" if options else "")
  out = subprocess.run(_namespace(opts, str(mountpoint),
                                  [sys.executable, "-c", _FILL + textwrap.dedent(script),
                                   str(mountpoint)]),
                       env=_ENV, cwd=_ROOT, capture_output=True, text=True, timeout=300)
  assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
  return json.loads(out.stdout.strip().splitlines()[-1])


def test_es_run_on_a_full_disk_ends_in_one_line_with_its_checkpoint(tmp_path):
  # ES on CartPole with a 256x256 MLP: its checkpoint arrays (theta, Adam m
  # and v) are ~800 KB, the rest of a generation's writes a few KB.
  result = _in_tmpfs(tmp_path, """
      import json, subprocess, sys
      from tfrl.neuroevolution import checkpoint
      logdir = os.path.join(sys.argv[1], "es")
      args = [sys.executable, "-m", "tfrl.es", "--env=CartPole-v1", "--hidden=256,256",
              "--population=4", "--num_envs=4", "--center_episodes=1",
              "--noise_table_size=100000", "--noexport", "--max_episode_frames=50",
              f"--logdir={logdir}"]
      first = subprocess.run(args + ["--generations=1"], capture_output=True, text=True)
      assert first.returncode == 0, first.stderr[-2000:]
      state, arrays = checkpoint.load(logdir)
      fill(sys.argv[1], leave=300_000)
      full = subprocess.run(args + ["--generations=3", "--resume"], capture_output=True,
                            text=True)
      after, after_arrays = checkpoint.load(logdir)
      print(json.dumps({
          "code": full.returncode, "stderr": full.stderr.strip().splitlines(),
          "same_state": after == state,
          "same_arrays": all((after_arrays[k] == arrays[k]).all() for k in arrays),
          "leftovers": leftovers(logdir)}))
  """)
  assert result["code"] == 1, result["stderr"][-20:]
  last = result["stderr"][-1]
  assert last.startswith("tfrl.es: error: cannot write the checkpoint of generation 2 in "), last
  assert last.endswith(": No space left on device; the checkpoint there still holds "
                       "generation 1 (resume with --resume)"), last
  assert not any("Traceback" in line for line in result["stderr"])
  assert result["same_state"] and result["same_arrays"]
  assert result["leftovers"] == []


def test_tf_checkpoint_on_a_full_disk_keeps_the_previous_one(tmp_path):
  result = _in_tmpfs(tmp_path, """
      import json, sys, types
      import numpy as np
      import tensorflow as tf
      from tfrl import cli, tf_checkpoints
      directory = os.path.join(sys.argv[1], "checkpoints")
      weights = tf.Variable(tf.ones([512, 512]))  # 1 MB
      saved = types.SimpleNamespace(checkpoint=tf.train.Checkpoint(w=weights))
      saver = tf_checkpoints.RunCheckpoints(directory, 3)
      first = saver.save(saved, 1, {"algorithm": "t"})
      weights.assign(weights * 2)
      fill(sys.argv[1], leave=100_000)
      try:
        saver.save(saved, 2, {"algorithm": "t"})
        error = None
      except cli.RunFailed as e:
        error = str(e)
      os.remove(os.path.join(sys.argv[1], "filler"))
      weights.assign(tf.zeros_like(weights))
      store = tf_checkpoints.RunCheckpoints(directory, 3)
      store.check()
      restored = store.restore(saved)
      print(json.dumps({"error": error, "first": first, "restored": restored,
                        "value": float(weights.numpy().mean()),
                        "leftovers": leftovers(directory)}))
  """)
  assert result["error"].startswith("cannot write checkpoint 2 in "), result
  assert result["error"].endswith(f"; the latest complete one is {result['first']}"), result
  assert result["restored"] == result["first"]
  assert result["value"] == 1.0


def test_td3_on_a_full_disk_resumes_from_the_previous_checkpoint(tmp_path):
  result = _in_tmpfs(tmp_path, """
      import dataclasses, json, sys
      from tfrl import cli
      from tfrl.envs import EnvProtocol
      from tfrl import run_loop
      from tfrl.td3 import RunSettings, TD3Config, build
      logdir = os.path.join(sys.argv[1], "td3")

      def train(config, resume=False):
        settings = RunSettings(logdir=logdir, resume=resume, export=False)
        return run_loop.run(build(dataclasses.replace(config, run=settings)))

      # 256x256 networks: a checkpoint (6 networks, Adam moments) is ~3 MB.
      tiny = dict(protocol=EnvProtocol(env="Pendulum-v1"), start_steps=20, update_every=20,
                  checkpoint_every=60, hidden_sizes=(256, 256), batch_size=4, eval_every=0, eval_episodes=1,
                  log_every=60)
      train(TD3Config(total_steps=60, **tiny))
      fill(sys.argv[1], leave=1_000_000)
      try:
        train(TD3Config(total_steps=120, **tiny), resume=True)
        error = None
      except cli.RunFailed as e:
        error = str(e)
      os.remove(os.path.join(sys.argv[1], "filler"))
      summary = train(TD3Config(total_steps=120, **tiny), resume=True)
      print(json.dumps({"error": error, "steps": summary["env_steps"],
                        "files": sorted(os.listdir(os.path.join(logdir, "checkpoints")))}))
  """, size="16m")
  assert result["error"] is not None, result
  assert result["error"].startswith(("cannot write checkpoint 120 in ",
                                     "cannot write the replay buffer ")), result
  assert result["error"].endswith("checkpoints/ckpt-60"), result
  assert result["steps"] == 120
  assert "replay-120.npz" in result["files"] and "replay-60.npz" not in result["files"]
  assert not [f for f in result["files"] if f.endswith(".tmp")]


def test_export_on_a_full_disk_keeps_the_previous_policy(tmp_path):
  result = _in_tmpfs(tmp_path, """
      import json, sys
      import numpy as np
      import tensorflow as tf
      from tfrl import export

      class Policy(tf.Module):
        def __init__(self):
          super().__init__()
          self.w = tf.Variable(tf.ones([4, 65536]))  # 1 MB
        def __call__(self, obs):
          return {"action": tf.argmax(tf.matmul(obs, self.w)[:, :2], axis=1)}

      policy = Policy()
      spec = tf.TensorSpec([None, 4], tf.float32)
      target = os.path.join(sys.argv[1], "elite")
      export.export_policy(policy, spec, target)
      fill(sys.argv[1], leave=200_000)
      try:
        export.export_policy(policy, spec, target)
        error = None
      except (OSError, tf.errors.OpError) as e:
        error = type(e).__name__
      loaded = tf.saved_model.load(target)
      out = loaded.signatures["serving_default"](obs=tf.ones([1, 4]))
      print(json.dumps({"error": error, "action": out["action"].numpy().tolist(),
                        "entries": sorted(os.listdir(sys.argv[1]))}))
  """)
  assert result["error"] is not None, result
  assert result["action"] == [0]
  assert result["entries"] == ["elite", "filler"]


def test_read_only_logdir_is_one_line(tmp_path):
  result = _in_tmpfs(tmp_path, """
      import json, subprocess, sys
      out = subprocess.run([sys.executable, "-m", "tfrl.ga", "--env=CartPole-v1",
                            "--population=4", "--generations=1",
                            f"--logdir={sys.argv[1]}"], capture_output=True, text=True)
      print(json.dumps({"code": out.returncode, "stderr": out.stderr.strip().splitlines()}))
  """, size="64k", options="ro")
  assert result["code"] == 2
  assert not any("Traceback" in line for line in result["stderr"])
  mountpoint = tmp_path / "fs"
  assert result["stderr"][-1] == (f"tfrl.ga: error: --logdir={mountpoint} is not writable: "
                                  "Read-only file system.")
