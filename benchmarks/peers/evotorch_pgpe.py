"""EvoTorch's PGPE on a gymnasium env through its `GymNE` problem, for a time budget.

Runs in EvoTorch's own virtualenv (never tfrl's), called by
benchmarks/race_mujoco.py; it only uses EvoTorch's public API, as its users do
(its examples/scripts/rl_gym.py and rl_clipup.py: a linear policy, PGPE with
the ClipUp optimizer, GymNE's observation normalization, Ray actors):

    /work/peers/evotorch/bin/python benchmarks/peers/evotorch_pgpe.py \\
        --env=HalfCheetah-v5 --seconds=1800 --seed=0 --num_actors=2 \\
        --log=run.jsonl --result=run.json

The defaults are rl_clipup.py's `walker` configuration (its nearest MuJoCo
locomotion preset; EvoTorch ships none for HalfCheetah) without the reward
offset, since HalfCheetah has no alive bonus. Ray runs on this host only: the
driver starts its own node on 127.0.0.1 (all of Ray's listeners on loopback)
and shuts it down at the end.

Writes one JSON line per generation completed within the budget (seconds since
this script started, env steps so far, the population's mean / median / best
return as PGPE's status reports them) and, at the end, a result JSON with the
final centre's return over --final_episodes fresh episodes (observation
statistics frozen). A generation that ends after the budget is not counted and
the centre before it is the final one, as when tfrl's run is stopped.
"""

import argparse
import json
import os
import random
import sys
import time

_START = time.time()  # before the imports: the budget counts start-up, as for tfrl
# Read when Ray is imported (EvoTorch imports it): with "0", Ray takes the
# loopback address as the node's, and every Ray server listens on 127.0.0.1
# only (with only _node_ip_address, gcs_server, raylet and workers listen on
# all interfaces).
os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"


def parse_args(argv):
  p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  p.add_argument("--env", default="HalfCheetah-v5")
  p.add_argument("--seconds", type=float, default=1800.0, help="wall-clock budget")
  p.add_argument("--seed", type=int, default=0)
  p.add_argument("--num_actors", type=int, default=2, help="Ray actors (0: no Ray)")
  p.add_argument("--policy", default="Linear(obs_length, act_length)")
  p.add_argument("--observation_normalization", type=int, default=1)
  p.add_argument("--popsize", type=int, default=100)
  p.add_argument("--popsize_max", type=int, default=800)
  p.add_argument("--num_interactions", type=float, default=0.75 * 1000 * 100)
  p.add_argument("--max_speed", type=float, default=0.015)
  p.add_argument("--center_learning_rate", type=float, default=0.015 * 0.75)
  p.add_argument("--radius_init", type=float, default=0.015 * 15)
  p.add_argument("--stdev_learning_rate", type=float, default=0.1)
  p.add_argument("--stdev_max_change", type=float, default=0.2)
  p.add_argument("--momentum", type=float, default=0.9)
  p.add_argument("--final_episodes", type=int, default=10)
  p.add_argument("--log", required=True, help="JSON lines, one per generation")
  p.add_argument("--result", required=True, help="final JSON")
  return p.parse_args(argv)


def start_ray(num_cpus: int):
  """A fresh single-node Ray on loopback (EvoTorch would call a bare ray.init())."""
  import ray  # pylint: disable=import-outside-toplevel
  os.environ.pop("RAY_ADDRESS", None)
  ray.init(num_cpus=num_cpus, include_dashboard=False, _node_ip_address="127.0.0.1",
           configure_logging=False, log_to_driver=False)
  return ray


def play(problem, center, env_id, episodes, seed):
  """Undiscounted returns of the centre's policy on fresh envs (stats frozen)."""
  import gymnasium as gym  # pylint: disable=import-outside-toplevel
  import torch  # pylint: disable=import-outside-toplevel
  policy = problem.to_policy(center)
  env = gym.make(env_id)
  returns, steps = [], 0
  for i in range(episodes):
    obs, _ = env.reset(seed=10_000 * seed + i)
    total, done = 0.0, False
    while not done:
      with torch.no_grad():
        action = policy(torch.as_tensor(obs, dtype=torch.float32)).numpy()
      if hasattr(env.action_space, "n"):
        action = int(action.argmax())
      obs, reward, terminated, truncated, _ = env.step(action)
      total += float(reward)
      steps += 1
      done = terminated or truncated
    returns.append(total)
  env.close()
  return returns, steps


def versions():
  from importlib import metadata  # pylint: disable=import-outside-toplevel
  out = {}
  for name in ("evotorch", "torch", "gymnasium", "mujoco", "ray", "numpy"):
    try:
      out[name] = metadata.version(name)
    except metadata.PackageNotFoundError:
      out[name] = None
  return out


def main(argv):
  args = parse_args(argv)
  import numpy as np  # pylint: disable=import-outside-toplevel
  import torch  # pylint: disable=import-outside-toplevel
  from evotorch.algorithms import PGPE  # pylint: disable=import-outside-toplevel
  from evotorch.neuroevolution import GymNE  # pylint: disable=import-outside-toplevel
  random.seed(args.seed)
  np.random.seed(args.seed)
  torch.manual_seed(args.seed)  # GymNE's actors derive their seeds from it
  ray = start_ray(args.num_actors) if args.num_actors > 0 else None
  problem = GymNE(env=args.env, network=args.policy,
                  observation_normalization=bool(args.observation_normalization),
                  num_actors=args.num_actors or None)
  searcher = PGPE(
      problem, popsize=args.popsize, popsize_max=args.popsize_max or None,
      num_interactions=args.num_interactions or None,
      center_learning_rate=args.center_learning_rate,
      stdev_learning_rate=args.stdev_learning_rate,
      stdev_max_change=args.stdev_max_change, radius_init=args.radius_init,
      optimizer="clipup",
      optimizer_config={"max_speed": args.max_speed, "momentum": args.momentum})
  center = searcher.status["center"].clone()
  generations, last = 0, {}
  try:
    with open(args.log, "w") as log:
      while time.time() - _START < args.seconds:
        searcher.step()
        seconds = time.time() - _START
        if seconds > args.seconds:
          break  # finished past the budget: not counted
        status = searcher.status
        center = status["center"].clone()
        generations += 1
        last = {"generation": generations, "seconds": round(seconds, 3),
                "env_steps": int(status["total_interaction_count"]),
                "episodes": int(status["total_episode_count"]),
                "mean_eval": float(status["mean_eval"]),
                "median_eval": float(status["median_eval"]),
                "pop_best_eval": float(status["pop_best_eval"]),
                "popsize": len(searcher.population)}
        log.write(json.dumps(last) + "\n")
        log.flush()
        print(json.dumps(last), flush=True)
    train_seconds = time.time() - _START
    returns, eval_steps = play(problem, center, args.env, args.final_episodes, args.seed)
  finally:
    if ray is not None:
      problem.kill_actors()
      ray.shutdown()
  result = {
      "library": "evotorch", "versions": versions(), "args": vars(args),
      "generations": generations, "train_seconds": train_seconds, "last": last,
      "final_center_returns": returns,
      "final_center_mean": float(np.mean(returns)) if returns else None,
      "final_eval_env_steps": eval_steps,
  }
  with open(args.result, "w") as f:
    json.dump(result, f, indent=1)
  print(f"final centre over {len(returns)} episodes: {result['final_center_mean']}",
        flush=True)


if __name__ == "__main__":
  main(sys.argv[1:])
