"""`tfrl.atomic_files`: a write replaces the file whole or leaves it untouched."""

import json
import os

import numpy as np
import pytest

from tfrl import atomic_files


def test_writes_replace_the_file(tmp_path):
  path = str(tmp_path / "summary.json")
  atomic_files.write_json(path, {"a": 1})
  atomic_files.write_json(path, {"a": 2}, indent=1)
  with open(path) as f:
    assert json.load(f) == {"a": 2}
  atomic_files.write_text(str(tmp_path / "flags.txt"), "--x=1\n")
  assert (tmp_path / "flags.txt").read_text() == "--x=1\n"
  assert sorted(os.listdir(tmp_path)) == ["flags.txt", "summary.json"]


def test_npz_keeps_its_exact_name(tmp_path):
  path = str(tmp_path / "replay-100.npz")
  atomic_files.save_npz(path, x=np.arange(3))
  with np.load(path) as data:
    assert data["x"].tolist() == [0, 1, 2]
  assert os.listdir(tmp_path) == ["replay-100.npz"]


def test_a_failed_write_leaves_the_old_file_and_no_temporary(tmp_path):
  path = str(tmp_path / "checkpoint.json")
  atomic_files.write_json(path, {"generation": 1})
  with pytest.raises(RuntimeError):
    with atomic_files.replacing(path, "w") as f:
      f.write('{"generation": 2, "half')
      raise RuntimeError("killed mid-write")
  # json cannot encode the value: it fails before the file is touched.
  with pytest.raises(TypeError):
    atomic_files.write_json(path, {"generation": object()})
  with open(path) as f:
    assert json.load(f) == {"generation": 1}
  assert os.listdir(tmp_path) == ["checkpoint.json"]


def test_a_stale_temporary_is_overwritten(tmp_path):
  path = str(tmp_path / "state.json")
  (tmp_path / "state.json.tmp").write_text("left by a killed process")
  atomic_files.write_json(path, [1])
  assert os.listdir(tmp_path) == ["state.json"]
