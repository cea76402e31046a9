"""Steps a block of one GymEnv's gymnasium envs in a process without TensorFlow.

    python -m tfrl.env_worker REQUEST_FD REPLY_FD MEMORY_FD PARENT_PID
    # started by tfrl.envs.env_processes.EnvProcesses, never by hand

gymnasium's Python (a MuJoCo task's reward terms and observation, its
wrappers) holds the GIL; in the learner's process every slot group's env
step queues behind that one lock. Here a block of slots gets a process and a
GIL of its own. The parent writes the slots, actions and reset seeds of a
request into memory both processes map (`MEMORY_FD`, see `shared_arrays`),
sends a small ("step" | "reset", count) message on the request pipe, and
this process writes the observations, rewards and flags back into the same
memory before it answers ("ok", None) or ("error", is_value_error, line).
So a step moves no array through a pipe.

The process lives only as long as its parent wants it: it exits on "close",
on the end of the request pipe, and when its parent dies (a watchdog sees it
re-parented: `prctl(PR_SET_PDEATHSIG)` would fire when the *thread* that
started it ends, which may be a short-lived thread of the parent's). It
ignores SIGINT and SIGTERM: a Ctrl-C of the terminal reaches the whole
process group, and the parent, which stops cleanly on it, still needs its
envs for the step under way.

This module imports gymnasium and numpy only (and MuJoCo through gymnasium).
"""

import mmap
from multiprocessing import connection
import os
import signal
import sys
import threading
import time
from typing import Dict, List, Tuple

import numpy as np

from tfrl import gym_make

# A seed of a reset request: reset with the env's own stream (gymnasium's seed=None).
NO_SEED = -1
# Not reset (a slot whose observation is only read).
KEEP = -2
_WATCH_SECONDS = 0.2
_ALIGN = 64


def array_layout(num_envs: int, observation_shape, observation_dtype, action_shape,
                 action_dtype) -> Tuple[List[tuple], int]:
  """[(name, shape, dtype, offset)] of the shared arrays of `num_envs` slots, and
  the bytes they take. `index`, `action`, `seed`: a request's slots (local to
  the block), actions and reset seeds, in request order; `reward`,
  `terminated`, `truncated`: a step's results, in request order; `obs`: each
  slot's latest observation, by slot."""
  specs = [("index", (num_envs,), np.int32),
           ("action", (num_envs,) + tuple(action_shape), np.dtype(action_dtype)),
           ("seed", (num_envs,), np.int64),
           ("reward", (num_envs,), np.float32),
           ("terminated", (num_envs,), np.bool_),
           ("truncated", (num_envs,), np.bool_),
           ("obs", (num_envs,) + tuple(observation_shape), np.dtype(observation_dtype))]
  layout, offset = [], 0
  for name, shape, dtype in specs:
    layout.append((name, shape, np.dtype(dtype), offset))
    size = int(np.prod(shape, dtype=np.int64)) * np.dtype(dtype).itemsize
    offset += -(-size // _ALIGN) * _ALIGN
  return layout, max(offset, _ALIGN)


def shared_arrays(memory, layout) -> Dict[str, np.ndarray]:
  """numpy views of `layout`'s arrays in `memory` (an mmap both processes share)."""
  return {name: np.ndarray(shape, dtype, buffer=memory, offset=offset)
          for name, shape, dtype, offset in layout}


class Block:
  """The envs of one block of slots and the shared arrays they answer through."""

  def __init__(self, spec: dict, memory):
    self.envs = [gym_make.make_gymnasium(spec["env_id"], spec["max_episode_steps"],
                                         **spec["make_kwargs"])
                 for _ in range(spec["num_envs"])]
    self.auto_reset = spec["auto_reset"]
    self.discrete = spec["discrete"]
    layout, _ = array_layout(spec["num_envs"], *spec["shapes"])
    self.a = shared_arrays(memory, layout)

  def step(self, count: int) -> None:
    a = self.a
    for k in range(count):
      i = int(a["index"][k])
      action = int(a["action"][k]) if self.discrete else a["action"][k].copy()
      obs, reward, terminated, truncated, _ = self.envs[i].step(action)
      a["reward"][k], a["terminated"][k], a["truncated"][k] = reward, terminated, truncated
      if (terminated or truncated) and self.auto_reset:
        obs, _ = self.envs[i].reset()
      a["obs"][i] = obs

  def reset(self, count: int) -> None:
    a = self.a
    for k in range(count):
      i, seed = int(a["index"][k]), int(a["seed"][k])
      if seed != KEEP:
        a["obs"][i], _ = self.envs[i].reset(seed=None if seed == NO_SEED else seed)

  def render(self, index: int):
    return self.envs[index].render()

  def close(self) -> None:
    for env in self.envs:
      env.close()


def error_reply(e: BaseException) -> tuple:
  """("error", is_value_error, one line naming the exception)."""
  text = str(e).strip()
  line = f"{type(e).__name__}: {text.splitlines()[0]}" if text else type(e).__name__
  return ("error", isinstance(e, (ValueError, TypeError)), line)


def serve(requests, replies, block: Block) -> None:
  """Answers requests until "close" or the end of the request pipe."""
  handlers = {"step": block.step, "reset": block.reset, "render": block.render}
  while True:
    try:
      command, argument = requests.recv()
    except (EOFError, OSError):  # the parent closed its end, or is gone
      return
    if command not in handlers:
      return
    try:
      reply = ("ok", handlers[command](argument))
    except Exception as e:  # pylint: disable=broad-except
      reply = error_reply(e)
    replies.send(reply)


def _watch_parent(parent_pid: int) -> None:
  while True:
    time.sleep(_WATCH_SECONDS)
    if os.getppid() != parent_pid:
      os._exit(1)  # pylint: disable=protected-access


def main(argv) -> None:
  request_fd, reply_fd, memory_fd, parent_pid = (int(x) for x in argv[1:5])
  for sig in (signal.SIGINT, signal.SIGTERM):
    signal.signal(sig, signal.SIG_IGN)
  threading.Thread(target=_watch_parent, args=(parent_pid,), daemon=True).start()
  if os.getppid() != parent_pid:
    return  # the parent died before the watchdog started
  requests = connection.Connection(request_fd, writable=False)
  replies = connection.Connection(reply_fd, readable=False)
  try:
    _, spec = requests.recv()  # ("spec", what Block makes)
  except (EOFError, OSError):
    return
  try:
    memory = mmap.mmap(memory_fd, spec["memory_bytes"])
    block = Block(spec, memory)
  except Exception as e:  # pylint: disable=broad-except
    replies.send(error_reply(e))
    return
  replies.send(("ok", os.getpid()))
  try:
    serve(requests, replies, block)
  finally:
    block.close()


if __name__ == "__main__":
  main(sys.argv)
