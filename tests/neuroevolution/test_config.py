"""The flags of tfrl.ga / tfrl.es / tfrl.random_search build one typed config."""

from absl import flags
from absl.testing import absltest

from tfrl import es
from tfrl import flagconfig
from tfrl import ga
from tfrl.envs import EnvProtocol
from tfrl.es import virtual_batch_norm as vbn
from tfrl.neuroevolution import cli as ne_cli
from tfrl.neuroevolution import runner
from tfrl.neuroevolution import settings
from tfrl.ops import reference


def _config(algorithm_cls, *args, exclude=(), **overrides):
  fv = flags.FlagValues()
  ne_cli.define_flags(algorithm_cls, fv, exclude=exclude)
  fv(["prog", *args])
  algorithm = flagconfig.build(algorithm_cls, fv=fv, exclude=exclude, **overrides)
  return ne_cli.config_from_flags(algorithm, fv)


class ConfigTest(absltest.TestCase):

  def test_settings_name_the_dtypes_the_population_ops_take(self):
    # settings (free of TensorFlow, for the flags) writes them out; the ops own them.
    self.assertEqual(settings.CONV_INPUT_DTYPES, reference.CONV_INPUT_DTYPES)

  def test_defaults_and_parts(self):
    config = _config(ga.GAConfig, "--population=8", "--truncation=20", "--seed=3",
                     "--max_episode_frames=2000", "--num_envs=4", "--arch=small")
    self.assertEqual(config.env, EnvProtocol(game="pong", repeat_action_probability=0.0,
                                             max_episode_frames=2000))
    self.assertEqual((config.algorithm.population, config.algorithm.seed), (8, 3))
    self.assertEqual(config.algorithm.truncation, 8)  # the whole population
    self.assertEqual((config.evaluator.num_envs, config.network.arch), (4, "small"))
    self.assertFalse(config.uses_ray)
    self.assertEqual(config.cache_size(), 8 + 5 + 2)
    self.assertEqual(runner.run_config(config).identity,
                     {**config.env.identity(), "kernel_isa": "auto"})

  def test_env_replaces_the_default_game(self):
    config = _config(es.ESConfig, "--env=CartPole-v1", "--population=4")
    self.assertEqual(config.env, EnvProtocol(env="CartPole-v1"))
    self.assertEqual(config.cache_size(), 2)

  def test_random_search_has_no_selection(self):
    config = _config(ga.GAConfig, "--population=8", exclude=ga.SELECTION_FIELDS,
                     random_search=True)
    self.assertEqual((config.algorithm.truncation, config.algorithm.random_search), (1, True))
    self.assertEqual(config.cache_size(), 5 + 2)

  def test_each_part_checks_its_values(self):
    for cls, args, message in (
        (es.ESConfig, ["--population=7"], "must be even"),
        (ga.GAConfig, ["--population=1"], "population must be >= 2"),
        (ga.GAConfig, ["--refresh_steps=0"], "--refresh_steps must be >= 1"),
        (ga.GAConfig, ["--inference=incremental", "--weight_dtype=bfloat16",
                       "--conv_input_dtype=bfloat16"], "--inference=incremental needs"),
        (ga.GAConfig, ["--ray_address=local", "--ray_workers=0"], "--ray_workers must be"),
        (ga.GAConfig, ["--frame_skip=0"], "--frame_skip must be an int >= 1"),
        (ga.GAConfig, ["--game=breakout", "--env=CartPole-v1"], "exactly one of --game"),
    ):
      with self.subTest(args=args), self.assertRaisesRegex(ValueError, message):
        _config(cls, *args)

  def test_virtual_batch_norm_needs_the_local_evaluator(self):
    with self.assertRaisesRegex(ValueError, "not supported with --ray_address"):
      _config(es.ESConfig, "--ray_address=local", vbn=vbn.VBNConfig())
    with self.assertRaisesRegex(ValueError, "must be a GAConfig or ESConfig"):
      settings.NeuroevolutionConfig()


if __name__ == "__main__":
  absltest.main()
