"""Sample Factory's Atari example with a wall-clock budget that ends the run cleanly.

Runs in Sample Factory's own virtualenv (never tfrl's), started by
benchmarks/race_pong.py:

    /work/peers/sf/bin/python benchmarks/peers/sf_atari.py --train_for_seconds=240 \\
        --algo=APPO --env=atari_pong --experiment=race --train_dir=DIR --device=cpu ...

Every argument but --train_for_seconds goes to Sample Factory's own parser, as
`python -m sf_examples.atari.train_atari` takes them; the run is that script's:
its Atari env registration, its argument parsing with the Atari defaults, its
runner. The one addition is an `AlgoObserver` (its documented hook, docs/07-
advanced-topics/observer.md) that keeps the runner's `total_train_seconds` up to
date: Sample Factory 2.1.1 ends a run when that figure passes
--train_for_seconds but never updates it, so the option never ends a run, and
the race had to stop it with Ctrl-C, which its runner reports as
ExperimentStatus.INTERRUPTED: exit code 2. With the observer the run stops at
its budget (counted from this process's start, as the race counts every row's)
through its own stop path, saves its checkpoint and exits 0.
"""

import sys
import time

_START = time.time()  # before the imports: the budget counts start-up, as for the other rows


def _budget(argv):
  """--train_for_seconds (required here) and the rest of argv, for Sample Factory."""
  rest, seconds = [], None
  for arg in argv:
    if arg.startswith("--train_for_seconds="):
      seconds = float(arg.split("=", 1)[1])
    else:
      rest.append(arg)
  if seconds is None or seconds <= 0:
    sys.exit("sf_atari.py: --train_for_seconds=S (S > 0) is required")
  return seconds, rest


def main(argv):
  seconds, rest = _budget(argv)
  # pylint: disable=import-outside-toplevel
  from sample_factory.algo.runners.runner import AlgoObserver
  from sample_factory.algo.utils.misc import ExperimentStatus
  from sample_factory.train import make_runner
  from sf_examples.atari.train_atari import parse_atari_args, register_atari_components

  class WallClock(AlgoObserver):
    """Seconds since this process started, where the runner's end check reads them."""

    def on_training_step(self, runner, training_iteration_since_resume):
      del training_iteration_since_resume
      runner.total_train_seconds = time.time() - _START

  register_atari_components()
  cfg = parse_atari_args(argv=[*rest, f"--train_for_seconds={seconds:g}"])
  cfg, runner = make_runner(cfg)
  runner.register_observer(WallClock())
  status = runner.init()
  if status == ExperimentStatus.SUCCESS:
    status = runner.run()
  print(f"sf_atari.py: status {status} after {time.time() - _START:.0f} s", flush=True)
  return status


if __name__ == "__main__":
  sys.exit(main(sys.argv[1:]))
