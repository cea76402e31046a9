"""Game names and gymnasium ids."""

from absl.testing import parameterized

from tfrl.envs import game_ids


class GameIdsTest(parameterized.TestCase):

  @parameterized.parameters(
      ("Pong", "pong", None),
      ("pong", "pong", None),
      ("space_invaders", "space_invaders", None),
      ("SpaceInvaders", "space_invaders", None),
      ("PongNoFrameskip-v4", "pong", 0.0),
      ("BreakoutDeterministic-v4", "breakout", 0.0),
      ("MontezumaRevenge-v4", "montezuma_revenge", 0.0),
      ("ALE/Pong-v5", "pong", 0.25),
  )
  def test_parse(self, game, rom_id, sticky):
    protocol = game_ids.parse_game(game)
    self.assertEqual(protocol.rom_id, rom_id)
    self.assertEqual(protocol.repeat_action_probability, sticky)

  @parameterized.parameters("", "Pong!", "ALE/", 3)
  def test_rejects(self, game):
    with self.assertRaisesRegex(ValueError, "game"):
      game_ids.parse_game(game)


if __name__ == "__main__":
  parameterized.absltest.main()
