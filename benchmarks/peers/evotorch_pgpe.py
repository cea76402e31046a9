"""EvoTorch's PGPE on a gymnasium env through its `GymNE` problem, for a time budget.

Runs in EvoTorch's own virtualenv (never tfrl's), called by
benchmarks/race_mujoco.py; it only uses EvoTorch's public API, as its users do
(its examples/scripts/rl_gym.py and rl_clipup.py: PGPE with the ClipUp
optimizer, GymNE's observation normalization, Ray actors, and the centre
evaluated after each generation on a second GymNE with the observation
statistics copied, as rl_clipup.py's `evaluate_center` hook does):

    /work/peers/evotorch/bin/python benchmarks/peers/evotorch_pgpe.py --config=mlp \\
        --env=HalfCheetah-v5 --seconds=1800 --seed=0 --num_actors=2 \\
        --log=run.jsonl --result=run.json

Two configurations (--config; any flag given overrides its value):
- mlp: tfrl's es_halfcheetah network (flags/es_halfcheetah.flags: a 64x64 tanh
  MLP with a tanh action head) and its population, 48 (24 mirrored pairs, PGPE's
  symmetric sampling), one episode each, no adaptive growth; the centre over 2
  episodes per generation like the preset's --center_episodes=2. ClipUp as
  rl_clipup.py sets it for its MLP policies (max speed 0.15, step 0.75 of it,
  initial radius 15 times it). Its centre starts as tfrl's does (--center_init=lecun:
  weights normal with std 1/sqrt(fan-in), biases 0, given to PGPE's `center_init`):
  GymNE's own start (+-1e-5) leaves a zero MLP whose tanh layers pass almost no
  signal, a flat start that tfrl's run does not have.
- linear: rl_clipup.py's `walker` configuration (its nearest MuJoCo locomotion
  preset; EvoTorch ships none for HalfCheetah) without the reward offset, since
  HalfCheetah has no alive bonus: a linear policy, popsize 100 growing to 800
  until 75,000 interactions a generation, its centre GymNE's own start
  (--center_init=evotorch); the earlier races' EvoTorch row.

Env steps are counted as tfrl counts them: the training episodes and the
centre's (`env_steps`), each also apart (`training_env_steps`,
`centre_env_steps`). Ray runs on this host only: the driver starts its own node
on 127.0.0.1 (all of Ray's listeners on loopback) and shuts it down at the end.

Writes one JSON line per generation completed within the budget (seconds since
this script started, env steps so far, the population's mean / median / best
return as PGPE's status reports them, the centre's mean return) and, at the
end, a result JSON with the final centre's return over --final_episodes fresh
episodes (observation statistics frozen). A generation that ends after the
budget is not counted and the centre before it is the final one, as when
tfrl's run is stopped.
"""

import argparse
import json
import os
import random
import sys
import time

_START = time.time()  # before the imports: the budget counts start-up, as for tfrl


MLP_POLICY = ("Linear(obs_length, 64) >> Tanh() >> Linear(64, 64) >> Tanh() "
              ">> Linear(64, act_length) >> Tanh()")
CONFIGS = {
    "mlp": {"policy": MLP_POLICY, "popsize": 48, "popsize_max": 0, "num_interactions": 0,
            "max_speed": 0.15, "center_learning_rate": 0.15 * 0.75,
            "radius_init": 0.15 * 15, "center_init": "lecun"},
    "linear": {"policy": "Linear(obs_length, act_length)", "popsize": 100,
               "popsize_max": 800, "num_interactions": 0.75 * 1000 * 100,
               "max_speed": 0.015, "center_learning_rate": 0.015 * 0.75,
               "radius_init": 0.015 * 15, "center_init": "evotorch"},
}
COMMON = {"observation_normalization": 1, "stdev_learning_rate": 0.1,
          "stdev_max_change": 0.2, "momentum": 0.9, "center_episodes": 2}


def parse_args(argv):
  p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  p.add_argument("--config", choices=sorted(CONFIGS), default="mlp",
                 help="the defaults of the settings below")
  p.add_argument("--env", default="HalfCheetah-v5")
  p.add_argument("--seconds", type=float, default=1800.0, help="wall-clock budget")
  p.add_argument("--seed", type=int, default=0)
  p.add_argument("--num_actors", type=int, default=2, help="Ray actors (0: no Ray)")
  p.add_argument("--policy")
  p.add_argument("--observation_normalization", type=int)
  p.add_argument("--popsize", type=int)
  p.add_argument("--popsize_max", type=int, help="0: a fixed popsize")
  p.add_argument("--num_interactions", type=float, help="0: none")
  p.add_argument("--max_speed", type=float)
  p.add_argument("--center_learning_rate", type=float)
  p.add_argument("--radius_init", type=float)
  p.add_argument("--center_init", choices=("lecun", "evotorch"),
                 help="lecun: tfrl's start; evotorch: GymNE's initial_bounds")
  p.add_argument("--stdev_learning_rate", type=float)
  p.add_argument("--stdev_max_change", type=float)
  p.add_argument("--momentum", type=float)
  p.add_argument("--center_episodes", type=int, help="centre episodes per generation")
  p.add_argument("--final_episodes", type=int, default=10)
  p.add_argument("--log", required=True, help="JSON lines, one per generation")
  p.add_argument("--result", required=True, help="final JSON")
  args = p.parse_args(argv)
  for key, value in {**COMMON, **CONFIGS[args.config]}.items():
    if getattr(args, key) is None:
      setattr(args, key, value)
  if args.popsize < 2 or args.popsize % 2 or args.center_episodes < 0:
    p.error(f"--popsize must be even and >= 2 (PGPE samples mirrored pairs) and "
            f"--center_episodes >= 0; got {args.popsize} and {args.center_episodes}")
  return args


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


