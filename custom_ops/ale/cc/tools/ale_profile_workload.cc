// The training run of ALE's profile-guided build (setup.py, build_ale).
//
// Plays uniformly random actions on each given ROM for a number of frames,
// reading the grey screen on the last two frames of every 4, as the op env's
// frame skip + max-pool does, so that the instrumented emulator records the
// branches and call counts of the op's hot path. Prints one line per game.
//
//   ale_profile_workload FRAMES ROM [ROM ...]
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <random>
#include <vector>

#include "ale/ale_interface.hpp"
#include "ale/common/Log.hpp"

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s FRAMES ROM [ROM ...]\n", argv[0]);
    return 2;
  }
  const long frames = std::atol(argv[1]);
  if (frames <= 0) {
    std::fprintf(stderr, "FRAMES must be a positive integer, got %s\n", argv[1]);
    return 2;
  }
  ale::Logger::setMode(ale::Logger::Error);
  std::vector<unsigned char> screen;
  for (int g = 2; g < argc; ++g) {
    ale::ALEInterface ale;
    ale.setInt("random_seed", g);
    ale.setFloat("repeat_action_probability", 0.0f);
    try {
      ale.loadROM(argv[g]);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "cannot load ROM %s: %s\n", argv[g], e.what());
      return 1;
    }
    const ale::ActionVect actions = ale.getMinimalActionSet();
    screen.resize(ale.getScreen().height() * ale.getScreen().width());
    std::mt19937 rng(g);
    ale::Action action = actions[0];
    const auto start = std::chrono::steady_clock::now();
    for (long f = 0; f < frames; ++f) {
      if (f % 4 == 0) action = actions[rng() % actions.size()];
      ale.act(action);
      if (f % 4 >= 2) ale.getScreenGrayscale(screen);
      if (ale.game_over()) ale.reset_game();
    }
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::printf("%s: %ld frames, %.0f frames/s (instrumented)\n", argv[g], frames,
                frames / seconds);
  }
  return 0;
}
