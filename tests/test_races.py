"""The races against peer libraries (Pong, HalfCheetah ES, TD3): a busy machine is
refused, and the record names each side's command, versions, network and settings.

Nothing here installs or runs a peer, and nothing is timed: the load average is
read from a file the test writes (--load_file), and --dry_run writes the record
of what a race would run without running it.
"""

import ast
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile

from absl.testing import absltest

_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, _ROOT)

from benchmarks.peers import evotorch_pgpe  # pylint: disable=g-import-not-at-top
from benchmarks.peers import pong_rows  # pylint: disable=g-import-not-at-top
from benchmarks.peers import quiet  # pylint: disable=g-import-not-at-top
from tests import load_average  # pylint: disable=g-import-not-at-top
from tfrl import networks  # pylint: disable=g-import-not-at-top

_CORES = os.cpu_count() or 1
_PONG = os.path.join(_ROOT, "benchmarks", "race_pong.py")
_MUJOCO = os.path.join(_ROOT, "benchmarks", "race_mujoco.py")
_TD3 = os.path.join(_ROOT, "benchmarks", "race_td3.py")
_GA3C_REMOTE = os.path.join(_ROOT, "benchmarks", "ga3c_remote_throughput.py")
_NO_PEERS = ("--sb3_venv=/nonexistent/sb3", "--sf_venv=/nonexistent/sf")


def _tmp(test):
  """A fresh directory removed after `test` (absltest's create_tempdir needs its
  flags parsed, which pytest does not do)."""
  path = tempfile.mkdtemp(prefix="tfrl_test_races_")
  test.addCleanup(shutil.rmtree, path, ignore_errors=True)
  return path


def _race(script, *args):
  return subprocess.run([sys.executable, script, *args], capture_output=True, text=True,
                        cwd=_ROOT, timeout=600)


class QuietGateTest(absltest.TestCase):

  def test_waits_for_the_load_to_fall_then_records_it(self):
    directory = _tmp(self)
    path = load_average.write(directory, 3.0 * _CORES)
    gate = quiet.Gate(path, 0.5, settle_seconds=60)
    now = [0.0]

    def sleep(seconds):  # the load falls while the gate waits
      now[0] += seconds
      load_average.write(directory, 0.1 * _CORES)

    record = quiet.before_run("a run", gate, sleep=sleep, clock=lambda: now[0])
    self.assertAlmostEqual(record["load_average_start"][0], 0.1 * _CORES, places=2)
    self.assertEqual(record["waited_for_quiet_seconds"], 5.0)

  def test_refuses_when_the_load_stays_high(self):
    path = load_average.write(_tmp(self), 0.6 * _CORES)
    now = [0.0]

    def sleep(seconds):
      now[0] += seconds

    with self.assertRaisesRegex(quiet.TooBusy, r"^refused: a run not run: load average"):
      quiet.before_run("a run", quiet.Gate(path, 0.5, settle_seconds=20), sleep=sleep,
                       clock=lambda: now[0])
    self.assertGreaterEqual(now[0], 20.0)

  def test_bad_settings_are_named(self):
    with self.assertRaisesRegex(ValueError, "max_per_core must be > 0"):
      quiet.Gate("/proc/loadavg", 0.0)


class PongRowsTest(absltest.TestCase):

  def test_multiply_adds_per_forward_pass(self):
    # The README's figures: GA3C's SAME-padded CNN 3.79M, NatureCNN 9.35M.
    self.assertEqual(pong_rows.GA3C_CNN.multiply_adds(), 3_790_592)
    self.assertEqual(pong_rows.NATURE_CNN.multiply_adds(), 9_346_560)

  def test_sb3_extractor_is_tfrls_ga3c_cnn(self):
    with open(os.path.join(_ROOT, "benchmarks", "peers", "sb3_ga3c_cnn.py")) as f:
      tree = ast.parse(f.read())
    values = {node.targets[0].id: ast.literal_eval(node.value) for node in tree.body
              if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name)
              and node.targets[0].id in ("CONVS", "DENSE")}
    self.assertEqual(values, {"CONVS": networks.CONV_NETS["atari"].convs,
                              "DENSE": networks.CONV_NETS["atari"].dense})

  def test_sf_launcher_needs_its_budget(self):
    spec = importlib.util.spec_from_file_location(
        "sf_atari", os.path.join(_ROOT, "benchmarks", "peers", "sf_atari.py"))
    sf_atari = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(sf_atari)
    self.assertEqual(sf_atari._budget(["--algo=APPO", "--train_for_seconds=240"]),
                     (240.0, ["--algo=APPO"]))
    with self.assertRaisesRegex(SystemExit, "--train_for_seconds"):
      sf_atari._budget(["--algo=APPO"])


