// A batch of Atari emulators (ALE) with DQN-style preprocessing.
//
// Each slot owns one ale::ALEInterface, its random generator and a stack of
// preprocessed frames. Slots are independent, so different slots may be
// stepped from different threads at once; each slot has its own mutex. A
// step's temporaries (screens, resize passes) are per thread, not per slot.
#ifndef TFRL_CUSTOM_OPS_CC_KERNELS_ALE_BATCH_H_
#define TFRL_CUSTOM_OPS_CC_KERNELS_ALE_BATCH_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <vector>

namespace ale {
class ALEInterface;
}  // namespace ale

namespace tfrl {

struct AleBatchConfig {
  std::string rom_path;
  int num_envs = 1;
  int frame_skip = 4;
  bool max_pool = true;
  bool grayscale = true;
  bool resize = true;  // false keeps the native 210x160 screen.
  int height = 84;
  int width = 84;
  int stack = 4;
  int noop_max = 30;
  bool fire_reset = true;
  float repeat_action_probability = 0.0f;
  bool full_action_space = false;
  bool episodic_life = false;
  int64_t max_episode_frames = 108000;  // 0 means no cap.
  // Steps after which an episode is truncated, counted from its first step
  // (its no-op and FIRE start not counted, as gymnasium's TimeLimit); 0: none.
  int64_t max_episode_steps = 0;
  int64_t seed = 0;
};

// Seed of the emulator in `slot`; the Python side uses the same formula to
// build reference emulators in tests.
int SlotSeed(int64_t seed, int slot);

// Precomputed weights of an area-averaging resize along one axis: each output
// pixel is a weighted sum over the source pixels it overlaps. Every output
// index has the same number of taps (zero weights pad the shorter ones), so
// the inner loops have a fixed trip count.
struct AreaWeights {
  int taps = 0;                   // Source indices per output index.
  std::vector<int> begin;         // First source index of each output index.
  std::vector<float> weights;     // [dst][taps].
  std::vector<float> by_tap;      // The same, transposed: [taps][dst].
  static AreaWeights Make(int src, int dst);
};

// The steps of the observation pipeline that have a SIMD build chosen at run
// time (the widest the CPU runs; TFRL_ALE_NO_SIMD set, any value, forces the
// portable ones), in the order AleKernelInfo reports them.
enum class ObsPath : int {
  kGreyAvx512Vbmi = 0,  // palette to grey levels (and max-pool), 64 pixels a time
  kGreyPortable,
  kResizeAvx2,          // the two area-resize passes
  kResizePortable,
  kCount
};
const char* ObsPathName(ObsPath path);
// Whether the path ran in this process.
bool ObsPathRan(ObsPath path);

struct StepOutput {
  float reward = 0.0f;
  bool terminated = false;  // Game over, or a life lost with episodic_life.
  bool truncated = false;   // The episode reached max_episode_frames or _steps.
  bool game_over = false;   // The game ended or was truncated.
};

class AleBatch {
 public:
  // Creates the emulators; returns an empty string or the reason it failed.
  static std::string Create(const AleBatchConfig& config,
                            std::unique_ptr<AleBatch>* batch);
  ~AleBatch();

  const AleBatchConfig& config() const { return config_; }
  int num_envs() const { return config_.num_envs; }
  int channels() const { return config_.grayscale ? 1 : 3; }
  int out_height() const { return out_height_; }
  int out_width() const { return out_width_; }
  // Bytes of one observation (all stacked frames of one slot).
  int64_t observation_size() const {
    return int64_t{out_height_} * out_width_ * channels() * config_.stack;
  }
  const std::vector<int>& action_set() const { return action_set_; }
  bool needs_reset(int slot) const;
  bool has_observation(int slot) const;

  // The following run on one slot; callers validate indices and actions
  // first. They return an empty string or an error message.
  // With only_played, a slot still at the start of a game it has not
  // stepped in (just reset, or auto-reset at the end of its last game) is
  // left as it is. With a seed >= 0 the slot's random streams (no-ops, sticky
  // actions, the emulator's power-on RAM) are re-seeded first, so the game
  // depends on the seed alone; such a reset always happens.
  std::string Reset(int slot, bool only_played = false, int64_t seed = -1);
  // With auto_reset, a finished slot starts a new game at once; without, it
  // keeps its last observation and needs Reset before the next Step.
  std::string Step(int slot, int action_index, bool auto_reset, StepOutput* out);
  // Writes the stacked observation, oldest frame first on the channel axis.
  void Observe(int slot, uint8_t* out) const;

 private:
  struct Slot;
  struct Scratch;
  explicit AleBatch(const AleBatchConfig& config);
  // The calling thread's scratch, sized for this batch.
  Scratch* ThreadScratch() const;
  // The current screen (grey or RGB) into `native`.
  void GrabScreen(Slot* slot, std::vector<uint8_t>* native) const;
  // Keeps the current screen for the max-pool of the step's last two frames.
  void KeepBeforeScreen(Slot* slot, Scratch* s) const;
  // s->last = max(current screen, kept screen), pixel by pixel.
  void GrabMaxPooled(Slot* slot, Scratch* s) const;
  // Resizes s->last into s->frame (or copies it when not resizing).
  void Preprocess(Scratch* s) const;
  // Appends `frame` to the slot's interleaved stack; `fill` repeats it
  // into every position (a new episode).
  void PushFrame(Slot* slot, const uint8_t* frame, bool fill) const;
  std::string ResetLocked(Slot* slot);
  void SeedLocked(Slot* slot, int64_t seed) const;

  AleBatchConfig config_;
  int native_height_ = 0;
  int native_width_ = 0;
  int out_height_ = 0;
  int out_width_ = 0;
  AreaWeights rows_;
  AreaWeights cols_;
  uint8_t gray_[256] = {};       // Grey level of each palette index.
  std::vector<int> action_set_;  // ALE action ids, indexed by agent action.
  bool fire_applies_ = false;
  std::vector<std::unique_ptr<Slot>> slots_;
};

}  // namespace tfrl

#endif  // TFRL_CUSTOM_OPS_CC_KERNELS_ALE_BATCH_H_