def lecun_center(problem, seed):
  """A centre drawn as tfrl's ES draws its networks: each weight matrix normal with
  std 1/sqrt(fan-in), biases zero, flattened in the network's parameter order (the
  order in which EvoTorch fills a network from a solution)."""
  import torch  # pylint: disable=import-outside-toplevel
  net = problem.make_net(torch.zeros(problem.solution_length))
  generator = torch.Generator().manual_seed(seed)
  parts = []
  for param in net.parameters():
    if param.dim() == 2:  # Linear: [out, in]
      parts.append(torch.randn(param.shape, generator=generator).flatten()
                   / param.shape[1] ** 0.5)
    else:
      parts.append(torch.zeros(param.numel()))
  return torch.cat(parts)


def make_searcher(args, num_actors):
  """GymNE and PGPE with ClipUp, and the second GymNE that plays the centre."""
  from evotorch.algorithms import PGPE  # pylint: disable=import-outside-toplevel
  from evotorch.neuroevolution import GymNE  # pylint: disable=import-outside-toplevel
  norm = bool(args.observation_normalization)
  problem = GymNE(env=args.env, network=args.policy, observation_normalization=norm,
                  num_actors=num_actors)
  searcher = PGPE(
      problem, popsize=args.popsize, popsize_max=args.popsize_max or None,
      num_interactions=args.num_interactions or None,
      center_learning_rate=args.center_learning_rate,
      stdev_learning_rate=args.stdev_learning_rate,
      stdev_max_change=args.stdev_max_change, radius_init=args.radius_init,
      center_init=lecun_center(problem, args.seed) if args.center_init == "lecun" else None,
      optimizer="clipup",
      optimizer_config={"max_speed": args.max_speed, "momentum": args.momentum})
  # In this process, as rl_clipup.py's test problem (it uses one actor).
  centre_problem = GymNE(env=args.env, network=args.policy, observation_normalization=norm)
  return problem, searcher, centre_problem


def play_centre(problem, centre_problem, center, episodes):
  """The centre's mean return over `episodes` (statistics copied, not updated) and
  the env steps they took, through EvoTorch's own evaluation."""
  if episodes == 0:
    return None, 0
  if centre_problem.observation_normalization:
    centre_problem.set_observation_stats(problem.get_observation_stats())
  before = interactions(centre_problem)
  batch = centre_problem.generate_batch(episodes)
  batch.set_values(center.unsqueeze(0).repeat(episodes, 1))
  centre_problem.evaluate(batch)
  return float(batch.evals.mean()), interactions(centre_problem) - before


def interactions(problem) -> int:
  return int(problem.interaction_count)


def train(args, problem, searcher, centre_problem, log):
  """Generations until the budget; (last centre, generations, last line)."""
  center = searcher.status["center"].clone()
  generations, centre_steps, last = 0, 0, {}
  while time.time() - _START < args.seconds:
    searcher.step()
    status = searcher.status
    centre_mean, steps = play_centre(problem, centre_problem, status["center"],
                                     args.center_episodes)
    seconds = time.time() - _START
    if seconds > args.seconds:
      break  # finished past the budget: not counted
    center = status["center"].clone()
    generations += 1
    centre_steps += steps
    training = int(status["total_interaction_count"])
    last = {"generation": generations, "seconds": round(seconds, 3),
            "env_steps": training + centre_steps, "training_env_steps": training,
            "centre_env_steps": centre_steps,
            "episodes": int(status["total_episode_count"]),
            "mean_eval": float(status["mean_eval"]),
            "median_eval": float(status["median_eval"]),
            "pop_best_eval": float(status["pop_best_eval"]),
            "centre_eval": centre_mean, "popsize": len(searcher.population)}
    log.write(json.dumps(last) + "\n")
    log.flush()
    print(json.dumps(last), flush=True)
  return center, generations, last


def main(argv):
  args = parse_args(argv)
  # Read when Ray is imported (EvoTorch imports it): with "0", Ray takes the
  # loopback address as the node's, and every Ray server listens on 127.0.0.1
  # only (with only _node_ip_address, gcs_server, raylet and workers listen on
  # all interfaces). Set here, not at import: race_mujoco.py imports this module
  # in tfrl's process for parse_args alone.
  os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"
  import numpy as np  # pylint: disable=import-outside-toplevel
  import torch  # pylint: disable=import-outside-toplevel
  random.seed(args.seed)
  np.random.seed(args.seed)
  torch.manual_seed(args.seed)  # GymNE's actors derive their seeds from it
  ray = start_ray(args.num_actors) if args.num_actors > 0 else None
  problem, searcher, centre_problem = make_searcher(args, args.num_actors or None)
  try:
    with open(args.log, "w") as log:
      center, generations, last = train(args, problem, searcher, centre_problem, log)
    train_seconds = time.time() - _START
    returns, eval_steps = play(problem, center, args.env, args.final_episodes, args.seed)
  finally:
    if ray is not None:
      problem.kill_actors()
      ray.shutdown()
  result = {
      "library": "evotorch", "versions": versions(), "args": vars(args),
      "parameters": int(problem.solution_length),
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
