"""envpool's Atari emulator frames per second: run in envpool's own venv.

    /work/peers/envpool/bin/python benchmarks/peers/envpool_atari.py --game=Pong \\
        --num_envs=8 --seconds=8 --mode=async --output=envpool.json

Called by benchmarks/env_throughput.py for its envpool rows, with its game,
emulators and seconds: the same preprocessing as the other rows (84x84 gray,
frame skip 4 with max-pool, stack 4, up to 30 no-ops at reset, no sticky
actions, no episodic life, no reward clipping), random actions, one thread per
core. `sync` steps all --num_envs each call; `async` uses envpool's
send / recv with a batch of half the envs. Frames are emulator frames (agent
steps x frame skip), timed by frame_rate.timed as env_throughput.py times its
own rows. Writes the rate and the settings as JSON (env_throughput.py records
the venv's versions). Imports envpool and numpy only (never tfrl).
"""

import argparse
import json
import os
import sys

import frame_rate  # beside this script: sys.path[0] when it runs


def parse_args(argv):
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--game", default="Pong", help="ALE name; envpool's id is <game>-v5")
  parser.add_argument("--num_envs", type=int, default=8)
  parser.add_argument("--seconds", type=float, default=8.0)
  parser.add_argument("--mode", choices=("sync", "async"), default="async")
  parser.add_argument("--frame_skip", type=int, default=4)
  parser.add_argument("--output", required=True)
  args = parser.parse_args(argv)
  if args.num_envs < 1 or args.seconds <= 0 or args.frame_skip < 1:
    parser.error("--num_envs and --frame_skip must be >= 1 and --seconds > 0")
  return args


def rate(args, batch_size):
  """Frames/s of one env made for this measurement."""
  # pylint: disable=import-outside-toplevel
  import envpool
  import numpy as np
  # pylint: enable=import-outside-toplevel
  n, skip = args.num_envs, args.frame_skip
  env = envpool.make(f"{args.game}-v5", env_type="gymnasium", num_envs=n,
                     batch_size=batch_size, num_threads=os.cpu_count(),
                     repeat_action_probability=0.0, noop_max=30, episodic_life=False,
                     reward_clip=False, img_height=84, img_width=84, stack_num=4,
                     frame_skip=skip)
  num_actions = env.action_space.n
  rng = np.random.default_rng(0)
  if args.mode == "async":
    env.async_reset()

    def step():
      *_, info = env.recv()
      ids = info["env_id"]
      env.send(rng.integers(num_actions, size=len(ids)), ids)
      return len(ids) * skip
  else:
    env.reset()

    def step():
      env.step(rng.integers(num_actions, size=n))
      return n * skip
  frames_per_second = frame_rate.timed(step, args.seconds)
  env.close()
  return frames_per_second


def main(argv):
  args = parse_args(argv)
  batch_size = max(1, args.num_envs // 2) if args.mode == "async" else args.num_envs
  result = {"peer": "envpool", "game": args.game, "mode": args.mode,
            "num_envs": args.num_envs, "batch_size": batch_size,
            "num_threads": os.cpu_count(), "frame_skip": args.frame_skip,
            "seconds": args.seconds, "frames_per_second": rate(args, batch_size),
            "command": " ".join([sys.executable] + sys.argv)}
  with open(args.output, "w") as f:
    json.dump(result, f, indent=1)
  print(f"envpool {args.mode}: {result['frames_per_second']:.0f} frames/s")


if __name__ == "__main__":
  main(sys.argv[1:])
