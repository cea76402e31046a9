"""Stable-Baselines3's TD3 with gradual magnitude pruning: run in the SB3 peer's venv.

    /work/peers/sb3/bin/python benchmarks/peers/sb3_td3_pruning.py --env=HalfCheetah-v5 \
        --seed=0 --steps=600000 --output=/work/runs/sb3_td3_pruning_s0.json

An independent check of tfrl's pruning baseline (`td3_halfcheetah_pruning`):
SB3's own TD3 (`stable_baselines3.TD3("MlpPolicy", env)`, torch, CPU) with
tfrl's TD3 settings (256x256, Adam 3e-4 for both, batch 256, 10,000 random
steps first, exploration noise 0.1, policy delay 2, target smoothing 0.2 /
0.5, tau 0.005, one gradient step per env step), and the pruning written here
from Zhu & Gupta's description, as tfrl's preset sets it: every Linear kernel
of the actor and both critics gets a mask; after every gradient step a
counter t advances and, when t is a multiple of `--pruning_frequency` in
[`--pruning_begin`, `--pruning_end`] (or t is the end), each kernel keeps its
round((1 - s_t) * n) largest magnitudes, s_t = s_f * (1 - (1 - progress)^3)
(the cubic schedule to `--target_sparsity`). Pruned weights get zero
gradients (a hook on each kernel) and are zeroed again after every optimizer
step (Adam's moments cannot revive them); the target networks' kernels are
zeroed where the online mask is zero (their forward pass uses the online
mask, as tfrl's targets do).

Every `--eval_every` env steps: the mean return of `--eval_episodes`
deterministic episodes, the sparsity of all kernels; the JSON holds the curve,
the settings, the versions and the command. Imports SB3, gymnasium, torch and
numpy only (never tfrl).

A run longer than a sitting: every `--checkpoint_every` env steps, and on
Ctrl-C or SIGTERM (then exit 130), `--workdir` gets SB3's model and replay buffer, the
masks and their counters, and the curve so far; the same command again goes on
from there (not bit for bit: the random streams restart), and the JSON lists
each sitting's steps, seconds and CPU.
"""

import argparse
import json
import os
import platform
import signal
import sys
import time

from sb3_td3 import versions  # the same venv's versions, as the TD3 race records them


def parse_args(argv):
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--env", default="HalfCheetah-v5")
  parser.add_argument("--seed", type=int, default=0)
  parser.add_argument("--steps", type=int, default=600_000)
  parser.add_argument("--hidden", default="256,256")
  parser.add_argument("--batch_size", type=int, default=256)
  parser.add_argument("--learning_rate", type=float, default=3e-4)
  parser.add_argument("--learning_starts", type=int, default=10_000)
  parser.add_argument("--target_sparsity", type=float, default=0.9)
  parser.add_argument("--pruning_begin", type=int, default=0)
  parser.add_argument("--pruning_end", type=int, default=790_000)
  parser.add_argument("--pruning_frequency", type=int, default=1000)
  parser.add_argument("--eval_every", type=int, default=10_000)
  parser.add_argument("--eval_episodes", type=int, default=10)
  parser.add_argument("--torch_threads", type=int, default=1)
  parser.add_argument("--checkpoint_every", type=int, default=50_000)
  parser.add_argument("--workdir", default="", help="checkpoints (default: --output + .d)")
  parser.add_argument("--output", required=True)
  args = parser.parse_args(argv)
  if not 0.0 <= args.target_sparsity < 1.0:
    parser.error(f"--target_sparsity must be in [0, 1), got {args.target_sparsity}")
  if args.pruning_frequency < 1 or args.pruning_end <= args.pruning_begin:
    parser.error("--pruning_frequency must be >= 1 and --pruning_end > --pruning_begin")
  return args


def cubic_sparsity(t, begin, end, final):
  progress = min(max((t - begin) / max(end - begin, 1), 0.0), 1.0)
  return final * (1.0 - (1.0 - progress) ** 3)


def is_pruning_step(t, begin, end, frequency):
  return begin <= t <= end and ((t - begin) % frequency == 0 or t == end)


