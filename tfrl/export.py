"""One SavedModel policy format for every tfrl algorithm.

A policy is any `tf.Module` (or Keras model) whose `__call__(obs)` returns a
dict with some of these keys:

  * `probs`  float32 [B, A]: action probabilities (discrete policies),
  * `action` [B] int32 (discrete) or [B, D] float32 (continuous),
  * `value`  float32 [B]: state value, where the algorithm has one.

`export_policy` traces `__call__` once with the given observation spec and
saves a SavedModel whose `serving_default` signature takes one input named
`obs` and returns that dict. The SavedModel holds only stock TensorFlow ops, so
it loads with `tf.saved_model.load(dir)` in a process that never imports tfrl:

    policy = tf.saved_model.load(export_dir)
    out = policy.signatures["serving_default"](obs=batch)   # dict of tensors
    out = policy(batch)                                      # same dict

`DiscretePolicy` turns an actor-critic network (`net(obs) -> (logits, value)`)
into such a policy.

With `env_protocol`, the SavedModel also says how its env is made (the
`tfrl.envs.EnvProtocol` it was trained on) in `assets.extra/tfrl_policy.json`,
a JSON file any program can read (TensorFlow Serving ignores the folder):

    {"format": "tfrl_policy", "version": 1,
     "env_protocol": {"game": "pong", "env": null, "frame_skip": 4,
                      "repeat_action_probability": 0.0, "noop_max": 30, ...}}

`python -m tfrl.evaluate` plays a policy on that protocol unless told otherwise.
"""

import json
import os
import shutil
from typing import Any, Dict, Mapping, Optional

import tensorflow as tf

from tfrl import atomic_files
from tfrl import stopping

OUTPUT_KEYS = ("probs", "action", "value")
SIGNATURE_KEY = "serving_default"
INPUT_NAME = "obs"
METADATA_FILE = os.path.join("assets.extra", "tfrl_policy.json")
METADATA_FORMAT, METADATA_VERSION = "tfrl_policy", 1


class DiscretePolicy(tf.Module):
  """Wraps `network(obs) -> (logits, value)` as a discrete export policy.

  Returns `probs` (softmax of the logits), `action` (greedy, int32) and
  `value` ([B]). Greedy/sampled play is the evaluator's choice: it may sample
  from `probs`.
  """

  def __init__(self, network, name=None):
    super().__init__(name=name)
    self.network = network

  def __call__(self, obs):
    logits, value = self.network(obs)
    probs = tf.nn.softmax(logits, axis=-1)
    action = tf.argmax(logits, axis=-1, output_type=tf.int32)
    value = tf.reshape(value, [-1])
    return {"probs": probs, "action": action, "value": value}


class _Exported(tf.Module):
  """What the SavedModel holds: the policy (its variables) and one function."""

  def __init__(self, policy, observation_spec):
    super().__init__(name="tfrl_policy")
    self.policy = policy

    @tf.function(input_signature=[observation_spec])
    def serve(obs):
      out = policy(obs)
      if not isinstance(out, Mapping):
        raise TypeError(
            "A policy's __call__(obs) must return a dict with keys from "
            f"{OUTPUT_KEYS}; got {type(out).__name__}.")
      unknown = set(out) - set(OUTPUT_KEYS)
      if unknown or "action" not in out:
        raise ValueError(
            f"A policy's outputs must include 'action' and only use keys "
            f"{OUTPUT_KEYS}; got {sorted(out)}.")
      return {k: tf.identity(out[k], name=k) for k in OUTPUT_KEYS if k in out}

    self.__call__ = serve


