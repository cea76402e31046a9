"""Plays and renders one gymnasium env in a process without TensorFlow.

    python -m tfrl.render_worker ENV_ID MAX_EPISODE_STEPS    # started by tfrl.recording

On a machine without a GPU, MuJoCo renders off-screen through EGL and Mesa's
llvmpipe, a software rasterizer built on LLVM. TensorFlow carries its own
LLVM, and a process that has loaded both crashes (when it renders, or at its
exit). So `tfrl.recording` replays the episode it records in this child,
which imports gymnasium and numpy only: it reads pickled (command, argument)
pairs on stdin (`reset` with a seed, `step` with an action, `render`,
`close`) and answers each with a pickled ("ok", result) or ("error", line)
on its stdout. The env is made as `tfrl.envs.GymEnv` makes it
(`tfrl.envs.gym_make.make_gymnasium`): the id's own time limit, and
MAX_EPISODE_STEPS (> 0) on top.
"""

import os
import pickle
import sys

from tfrl.envs.gym_make import make_gymnasium


def serve(env_id: str, max_episode_steps: int, requests, replies) -> None:
  env = make_gymnasium(env_id, max_episode_steps, render_mode="rgb_array")
  while True:
    try:
      command, argument = pickle.load(requests)
    except EOFError:  # the parent is gone
      break
    try:
      if command == "reset":
        result = env.reset(seed=argument)[0]
      elif command == "step":
        result = env.step(argument)[:4]
      elif command == "render":
        result = env.render()
      else:
        break
      reply = ("ok", result)
    except Exception as e:  # pylint: disable=broad-except
      reply = ("error", f"{type(e).__name__}: {str(e).strip().splitlines()[0] if str(e).strip() else ''}")
    pickle.dump(reply, replies)
    replies.flush()
  env.close()


def main(argv) -> None:
  # The replies keep the real stdout; anything else printed goes to stderr.
  replies = os.fdopen(os.dup(1), "wb")
  os.dup2(2, 1)
  serve(argv[1], int(argv[2]), sys.stdin.buffer, replies)


if __name__ == "__main__":
  main(sys.argv)