def _interrupt(signum, frame):
  del signum, frame
  raise KeyboardInterrupt


def main(argv):
  args = parse_args(argv)
  # Ctrl-C and SIGTERM checkpoint and stop, also when started in the background
  # (which starts a process with SIGINT ignored).
  signal.signal(signal.SIGINT, _interrupt)
  signal.signal(signal.SIGTERM, _interrupt)
  # pylint: disable=import-outside-toplevel
  import gymnasium as gym
  import numpy as np
  import torch
  from stable_baselines3 import TD3
  from stable_baselines3.common.callbacks import BaseCallback
  from stable_baselines3.common.noise import NormalActionNoise
  # pylint: enable=import-outside-toplevel
  torch.set_num_threads(args.torch_threads)

  class Masks:
    """One mask per online kernel, with the target kernel it also zeroes."""

    def __init__(self, pairs):
      self.pairs = pairs  # [(name, online Linear, target Linear)]
      self.masks = [torch.ones_like(online.weight) for _, online, _ in pairs]
      for (_, online, _), mask in zip(pairs, self.masks):
        online.weight.register_hook(lambda grad, mask=mask: grad * mask)
      self.updates = 0
      self.prunings = 0

    def after_update(self):
      self.updates += 1
      t = self.updates
      if is_pruning_step(t, args.pruning_begin, args.pruning_end, args.pruning_frequency):
        s = cubic_sparsity(t, args.pruning_begin, args.pruning_end, args.target_sparsity)
        for (_, online, _), mask in zip(self.pairs, self.masks):
          magnitudes = online.weight.detach().abs().flatten()
          keep = int(round((1.0 - s) * magnitudes.numel()))
          new = torch.zeros_like(magnitudes)
          new[torch.topk(magnitudes, keep, sorted=False).indices] = 1.0
          mask.copy_(new.view_as(mask))
        self.prunings += 1
      with torch.no_grad():
        for (_, online, target), mask in zip(self.pairs, self.masks):
          online.weight.mul_(mask)
          target.weight.mul_(mask)

    def sparsity(self):
      total = sum(m.numel() for m in self.masks)
      return 1.0 - float(sum(m.sum() for m in self.masks)) / total

    def layer_sparsity(self):
      return {name: 1.0 - float(m.mean()) for (name, _, _), m in zip(self.pairs, self.masks)}

    def state(self):
      return {"masks": [m.clone() for m in self.masks], "updates": self.updates,
              "prunings": self.prunings}

    def load(self, state):
      for mask, saved in zip(self.masks, state["masks"]):
        mask.copy_(saved)
      self.updates, self.prunings = state["updates"], state["prunings"]

  class PrunedTD3(TD3):
    """SB3's TD3; after each of its gradient steps the masks' `after_update`."""

    masks = None

    def train(self, gradient_steps, batch_size=100):
      for _ in range(gradient_steps):
        super().train(1, batch_size)
        self.masks.after_update()

  def linears(module):
    return [m for m in module.modules() if isinstance(m, torch.nn.Linear)]

  hidden = [int(h) for h in args.hidden.split(",")]
  env = gym.make(args.env)
  n = env.action_space.shape[-1]
  workdir = args.workdir or args.output + ".d"
  os.makedirs(workdir, exist_ok=True)
  saved = {name: os.path.join(workdir, name)
           for name in ("model.zip", "replay.pkl", "masks.pt", "progress.json")}
  resuming = all(os.path.exists(path) for path in saved.values())
  if resuming:
    model = PrunedTD3.load(saved["model.zip"], env=env, device="cpu")
    model.load_replay_buffer(saved["replay.pkl"])
  else:
    model = PrunedTD3("MlpPolicy", env, policy_kwargs={"net_arch": hidden},
                      learning_rate=args.learning_rate, buffer_size=1_000_000,
                      learning_starts=args.learning_starts, batch_size=args.batch_size,
                      tau=0.005, gamma=0.99, train_freq=1, gradient_steps=1,
                      action_noise=NormalActionNoise(np.zeros(n), 0.1 * np.ones(n)),
                      policy_delay=2, target_policy_noise=0.2, target_noise_clip=0.5,
                      seed=args.seed, device="cpu", verbose=0)
  policy = model.policy
  pairs = []
  for name, online, target in (("actor", policy.actor, policy.actor_target),
                               ("critic", policy.critic, policy.critic_target)):
    for i, (a, b) in enumerate(zip(linears(online), linears(target))):
      pairs.append((f"{name}/{i}", a, b))
  model.masks = Masks(pairs)
  kernel_params = sum(m.numel() for m in model.masks.masks)
  progress = {"curve": [], "train_returns": [], "sittings": []}
  if resuming:
    model.masks.load(torch.load(saved["masks.pt"]))
    with open(saved["progress.json"]) as f:
      progress = json.load(f)
  curve, train_returns = progress["curve"], progress["train_returns"]
  sitting = {"from_step": int(model.num_timesteps), "cpu": platform.processor() or
             platform.machine(), "command": " ".join([sys.executable] + sys.argv)}
  try:
    with open("/proc/cpuinfo") as f:
      sitting["cpu"] = next(l.split(":", 1)[1].strip() for l in f if l.startswith("model name"))
  except (OSError, StopIteration):
    pass
  progress["sittings"].append(sitting)

  eval_env = gym.make(args.env)
  eval_env.reset(seed=args.seed + 10_000 + int(model.num_timesteps))
  started = time.time()
  seconds_before = curve[-1]["seconds"] if curve else 0.0

  def save():
    model.save(saved["model.zip"])
    model.save_replay_buffer(saved["replay.pkl"])
    torch.save(model.masks.state(), saved["masks.pt"])
    sitting.update(to_step=int(model.num_timesteps), seconds=time.time() - started)
    with open(saved["progress.json"], "w") as f:
      json.dump(progress, f)

  def evaluate():
    returns = []
    for _ in range(args.eval_episodes):
      obs, _ = eval_env.reset()
      done, total = False, 0.0
      while not done:
        action, _ = model.predict(obs, deterministic=True)
        obs, reward, terminated, truncated, _ = eval_env.step(action)
        total += float(reward)
        done = terminated or truncated
      returns.append(total)
    return float(np.mean(returns))

  class Evaluate(BaseCallback):
    """The eval curve every --eval_every env steps; training episodes' returns."""

    def _on_step(self) -> bool:
      for info in self.locals.get("infos", []):
        if "episode" in info:
          train_returns.append(float(info["episode"]["r"]))
      if self.num_timesteps % args.eval_every == 0:
        curve.append({"step": self.num_timesteps, "eval_return": evaluate(),
                      "sparsity": model.masks.sparsity(), "updates": model.masks.updates,
                      "seconds": seconds_before + time.time() - started})
        print(json.dumps(curve[-1]), flush=True)
      if self.num_timesteps % args.checkpoint_every == 0:
        save()
      return True

  try:
    model.learn(total_timesteps=args.steps - int(model.num_timesteps), callback=Evaluate(),
                reset_num_timesteps=not resuming)
  except KeyboardInterrupt:
    save()
    print(f"stopped at step {model.num_timesteps}; the same command goes on from {workdir}",
          file=sys.stderr)
    sys.exit(130)
  save()
  sparsities = [point["sparsity"] for point in curve]
  result = {
      "peer": "sb3_td3_pruning", "env": args.env, "seed": args.seed, "steps": args.steps,
      "settings": {k: v for k, v in vars(args).items() if k != "output"},
      "kernel_params": kernel_params, "curve": curve,
      "eval_return": curve[-1]["eval_return"] if curve else None,
      "train_return_last10": float(np.mean(train_returns[-10:])) if train_returns else None,
      "average_sparsity": float(np.mean(sparsities)) if sparsities else None,
      "final_layer_sparsity": model.masks.layer_sparsity(), "prunings": model.masks.prunings,
      "minutes": (curve[-1]["seconds"] if curve else 0.0) / 60, "versions": versions(),
      "sittings": progress["sittings"], "command": " ".join([sys.executable] + sys.argv)}
  with open(args.output, "w") as f:
    json.dump(result, f, indent=1)


if __name__ == "__main__":
  main(sys.argv[1:])
