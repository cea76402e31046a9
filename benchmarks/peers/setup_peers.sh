#!/usr/bin/env bash
# Creates the peers' virtualenvs OUTSIDE the repository, each with exact pins:
#
#   benchmarks/peers/setup_peers.sh [sb3] [sf] [evotorch] [cleanrl] [envpool]   # default: all
#
#   PEERS_DIR (default /work/peers): where the venvs go: $PEERS_DIR/sb3, /sf, /evotorch,
#     /cleanrl, /envpool, the defaults of race_pong.py's --sb3_venv / --sf_venv,
#     race_mujoco.py's --evotorch_venv, race_td3.py's --sb3_venv / --cleanrl_venv and
#     env_throughput.py's --envpool_venv.
#   CLEANRL_REPO (default https://github.com/vwxyzjn/cleanrl): cloned at CLEANRL_COMMIT
#     into $PEERS_DIR/cleanrl/src; CleanRL is run from its checkout, as its users run it,
#     with its own pins (gymnasium 0.29.1, mujoco 2.3.3, numpy 1.26) but the CPU torch
#     of the other peers instead of its 2.4.1.
#   PYTHON (default python3.11): the interpreter each venv is made from.
#
# The pins are the versions the races ran (benchmarks/results/race_*.json record
# them per run); envpool's is the one env_throughput.py's results were measured
# with (its Atari ROMs come with its envpool-assets dependency). torch 2.13.0 is
# its CPU build where a wheel of it lies on disk (pip's find-links); elsewhere add
# `--index-url https://download.pytorch.org/whl/cpu` to PIP_EXTRA or pip takes a
# CUDA build of several GB.
#
# Sample Factory's Atari extra pins gymnasium 0.29.1 / ale-py 0.8.1, whose ROMs
# come from AutoROM's download; instead Pong's ROM is taken from the ale-py 0.12.1
# wheel (which ships it, md5 below) and imported with ale-py 0.8.1's ale-import-roms.
# Nothing here is imported by tfrl or its tests: the races only start the venvs'
# python. Re-running installs nothing new into a venv that already has the pins.
set -euo pipefail

PEERS_DIR=${PEERS_DIR:-/work/peers}
PYTHON=${PYTHON:-python3.11}
PIP_EXTRA=${PIP_EXTRA:-}
TORCH="torch==2.13.0"

SB3_PINS=("$TORCH" "stable-baselines3[extra]==2.9.2" "rl_zoo3==2.9.2" "sb3_contrib==2.9.2"
          "gymnasium[mujoco]==1.4.0" "mujoco==4.0.0" "ale-py==0.12.1" "numpy==2.4.6")
SF_PINS=("$TORCH" "sample-factory==2.1.1" "gymnasium[atari]==0.29.1" "shimmy==0.2.1"
         "ale-py==0.8.1" "numpy==1.26.4")
EVOTORCH_PINS=("$TORCH" "evotorch==0.6.1" "gymnasium[mujoco]==1.4.0" "mujoco==4.0.0"
               "ray==2.60.0" "numpy==2.4.6")
CLEANRL_PINS=("$TORCH" "gymnasium[mujoco]==0.29.1" "mujoco==2.3.3" "numpy==1.26.4"
              "tyro==0.9.2" "tensorboard==2.20.0")
ENVPOOL_PINS=("envpool==1.2.5" "envpool-assets==0.3.0" "gymnasium==1.4.0" "numpy==2.4.6")
CLEANRL_REPO=${CLEANRL_REPO:-https://github.com/vwxyzjn/cleanrl}
CLEANRL_COMMIT=fe8d8a03
PONG_ROM_MD5=60e0ea3cbe0913d39803477945e9e5ec

make_venv() {  # NAME PIN...
  local venv="$PEERS_DIR/$1"; shift
  case "$(realpath -m "$venv")/" in
    "$(realpath "$(dirname "$0")/../..")"/*)
      echo "setup_peers.sh: $venv is inside the repository; set PEERS_DIR elsewhere" >&2
      exit 2;;
  esac
  [ -x "$venv/bin/python" ] || "$PYTHON" -m venv "$venv"
  # shellcheck disable=SC2086
  "$venv/bin/pip" install --disable-pip-version-check -q $PIP_EXTRA "$@"
  echo "$venv ($("$venv/bin/python" --version)):" $("$venv/bin/pip" freeze 2>/dev/null \
      | grep -iE '^(torch|stable.baselines3|rl.zoo3|sb3.contrib|sample.factory|evotorch|envpool|envpool.assets|gymnasium|ale.py|shimmy|mujoco|ray|numpy|tyro)==')
}

import_pong_rom() {  # Pong's ROM for ale-py 0.8.1, from the ale-py 0.12.1 wheel
  local venv="$PEERS_DIR/sf" tmp
  if "$venv/bin/python" -c "from ale_py.roms import Pong" 2>/dev/null; then return; fi
  tmp=$(mktemp -d)
  "$venv/bin/pip" download --disable-pip-version-check -q --no-deps --only-binary=:all: \
      -d "$tmp/wheel" "ale-py==0.12.1"
  "$venv/bin/python" - "$tmp" "$PONG_ROM_MD5" <<'EOF'
import glob, hashlib, os, sys, zipfile
tmp, md5 = sys.argv[1], sys.argv[2]
with zipfile.ZipFile(glob.glob(os.path.join(tmp, "wheel", "*.whl"))[0]) as wheel:
  rom = wheel.read("ale_py/roms/pong.bin")
if hashlib.md5(rom).hexdigest() != md5:
  sys.exit(f"pong.bin md5 {hashlib.md5(rom).hexdigest()}, expected {md5}")
os.makedirs(os.path.join(tmp, "roms"))
with open(os.path.join(tmp, "roms", "pong.bin"), "wb") as f:
  f.write(rom)
EOF
  "$venv/bin/ale-import-roms" "$tmp/roms"
  rm -rf "$tmp"
}

clone_cleanrl() {  # CleanRL's scripts, outside the repository, at the pinned commit
  local src="$PEERS_DIR/cleanrl/src"
  [ -d "$src/.git" ] || git clone -q "$CLEANRL_REPO" "$src"
  git -C "$src" checkout -q "$CLEANRL_COMMIT"
  echo "$src: cleanrl at $(git -C "$src" rev-parse --short HEAD)"
}

peers=("$@")
[ ${#peers[@]} -gt 0 ] || peers=(sb3 sf evotorch cleanrl envpool)
mkdir -p "$PEERS_DIR"
for peer in "${peers[@]}"; do
  case "$peer" in
    sb3) make_venv sb3 "${SB3_PINS[@]}";;
    sf) make_venv sf "${SF_PINS[@]}"; import_pong_rom;;
    evotorch) make_venv evotorch "${EVOTORCH_PINS[@]}";;
    cleanrl) make_venv cleanrl "${CLEANRL_PINS[@]}"; clone_cleanrl;;
    envpool) make_venv envpool "${ENVPOOL_PINS[@]}";;
    *) echo "setup_peers.sh: unknown peer '$peer'; peers are sb3, sf, evotorch, cleanrl," \
            "envpool" >&2
       exit 2;;
  esac
done