def export_policy(policy_module, observation_spec: tf.TensorSpec,
                  export_dir: str, env_protocol=None,
                  extra_metadata: Optional[Dict[str, Any]] = None) -> str:
  """Saves `policy_module` as a SavedModel policy under `export_dir`.

  Args:
    policy_module: a `tf.Module` whose `__call__(obs)` returns a dict with
      `action` and optionally `probs` and `value` (see the module docstring).
    observation_spec: `tf.TensorSpec` of one batch of observations, batch
      dimension `None`, e.g. `tf.TensorSpec([None, 84, 84, 4], tf.uint8)`.
      The signature input is always named `obs`.
    export_dir: target directory. It is replaced atomically (written next to
      it, then renamed), so a reader never sees half a policy.
    env_protocol: the `tfrl.envs.EnvProtocol` the policy plays on, written to
      `assets.extra/tfrl_policy.json` (None: no metadata).
    extra_metadata: more JSON-ready entries for that file (e.g. the
      `precision` a GA3C network computed in); only with `env_protocol`.

  Returns:
    `export_dir`.
  """
  if not isinstance(observation_spec, tf.TensorSpec):
    raise TypeError(
        f"observation_spec must be a tf.TensorSpec, got {observation_spec!r}.")
  if observation_spec.shape.rank is None or observation_spec.shape.rank < 1:
    raise ValueError(
        "observation_spec needs a known rank with a leading batch dimension; "
        f"got shape {observation_spec.shape}.")
  spec = tf.TensorSpec(observation_spec.shape, observation_spec.dtype,
                       name=INPUT_NAME)
  exported = _Exported(policy_module, spec)
  concrete = exported.__call__.get_concrete_function()

  export_dir = os.path.abspath(export_dir)
  parent = os.path.dirname(export_dir)
  os.makedirs(parent, exist_ok=True)
  tmp_dir = export_dir + ".tmp"
  old_dir = export_dir + ".old"
  if not os.path.exists(export_dir) and os.path.exists(old_dir):
    # An earlier export was killed between its two renames: the complete
    # policy is the .old one; put it back before anything else.
    os.rename(old_dir, export_dir)
  for d in (tmp_dir, old_dir):
    if os.path.exists(d):
      shutil.rmtree(d)
  try:
    tf.saved_model.save(exported, tmp_dir,
                        signatures={SIGNATURE_KEY: concrete})
    if env_protocol is not None:
      _write_metadata(tmp_dir, env_protocol, extra_metadata or {})
  except BaseException:
    # E.g. a full disk: no half-written policy stays behind; export_dir, if
    # any, is the previous one, untouched.
    shutil.rmtree(tmp_dir, ignore_errors=True)
    raise
  with stopping.critical():
    if os.path.exists(export_dir):
      os.rename(export_dir, old_dir)
    os.rename(tmp_dir, export_dir)
  if os.path.exists(old_dir):
    shutil.rmtree(old_dir, ignore_errors=True)
  return export_dir


def _write_metadata(export_dir: str, env_protocol, extra: Dict[str, Any]) -> None:
  path = os.path.join(export_dir, METADATA_FILE)
  os.makedirs(os.path.dirname(path), exist_ok=True)
  atomic_files.write_json(path, {**extra, "format": METADATA_FORMAT, "version": METADATA_VERSION,
                                 "env_protocol": env_protocol.resolved().to_json()},
                          indent=1)


def read_metadata(export_dir: str) -> Optional[Dict[str, Any]]:
  """The metadata of a policy exported with an env protocol; None for one
  without (an older export). ValueError for a file that cannot be read."""
  path = os.path.join(export_dir, METADATA_FILE)
  if not os.path.exists(path):
    return None
  try:
    with open(path) as f:
      metadata = json.load(f)
  except (OSError, ValueError) as e:
    raise ValueError(f"cannot read the policy's metadata {path}: {e}") from None
  if not isinstance(metadata, dict) or metadata.get("format") != METADATA_FORMAT:
    raise ValueError(f"{path} is not tfrl policy metadata.")
  return metadata


def read_env_protocol(export_dir: str):
  """The `EnvProtocol` a policy was exported with, or None (an older export)."""
  from tfrl.envs import protocol  # pylint: disable=import-outside-toplevel
  metadata = read_metadata(export_dir)
  if metadata is None or metadata.get("env_protocol") is None:
    return None
  try:
    return protocol.EnvProtocol.from_json(metadata["env_protocol"])
  except (TypeError, ValueError) as e:
    raise ValueError(f"the env protocol in {os.path.join(export_dir, METADATA_FILE)} "
                     f"is not valid: {e}") from None
