"""Emulator frames/s of ALE built with and without profile-guided optimisation.

Builds (or reuses from ~/.cache/tfrl) both of setup.py's ALE recipes, the
default PGO one and TFRL_ALE_PGO=0, links the profile workload
(custom_ops/ale/cc/tools/ale_profile_workload.cc) against each, and plays the same
random-action frames on each game with both, in interleaved rounds (best round
kept). Games outside setup.PGO_GAMES show whether the profile carries over.
One thread, no TensorFlow: the emulator alone.

    python benchmarks/ale_pgo.py --games=pong,breakout,qbert --frames=100000

Prints a table and writes JSON (--output).
"""

import importlib.util
import json
import os
import platform
import re
import subprocess
import sys
import tempfile

from absl import app
from absl import flags

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from benchmarks import provenance  # pylint: disable=g-import-not-at-top

_GAMES = flags.DEFINE_list(
    "games", ["pong", "breakout", "space_invaders", "freeway", "qbert", "enduro", "asteroids",
              "beam_rider"], "ALE game names (ROMs of the installed ale-py).")
_FRAMES = flags.DEFINE_integer("frames", 100_000, "Emulator frames per game and round.")
_ROUNDS = flags.DEFINE_integer("rounds", 3, "Interleaved rounds; each cell keeps its best.")
_OUTPUT = flags.DEFINE_string("output", "ale_pgo.json", "JSON results path.")


def load_setup():
  spec = importlib.util.spec_from_file_location("tfrl_setup", os.path.join(ROOT, "setup.py"))
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  return module


def build_workload(prefix, out):
  subprocess.check_call([
      "g++", "-O2", "-std=c++17",
      os.path.join(ROOT, "custom_ops/ale/cc/tools/ale_profile_workload.cc"),
      f"-I{prefix}/include", f"-I{prefix}/include/ale", f"{prefix}/lib/libale.a", "-lz",
      "-lpthread", "-o", out])
  return out


def play(workload, roms, frames):
  out = subprocess.run([workload, str(frames), *roms], capture_output=True, text=True,
                       check=True).stdout
  return {m.group(1): float(m.group(2))
          for m in re.finditer(r"([\w]+)\.bin: \d+ frames, (\d+) frames/s", out)}


def main(argv):
  del argv
  import ale_py.roms  # pylint: disable=import-outside-toplevel
  setup = load_setup()
  roms = [str(ale_py.roms.get_rom_path(g)) for g in _GAMES.value]
  recipes = {}
  with tempfile.TemporaryDirectory() as work:
    for name, pgo in (("-O3", "0"), ("-O3 + PGO", "1")):
      os.environ["TFRL_ALE_PGO"] = pgo
      recipes[name] = build_workload(setup.build_ale(), os.path.join(work, f"workload{pgo}"))
    best = {name: {} for name in recipes}
    for rnd in range(_ROUNDS.value):
      for name, workload in recipes.items():
        for game, rate in play(workload, roms, _FRAMES.value).items():
          best[name][game] = max(best[name].get(game, 0.0), rate)
      print(f"round {rnd + 1} done", flush=True)
  base, pgo = best["-O3"], best["-O3 + PGO"]
  print(f"ALE {setup.ALE_VERSION}, one thread, random actions, {_FRAMES.value} frames per "
        f"game and round, best of {_ROUNDS.value}; {platform.processor() or platform.machine()}")
  print(f"{'game':<16} {'in profile':>10} {'-O3 frames/s':>13} {'PGO frames/s':>13} "
        f"{'PGO / -O3':>9}")
  rows = []
  for game in _GAMES.value:
    trained = game in setup.PGO_GAMES
    rows.append({"game": game, "in_profile": trained, "o3": base[game], "pgo": pgo[game],
                 "ratio": pgo[game] / base[game]})
    print(f"{game:<16} {'yes' if trained else 'no':>10} {base[game]:>13.0f} {pgo[game]:>13.0f} "
          f"{pgo[game] / base[game]:>8.2f}x")
  with open(_OUTPUT.value, "w") as f:
    # Taken after the timing: it imports TensorFlow, which the timed builds do not use.
    json.dump({"provenance": provenance.provenance(), "frames": _FRAMES.value,
               "rounds": _ROUNDS.value, "machine": platform.machine(),
               "cpus": os.cpu_count(), "results": rows}, f, indent=1)
  print(f"wrote {_OUTPUT.value}")


if __name__ == "__main__":
  app.run(main)
