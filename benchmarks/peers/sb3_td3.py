"""Stable-Baselines3's TD3 on a MuJoCo task, timed: run in the SB3 peer's venv.

    /work/peers/sb3/bin/python benchmarks/peers/sb3_td3.py --env=HalfCheetah-v5 \
        --hidden=256,256 --batch_size=256 --learning_starts=1000 --warmup=1000 \
        --steps=5000 --seed=0 --output=timing.json

SB3's own TD3 (`stable_baselines3.TD3("MlpPolicy", env)`) on CPU, one gradient
step per env step (`train_freq=1, gradient_steps=1`, SB3's defaults), policy
delay 2, Gaussian action noise 0.1 as rl-zoo3's TD3 settings use; `--hidden`
sizes for actor and critics, `--batch_size`. A callback notes the wall time
after `learning_starts + warmup` env steps and after `steps` more; the JSON
holds the steps/s between them, the settings and SB3's versions. Imports SB3,
gymnasium and numpy only (never tfrl).
"""

import argparse
import json
import platform
import sys
import time


def parse_args(argv):
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--env", default="HalfCheetah-v5")
  parser.add_argument("--hidden", default="256,256")
  parser.add_argument("--batch_size", type=int, default=256)
  parser.add_argument("--learning_starts", type=int, default=1000)
  parser.add_argument("--warmup", type=int, default=1000)
  parser.add_argument("--steps", type=int, default=5000)
  parser.add_argument("--seed", type=int, default=0)
  parser.add_argument("--output", required=True)
  return parser.parse_args(argv)


def versions():
  from importlib import metadata  # pylint: disable=import-outside-toplevel
  out = {"python": platform.python_version()}
  for name in ("stable-baselines3", "gymnasium", "mujoco", "torch", "numpy"):
    try:
      out[name] = metadata.version(name)
    except metadata.PackageNotFoundError:
      out[name] = None
  return out


def main(argv):
  args = parse_args(argv)
  # pylint: disable=import-outside-toplevel
  import numpy as np
  from stable_baselines3 import TD3
  from stable_baselines3.common.callbacks import BaseCallback
  from stable_baselines3.common.noise import NormalActionNoise
  # pylint: enable=import-outside-toplevel
  hidden = [int(h) for h in args.hidden.split(",")]
  start = args.learning_starts + args.warmup
  marks = {}

  class Clock(BaseCallback):
    """Wall time when the timed window opens and closes."""

    def _on_step(self) -> bool:
      if self.num_timesteps in (start, start + args.steps):
        marks[self.num_timesteps] = time.perf_counter()
      return self.num_timesteps < start + args.steps

  model = TD3("MlpPolicy", args.env, policy_kwargs={"net_arch": hidden},
              batch_size=args.batch_size, learning_starts=args.learning_starts,
              train_freq=1, gradient_steps=1, policy_delay=2, seed=args.seed,
              action_noise=None, device="cpu", verbose=0)
  n = model.action_space.shape[-1]
  model.action_noise = NormalActionNoise(np.zeros(n), 0.1 * np.ones(n))
  model.learn(total_timesteps=start + args.steps, callback=Clock())
  seconds = marks[start + args.steps] - marks[start]
  result = {"peer": "sb3_td3", "env": args.env, "hidden": hidden,
            "batch_size": args.batch_size, "learning_starts": args.learning_starts,
            "warmup": args.warmup, "steps": args.steps, "seconds": seconds,
            "steps_per_second": args.steps / seconds, "train_freq": 1, "gradient_steps": 1,
            "policy_delay": 2, "device": "cpu", "seed": args.seed, "versions": versions(),
            "command": " ".join([sys.executable] + sys.argv)}
  with open(args.output, "w") as f:
    json.dump(result, f, indent=1)
  print(f"sb3 td3: {result['steps_per_second']:.1f} steps/s over {args.steps} steps")


if __name__ == "__main__":
  main(sys.argv[1:])
