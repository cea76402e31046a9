"""Learning test: the GA3C machinery with an MLP solves CartPole via GymEnv."""

import tensorflow as tf

from tfrl import run_loop
from tfrl.envs import EnvProtocol
from tfrl.ga3c import GA3CConfig, LearnerConfig
from tfrl.ga3c import system

MAX_FRAMES = 250_000


def _train(seed, logdir):
  config = GA3CConfig(
      protocol=EnvProtocol(env="CartPole-v1"), seed=seed, agents=8, max_agents=8,
      predictors=1, trainers=1, t_max=5, learning_rate=3e-3,
      learner=LearnerConfig(loss_reduction="mean", entropy_beta=0.01), rmsprop_epsilon=1e-5,
      hidden_sizes=(64, 64), score_window=20, target_score=195.0,
      max_frames=MAX_FRAMES, logdir=logdir, checkpoint_every=0, stats_every=10)
  return run_loop.run(system.build(config))


class CartPoleLearningTest(tf.test.TestCase):
  test_session = None

  def test_reaches_195_within_bounded_frames(self):
    # The threads race, so a seed does not fix a run: runs usually stop at
    # 195 after 11-53k frames (38 of 38 on the Zen 3 VM, some next to two
    # busy loops), but CI once saw a run miss it within the budget. A second
    # run with another seed gets the chance a single run has.
    summaries = []
    for seed in (1, 2):
      summary = _train(seed, self.get_temp_dir() + f"/seed{seed}")
      summaries.append(summary)
      if summary["stop_reason"] == "target_score":
        break
    # The score that stopped the run; episodes that end during shutdown
    # still enter the final `rolling_score`.
    self.assertEqual(summary["stop_reason"], "target_score", str(summaries))
    self.assertGreaterEqual(summary["stop_rolling_score"], 195.0, str(summaries))
    self.assertEqual(summary["scores_seen"], 20)
    self.assertLess(summary["frames"], MAX_FRAMES + 10_000)


if __name__ == "__main__":
  tf.test.main()
