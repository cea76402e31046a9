"""The rows of the Pong race (race_pong.py): each side's command, network, protocol and settings.

Runs in tfrl's venv and imports no peer. A row is one way to train Pong:

- tfrl: tfrl's main command (README), GA3C's CNN, sticky actions from its preset;
- sb3_ppo, sb3_a2c: `python -m rl_zoo3.train` with rl-zoo3's Atari
  hyperparameters (its hyperparams/ppo.yml, a2c.yml), NatureCNN, the preset's
  sticky actions through `--env-kwargs repeat_action_probability:<p>`;
- sb3_ppo_ga3c_cnn, sb3_a2c_ga3c_cnn: the same with GA3C's CNN as SB3's features
  extractor (benchmarks/peers/sb3_ga3c_cnn.py, through rl-zoo3's
  `--hyperparams policy_kwargs:...`): the networks match tfrl's;
- sf_appo: Sample Factory's APPO through its Atari example, sized for 2 cores
  from its docs' "better parameters" (docs/09-environment-integrations/atari.md:
  async, more envs per worker, double buffering, rollout 32), through
  benchmarks/peers/sf_atari.py so that its --train_for_seconds ends the run
  (exit 0) instead of a Ctrl-C (exit 2, its "interrupted" status).
"""

import dataclasses
import os
import sys
from typing import Dict, List, Optional, Sequence, Tuple

from tfrl import networks
from tfrl import presets
from tfrl.envs import game_ids

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PEERS_DIR = os.path.join(ROOT, "benchmarks", "peers")
GYM_ID = "PongNoFrameskip-v4"
FRAME_SKIP = 4
PONG_ACTIONS = 6  # the minimal action set, on both sides
PRESET = "ga3c_pong_v5"  # both sides under sticky actions: ALE/Pong-v5
TFRL_COMMAND = ("-m", "tfrl.ga3c", f"--preset={PRESET}")
SB3_PACKAGES = ("stable_baselines3", "rl_zoo3", "sb3_contrib", "torch", "gymnasium",
                "ale-py", "numpy", "opencv-python")
SF_PACKAGES = ("sample-factory", "torch", "gymnasium", "ale-py", "shimmy", "numpy",
               "opencv-python")

# Sample Factory's Atari docs' better parameters (16 workers x 8 envs, rollout 32,
# batch 1024 x its 4 minibatches = one round of all envs' rollouts per training
# iteration), scaled to 2 workers: 2 x 8 envs x 32 = 512 = 4 x batch 128.
SF_2CORE_ARGS = ("--num_workers=2", "--num_envs_per_worker=8", "--worker_num_splits=2",
                 "--rollout=32", "--batch_size=128", "--async_rl=True", "--serial_mode=False",
                 "--normalize_input=True", "--normalize_returns=True",
                 "--summaries_use_frameskip=False", "--device=cpu")
# rl-zoo3's Atari policy_kwargs of A2C (RMSpropTFLike), which a --hyperparams
# policy_kwargs replaces whole, so the GA3C-CNN rows repeat them.
_A2C_ZOO_POLICY_KWARGS = "optimizer_class=RMSpropTFLike, optimizer_kwargs=dict(eps=1e-5), "
# net_arch=[]: the policy and value heads straight on the 256 features, as in
# tfrl and as SB3 builds NatureCNN's policy (any other extractor gets 64x64 MLPs).
_GA3C_EXTRACTOR = "features_extractor_class=__import__('sb3_ga3c_cnn').GA3CCnn, net_arch=[]"