class EvoTorchConfigTest(absltest.TestCase):

  def test_mlp_config_is_tfrls_network_and_population(self):
    args = evotorch_pgpe.parse_args(["--log=x", "--result=y"])
    self.assertEqual(args.config, "mlp")
    self.assertEqual(args.policy.count("Linear("), 3)
    self.assertIn("Linear(obs_length, 64) >> Tanh() >> Linear(64, 64) >> Tanh()", args.policy)
    self.assertTrue(args.policy.endswith(">> Tanh()"))  # the preset's tanh action head
    self.assertEqual((args.popsize, args.popsize_max, args.num_interactions,
                      args.center_episodes), (48, 0, 0, 2))
    self.assertEqual(args.center_init, "lecun")  # tfrl's start, not GymNE's zeros

  def test_linear_config_and_overrides(self):
    args = evotorch_pgpe.parse_args(["--config=linear", "--popsize=200", "--log=x",
                                     "--result=y"])
    self.assertEqual((args.policy, args.popsize, args.popsize_max),
                     ("Linear(obs_length, act_length)", 200, 800))
    self.assertEqual(args.center_init, "evotorch")
    with self.assertRaises(SystemExit):
      evotorch_pgpe.parse_args(["--popsize=47", "--log=x", "--result=y"])


class RaceRefusalTest(absltest.TestCase):

  def _assert_refused(self, script, *args):
    """`script` with `args`, given a load of 2 per core: refused before anything ran."""
    tmp = _tmp(self)
    workdir, output = os.path.join(tmp, "runs"), os.path.join(tmp, "race.json")
    os.makedirs(workdir)
    done = _race(script, *args, "--settle_seconds=0",
                 f"--load_file={load_average.write(tmp, 2.0 * _CORES)}", f"--workdir={workdir}",
                 f"--output={output}")
    self.assertEqual(done.returncode, 3, done.stderr[-2000:])
    last = done.stderr.strip().splitlines()[-1]
    self.assertRegex(last, r"^refused: .* load average [0-9.]+ \(1 min\) is over 0\.5 per core")
    self.assertFalse(os.path.exists(output))  # nothing reported
    self.assertEqual(sorted(os.listdir(workdir)), ["partial.json"])  # nothing ran
    return workdir

  def test_pong_refuses_a_busy_machine(self):
    self._assert_refused(_PONG, "--rows=tfrl", "--rounds=1", *_NO_PEERS)

  def test_mujoco_refuses_a_busy_machine(self):
    self._assert_refused(_MUJOCO, "--libraries=tfrl", "--seeds=0")

  def test_td3_refuses_a_busy_machine(self):
    self._assert_refused(_TD3, "--rows=tfrl", "--rounds=1")

  def test_ga3c_remote_refuses_a_busy_machine_and_records_its_modes(self):
    workdir = self._assert_refused(_GA3C_REMOTE, "--rounds=1", "--ray_runners=2",
                                   "--runner_agents=8")
    with open(os.path.join(workdir, "partial.json")) as f:
      modes = json.load(f)["modes"]
    self.assertEqual(modes["local"], "")
    self.assertIn("--agents=0 --max_agents=8 --ray_address=local --ray_runners=2",
                  modes["remote"])
    # As many env slots as the 2 runners' 8 agents each.
    self.assertEqual(modes["local_matched"], "--agents=16 --max_agents=16")

  def test_ga3c_remote_rejects_unknown_modes(self):
    done = _race(_GA3C_REMOTE, "--modes=local,elsewhere", "--rounds=1")
    self.assertNotEqual(done.returncode, 0)
    self.assertIn("--modes must name some of local, remote, local_matched",
                  done.stderr.strip().splitlines()[-1])


