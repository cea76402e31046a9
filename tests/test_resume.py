"""`tfrl.resume`: the one-line messages of refused resumes and fresh runs."""

import pytest

from tfrl import resume


def test_every_mismatch_is_named_checkpoint_value_first():
  saved = {"algorithm": "ga", "game": "frostbite", "population": 64, "hidden": [64, 64],
           "env": None}
  current = {"algorithm": "ga", "game": "pong", "population": 128, "hidden": (64, 64),
             "env": None, "new_entry": 3}
  assert resume.mismatches(saved, current) == [
      "game frostbite != pong", "population 64 != 128"]
  with pytest.raises(ValueError) as e:
    resume.check_same_run(saved, current, "/logs/run")
  assert str(e.value) == ("cannot resume /logs/run (checkpoint != this run): "
                          "game frostbite != pong; population 64 != 128")
  assert "\n" not in str(e.value)


def test_none_and_lists_read_well():
  assert resume.mismatches({"game": "pong", "env": None, "sizes": [8]},
                           {"game": None, "env": "CartPole-v1", "sizes": [16, 16]}) == [
      "game pong != (none)", "env (none) != CartPole-v1", "sizes [8] != [16, 16]"]


def test_a_checkpoint_without_identity_is_not_compared():
  resume.check_same_run(None, {"algorithm": "es"}, "/logs/run")
  resume.check_same_run({}, {"algorithm": "es"}, "/logs/run")


def test_one_line_messages():
  error = resume.CorruptCheckpoint("/logs/run/checkpoint.json", "not valid JSON")
  assert isinstance(error, ValueError)
  assert str(error).startswith("cannot load the checkpoint /logs/run/checkpoint.json: "
                               "not valid JSON (nothing was changed")
  with pytest.raises(ValueError, match="pass --resume to continue it, or pick another "
                                       "--logdir"):
    resume.refuse_fresh_run("/logs/run")
  assert resume.nothing_to_resume("/logs/run") == (
      "--resume: no checkpoint in /logs/run; starting afresh.")
  assert resume.first_line(ValueError("first\nsecond")) == "first"