@dataclasses.dataclass(frozen=True)
class Network:
  """A conv net as both sides build it, and its multiply-adds per forward pass."""
  name: str
  shape: networks.ConvNetShape
  padding: str

  def multiply_adds(self, size: int = 84, channels: int = 4,
                    actions: int = PONG_ACTIONS) -> int:
    """Of one 84x84x4 frame stack: convs, dense, policy and value heads."""
    side, total = size, 0
    for filters, kernel, stride in self.shape.convs:
      side = -(-side // stride) if self.padding == "SAME" else (side - kernel) // stride + 1
      total += side * side * filters * kernel * kernel * channels
      channels = filters
    total += side * side * channels * self.shape.dense
    return total + self.shape.dense * (actions + 1)

  def record(self) -> dict:
    return {"name": self.name, "convs_filters_kernel_stride": self.shape.convs,
            "dense": self.shape.dense, "padding": self.padding,
            "multiply_adds_per_forward": self.multiply_adds()}


GA3C_CNN = Network("GA3C's CNN (conv 8x8x16 /4, 4x4x32 /2, SAME; dense 256)",
                   networks.CONV_NETS["atari"], "SAME")
NATURE_CNN = Network("NatureCNN (conv 8x8x32 /4, 4x4x64 /2, 3x3x64 /1, VALID; dense 512)",
                     networks.CONV_NETS["nature"], "VALID")


@dataclasses.dataclass(frozen=True)
class Row:
  """One side of the race: which venv, which network, how many passes per sample."""
  name: str
  venv: Optional[str]           # None: tfrl's own python
  network: Network
  training_epochs: int          # passes over each sample in training
  settings: Dict[str, object]   # what it runs with, as the race sets it or its docs give
  sticky: bool = True           # plays the preset's repeat_action_probability

  def record(self, repeat_action_probability: float) -> dict:
    forward = self.network.multiply_adds()
    return {"network": self.network.record(), "training_epochs": self.training_epochs,
            # one forward pass to act, then forward + backward (~2 forwards) per epoch
            "multiply_adds_per_sample_estimate": forward * (1 + 3 * self.training_epochs),
            "repeat_action_probability": repeat_action_probability if self.sticky else 0.0,
            "settings": self.settings}


def preset_repeat_action_probability() -> float:
  """The sticky-action probability tfrl's preset trains with: its
  --repeat_action_probability, else its game id's (ALE/Pong-v5: 0.25)."""
  lines = presets.flag_lines(PRESET)
  values = dict(line.lstrip("-").split("=", 1) for line in lines if "=" in line)
  if "repeat_action_probability" in values:
    return float(values["repeat_action_probability"])
  return game_ids.parse_game(values["game"]).repeat_action_probability


def _sb3_settings(algo: str, extractor: bool) -> dict:
  zoo = ({"n_envs": 8, "n_steps": 128, "n_epochs": 4, "batch_size": 256,
          "learning_rate": "lin_2.5e-4", "clip_range": "lin_0.1", "ent_coef": 0.01,
          "vf_coef": 0.5} if algo == "ppo" else
         {"n_envs": 16, "n_steps": 5, "ent_coef": 0.01, "vf_coef": 0.25,
          "optimizer": "RMSpropTFLike eps 1e-5"})
  return {"hyperparameters": f"rl-zoo3's hyperparams/{algo}.yml, atari (AtariWrapper, "
                             "frame stack 4); the run's own config.yml is in its record",
          **zoo, "features_extractor": ("benchmarks/peers/sb3_ga3c_cnn.py GA3CCnn"
                                        if extractor else "NatureCNN (CnnPolicy's)"),
          "eval_freq": -1}


ROWS: Dict[str, Row] = {
    "tfrl": Row("tfrl", None, GA3C_CNN, 4, {
        "preset": "flags/ga3c_pong_v5.flags (the appo learner: 8 agents x 4 envs, segments "
                  "of 32 steps, batches of 1,024 samples, 4 epochs x 4 minibatches, "
                  "Adam 5e-4)"}),
    "sb3_ppo": Row("sb3_ppo", "sb3", NATURE_CNN, 4, _sb3_settings("ppo", False)),
    "sb3_a2c": Row("sb3_a2c", "sb3", NATURE_CNN, 1, _sb3_settings("a2c", False)),
    "sb3_ppo_ga3c_cnn": Row("sb3_ppo_ga3c_cnn", "sb3", GA3C_CNN, 4, _sb3_settings("ppo", True)),
    "sb3_a2c_ga3c_cnn": Row("sb3_a2c_ga3c_cnn", "sb3", GA3C_CNN, 1, _sb3_settings("a2c", True)),
    "sf_appo": Row("sf_appo", "sf", NATURE_CNN, 4, {
        "arguments": " ".join(SF_2CORE_ARGS),
        "defaults": "sf_examples/atari/atari_params.py for the rest (num_epochs 4, "
                    "num_batches_per_epoch 4, lr 2.5e-4 linear decay, clip 0.1, "
                    "encoder convnet_atari + 512); the run's config.json is in its record",
        "env": f"{GYM_ID} as its Atari example makes it (no sticky actions: it has no "
               "setting for them)"}, sticky=False),
}
SCORE_ROWS = ("tfrl", "sb3_ppo", "sb3_a2c", "sb3_ppo_ga3c_cnn", "sb3_a2c_ga3c_cnn")


def sb3_command(row: str, python: str, rundir: str, seed: int, sticky: float,
                extra: Sequence[str]) -> List[str]:
  algo = row.split("_")[1]
  cmd = [python, "-m", "rl_zoo3.train", "--algo", algo, "--env", GYM_ID,
         "-f", os.path.join(rundir, "logs"), "-tb", os.path.join(rundir, "tb"),
         "--seed", str(seed), "--env-kwargs", f"repeat_action_probability:{sticky:g}"]
  if row.endswith("_ga3c_cnn"):
    kwargs = (_A2C_ZOO_POLICY_KWARGS if algo == "a2c" else "") + _GA3C_EXTRACTOR
    # Quoted: rl-zoo3 evaluates the string in its exp_manager, where RMSpropTFLike is.
    cmd += ["--hyperparams", f'policy_kwargs:"dict({kwargs})"']
  return cmd + list(extra)


def command(row: str, venvs: Dict[str, str], rundir: str, seed: int, seconds: float,
            extra: Dict[str, Sequence[str]], tfrl_extra: Sequence[str] = ()
            ) -> Tuple[List[str], str, Dict[str, str]]:
  """The row's command line, working directory and extra environment variables.

  `seconds`: Sample Factory's own wall-clock budget (from its process start)."""
  if row not in ROWS:
    raise ValueError(f"unknown row {row!r}; rows are {', '.join(ROWS)}")
  if row == "tfrl":
    return [sys.executable, *TFRL_COMMAND, f"--logdir={rundir}", f"--seed={seed}",
            *tfrl_extra], ROOT, {}
  python = os.path.join(venvs[ROWS[row].venv], "bin", "python")
  if row.startswith("sb3_"):
    return (sb3_command(row, python, rundir, seed, preset_repeat_action_probability(),
                        extra.get("sb3", ())), rundir, {"PYTHONPATH": PEERS_DIR})
  return ([python, os.path.join(PEERS_DIR, "sf_atari.py"), f"--train_for_seconds={seconds:g}",
           "--algo=APPO", "--env=atari_pong", "--experiment=race", f"--train_dir={rundir}",
           f"--seed={seed}", *SF_2CORE_ARGS, *extra.get("sf", ())], rundir, {})