class RaceRecordTest(absltest.TestCase):

  def test_pong_record_has_each_sides_command_versions_network_and_settings(self):
    tmp = _tmp(self)
    output = os.path.join(tmp, "plan.json")
    done = _race(_PONG, "--dry_run", "--modes=throughput,score", f"--output={output}",
                 f"--load_file={load_average.write(tmp, 0.25)}", *_NO_PEERS)
    self.assertEqual(done.returncode, 0, done.stderr[-2000:])
    with open(output) as f:
      record = json.load(f)
    sides = record["sides"]
    self.assertEqual(sorted(sides), sorted(pong_rows.ROWS))
    for row, side in sides.items():
      self.assertTrue({"command", "network", "settings", "training_epochs",
                       "multiply_adds_per_sample_estimate"} <= set(side), row)
      self.assertTrue("versions" in side or "missing" in side, row)
      self.assertIn(side["repeat_action_probability"],
                    (0.0 if row == "sf_appo" else 0.25,), row)
    self.assertIn("-m tfrl.ga3c --preset=ga3c_pong_v5", sides["tfrl"]["command"])
    self.assertIn("repeat_action_probability:0.25", sides["sb3_ppo"]["command"])
    self.assertIn("features_extractor_class", sides["sb3_a2c_ga3c_cnn"]["command"])
    self.assertIn("RMSpropTFLike", sides["sb3_a2c_ga3c_cnn"]["command"])
    for arg in ("--async_rl=True", "--num_workers=2", "--worker_num_splits=2",
                "--rollout=32", "--train_for_seconds="):
      self.assertIn(arg, sides["sf_appo"]["command"])
    self.assertEqual(sides["sb3_ppo_ga3c_cnn"]["network"]["multiply_adds_per_forward"],
                     sides["tfrl"]["network"]["multiply_adds_per_forward"])
    self.assertEqual(record["load_average_start"], [0.25, 0.25, 0.25])
    self.assertEqual(record["quiet_gate"]["max_load_per_core"], 0.5)

  def test_mujoco_record_has_each_sides_command_versions_and_settings(self):
    tmp = _tmp(self)
    output = os.path.join(tmp, "plan.json")
    done = _race(_MUJOCO, "--dry_run", "--evotorch_configs=mlp,linear",
                 "--evotorch_venv=/nonexistent/evotorch", f"--output={output}",
                 f"--load_file={load_average.write(tmp, 0.25)}")
    self.assertEqual(done.returncode, 0, done.stderr[-2000:])
    with open(output) as f:
      record = json.load(f)
    self.assertEqual(sorted(record["commands"]), ["evotorch_linear", "evotorch_mlp", "tfrl"])
    self.assertIn("--config=mlp", record["commands"]["evotorch_mlp"])
    self.assertIn("-m tfrl.es --preset=es_halfcheetah", record["commands"]["tfrl"])
    configs = record["evotorch"]["configs"]
    self.assertEqual(configs["mlp"]["popsize"], 48)
    self.assertEqual(configs["linear"]["popsize_max"], 800)
    self.assertIn("versions", record["evotorch"])
    self.assertIn("centre", record["env_steps_counted"])
    self.assertIn("64x64", record["tfrl_network"])
    self.assertEqual(record["load_average_start"], [0.25, 0.25, 0.25])

  def test_td3_record_has_each_sides_command_versions_and_matched_settings(self):
    tmp = _tmp(self)
    output = os.path.join(tmp, "plan.json")
    peers = ("--sb3_venv=/nonexistent/sb3", "--cleanrl_venv=/nonexistent/cleanrl")
    done = _race(_TD3, "--dry_run", f"--output={output}",
                 f"--load_file={load_average.write(tmp, 0.25)}", *peers)
    self.assertEqual(done.returncode, 0, done.stderr[-2000:])
    with open(output) as f:
      record = json.load(f)
    sides = record["sides"]
    self.assertEqual(sorted(sides), ["cleanrl", "sb3", "tfrl", "tfrl_gymnasium", "tfrl_xla"])
    for row, side in sides.items():
      self.assertEqual((side["hidden"], side["batch_size"], side["updates_per_env_step"],
                        side["device"]), ([256, 256], 256, 1, "cpu"), row)
    self.assertEqual((record["tfrl_settings"]["hidden_sizes"],
                      record["tfrl_settings"]["batch_size"]), ([256, 256], 256))
    self.assertIn("td3_throughput.py --preset=td3_halfcheetah", sides["tfrl"]["command"])
    self.assertIn("--set=jit_compile=true", sides["tfrl_xla"]["command"])
    self.assertIn("--set=env_implementation=gymnasium", sides["tfrl_gymnasium"]["command"])
    self.assertIn("sb3_td3.py --env=HalfCheetah-v5 --hidden=256,256", sides["sb3"]["command"])
    self.assertIn("cleanrl/td3_continuous_action.py --env-id HalfCheetah-v4",
                  sides["cleanrl"]["command"])
    self.assertTrue(sides["sb3"]["missing"] and sides["cleanrl"]["missing"])
    self.assertIn("stable-baselines3", sides["sb3"]["versions"])
    # Peers given another network than the preset trains: refused in one line.
    done = _race(_TD3, "--dry_run", "--hidden=64,64", f"--output={output}", *peers)
    self.assertEqual(done.returncode, 1)
    self.assertIn("trains hidden [256, 256], batch 256; the peers would get --hidden=64,64",
                  done.stderr.strip().splitlines()[-1])


if __name__ == "__main__":
  absltest.main()
