#include "ale_batch.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <exception>
#include <filesystem>

#include "ale/ale_interface.hpp"
#include "ale/common/Log.hpp"

namespace tfrl {

struct AleBatch::Slot {
  std::unique_ptr<ale::ALEInterface> ale;
  std::mt19937 rng;
  std::vector<uint8_t> last;    // Native screen after the last frame.
  std::vector<uint8_t> before;  // Native screen one frame earlier.
  std::vector<uint8_t> frames;  // `stack` preprocessed frames, a ring.
  int newest = 0;               // Ring index of the newest frame.
  int lives = 0;
  bool needs_reset = true;
  bool has_observation = false;
  mutable std::mutex mu;
};

int SlotSeed(int64_t seed, int slot) {
  // A fixed affine map keeps seeds distinct per slot and reproducible.
  uint64_t s = static_cast<uint64_t>(seed) * 1000003ULL + static_cast<uint64_t>(slot);
  return static_cast<int>(s & 0x7fffffffULL);
}

AreaWeights AreaWeights::Make(int src, int dst) {
  AreaWeights w;
  const double scale = static_cast<double>(src) / dst;
  for (int i = 0; i < dst; ++i) {
    const double lo = i * scale, hi = (i + 1) * scale;
    const int first = static_cast<int>(std::floor(lo));
    const int last = std::min(src - 1, static_cast<int>(std::ceil(hi) - 1));
    w.begin.push_back(first);
    w.offset.push_back(static_cast<int>(w.weights.size()));
    int n = 0;
    for (int j = first; j <= last; ++j) {
      const double overlap = std::min<double>(hi, j + 1) - std::max<double>(lo, j);
      if (overlap <= 1e-9) continue;
      if (n == 0) w.begin.back() = j;
      w.weights.push_back(static_cast<float>(overlap / scale));
      ++n;
    }
    w.count.push_back(n);
  }
  return w;
}

AleBatch::AleBatch(const AleBatchConfig& config) : config_(config) {}
AleBatch::~AleBatch() = default;

std::string AleBatch::Create(const AleBatchConfig& config,
                             std::unique_ptr<AleBatch>* batch) {
  std::unique_ptr<AleBatch> b(new AleBatch(config));
  ale::Logger::setMode(ale::Logger::Error);
  for (int i = 0; i < config.num_envs; ++i) {
    auto slot = std::make_unique<Slot>();
    const int seed = SlotSeed(config.seed, i);
    slot->rng.seed(static_cast<uint32_t>(seed));
    try {
      slot->ale = std::make_unique<ale::ALEInterface>();
      slot->ale->setInt("random_seed", seed);
      slot->ale->setFloat("repeat_action_probability",
                          config.repeat_action_probability);
      slot->ale->setInt("frame_skip", 1);  // Frame skip is ours, below.
      slot->ale->setInt("max_num_frames_per_episode", 0);
      slot->ale->loadROM(config.rom_path);
    } catch (const std::exception& e) {
      return std::string("ALE could not load ROM '") + config.rom_path +
             "': " + e.what();
    }
    b->slots_.push_back(std::move(slot));
  }
  ale::ALEInterface& first = *b->slots_[0]->ale;
  b->native_height_ = static_cast<int>(first.getScreen().height());
  b->native_width_ = static_cast<int>(first.getScreen().width());
  b->out_height_ = config.resize ? config.height : b->native_height_;
  b->out_width_ = config.resize ? config.width : b->native_width_;
  b->rows_ = AreaWeights::Make(b->native_height_, b->out_height_);
  b->cols_ = AreaWeights::Make(b->native_width_, b->out_width_);
  ale::ActionVect actions = config.full_action_space
                                ? first.getLegalActionSet()
                                : first.getMinimalActionSet();
  for (ale::Action a : actions) b->action_set_.push_back(static_cast<int>(a));
  // As in the DQN evaluation code: games whose second action is FIRE need it
  // pressed to start.
  const ale::ActionVect minimal = first.getMinimalActionSet();
  b->fire_applies_ = minimal.size() >= 3 && minimal[1] == ale::PLAYER_A_FIRE;
  const size_t native_bytes =
      static_cast<size_t>(b->native_height_) * b->native_width_ * b->channels();
  const size_t frame_bytes =
      static_cast<size_t>(b->out_height_) * b->out_width_ * b->channels();
  for (auto& slot : b->slots_) {
    slot->last.resize(native_bytes);
    slot->before.resize(native_bytes);
    slot->frames.assign(frame_bytes * config.stack, 0);
  }
  *batch = std::move(b);
  return "";
}

bool AleBatch::needs_reset(int slot) const {
  std::lock_guard<std::mutex> lock(slots_[slot]->mu);
  return slots_[slot]->needs_reset;
}

bool AleBatch::has_observation(int slot) const {
  std::lock_guard<std::mutex> lock(slots_[slot]->mu);
  return slots_[slot]->has_observation;
}

void AleBatch::GrabScreen(Slot* slot, std::vector<uint8_t>* native) const {
  if (config_.grayscale) {
    slot->ale->getScreenGrayscale(*native);
  } else {
    slot->ale->getScreenRGB(*native);
  }
}

void AleBatch::Preprocess(const std::vector<uint8_t>& native, uint8_t* out) const {
  const int c = channels();
  if (!config_.resize) {
    std::memcpy(out, native.data(), native.size());
    return;
  }
  // Separable area average: columns first into floats, then rows.
  const int w_in = native_width_, w_out = out_width_, h_out = out_height_;
  std::vector<float> tmp(static_cast<size_t>(native_height_) * w_out * c);
  for (int r = 0; r < native_height_; ++r) {
    const uint8_t* src = native.data() + static_cast<size_t>(r) * w_in * c;
    float* dst = tmp.data() + static_cast<size_t>(r) * w_out * c;
    for (int x = 0; x < w_out; ++x) {
      const float* wt = cols_.weights.data() + cols_.offset[x];
      for (int ch = 0; ch < c; ++ch) {
        float acc = 0.0f;
        for (int k = 0; k < cols_.count[x]; ++k) {
          acc += wt[k] * src[(cols_.begin[x] + k) * c + ch];
        }
        dst[x * c + ch] = acc;
      }
    }
  }
  const int row_len = w_out * c;
  std::vector<float> acc(row_len);
  for (int y = 0; y < h_out; ++y) {
    std::fill(acc.begin(), acc.end(), 0.0f);
    const float* wt = rows_.weights.data() + rows_.offset[y];
    for (int k = 0; k < rows_.count[y]; ++k) {
      const float* src = tmp.data() + static_cast<size_t>(rows_.begin[y] + k) * row_len;
      for (int i = 0; i < row_len; ++i) acc[i] += wt[k] * src[i];
    }
    uint8_t* dst = out + static_cast<size_t>(y) * row_len;
    for (int i = 0; i < row_len; ++i) {
      dst[i] = static_cast<uint8_t>(std::min(255L, std::max(0L, std::lrint(acc[i]))));
    }
  }
}

void AleBatch::PushFrame(Slot* slot, const std::vector<uint8_t>& native, bool fill) {
  const size_t frame_bytes =
      static_cast<size_t>(out_height_) * out_width_ * channels();
  slot->newest = (slot->newest + 1) % config_.stack;
  uint8_t* dst = slot->frames.data() + slot->newest * frame_bytes;
  Preprocess(native, dst);
  if (fill) {  // A new episode starts with the first frame repeated.
    for (int s = 0; s < config_.stack; ++s) {
      if (s != slot->newest) {
        std::memcpy(slot->frames.data() + s * frame_bytes, dst, frame_bytes);
      }
    }
  }
}

std::string AleBatch::ResetLocked(Slot* slot) {
  try {
    ale::ALEInterface& a = *slot->ale;
    a.reset_game();
    if (config_.noop_max > 0) {
      std::uniform_int_distribution<int> noops(1, config_.noop_max);
      const int n = noops(slot->rng);
      for (int i = 0; i < n; ++i) {
        a.act(ale::PLAYER_A_NOOP);
        if (a.game_over(false)) a.reset_game();
      }
    }
    if (config_.fire_reset && fire_applies_) {
      for (int i = 0; i < config_.frame_skip; ++i) a.act(ale::PLAYER_A_FIRE);
      if (a.game_over(false)) a.reset_game();
    }
    GrabScreen(slot, &slot->last);
    PushFrame(slot, slot->last, /*fill=*/true);
    slot->lives = a.lives();
    slot->needs_reset = false;
    slot->has_observation = true;
  } catch (const std::exception& e) {
    slot->needs_reset = true;
    return std::string("ALE failed to reset: ") + e.what();
  }
  return "";
}

std::string AleBatch::Reset(int slot_index) {
  Slot* slot = slots_[slot_index].get();
  std::lock_guard<std::mutex> lock(slot->mu);
  return ResetLocked(slot);
}

std::string AleBatch::Step(int slot_index, int action_index, bool auto_reset,
                           StepOutput* out) {
  Slot* slot = slots_[slot_index].get();
  std::lock_guard<std::mutex> lock(slot->mu);
  if (slot->needs_reset) {
    return "env slot " + std::to_string(slot_index) +
           " needs a reset before it can step: call reset on it first";
  }
  ale::ALEInterface& a = *slot->ale;
  const ale::Action action = static_cast<ale::Action>(action_set_[action_index]);
  *out = StepOutput();
  bool game_over = false;
  bool have_before = false;
  try {
    for (int f = 0; f < config_.frame_skip; ++f) {
      out->reward += static_cast<float>(a.act(action));
      if (a.game_over(false)) {
        game_over = true;
        break;
      }
      if (config_.max_pool && f == config_.frame_skip - 2) {
        GrabScreen(slot, &slot->before);
        have_before = true;
      }
    }
    GrabScreen(slot, &slot->last);
    if (have_before) {  // Max over the last two frames removes flicker.
      for (size_t i = 0; i < slot->last.size(); ++i) {
        slot->last[i] = std::max(slot->last[i], slot->before[i]);
      }
    }
    const int lives = a.lives();
    out->terminated = game_over;
    out->truncated = !game_over && config_.max_episode_frames > 0 &&
                     a.getEpisodeFrameNumber() >= config_.max_episode_frames;
    if (config_.episodic_life && !game_over && lives < slot->lives) {
      out->terminated = true;
    }
    slot->lives = lives;
  } catch (const std::exception& e) {
    slot->needs_reset = true;
    return std::string("ALE failed to step: ") + e.what();
  }
  if (game_over || out->truncated) {
    out->game_over = true;
    if (auto_reset) return ResetLocked(slot);
    slot->needs_reset = true;
  }
  PushFrame(slot, slot->last, /*fill=*/false);
  return "";
}

void AleBatch::Observe(int slot_index, uint8_t* out) const {
  const Slot* slot = slots_[slot_index].get();
  std::lock_guard<std::mutex> lock(slot->mu);
  const int c = channels(), stack = config_.stack;
  const size_t pixels = static_cast<size_t>(out_height_) * out_width_;
  const size_t frame_bytes = pixels * c;
  for (int s = 0; s < stack; ++s) {
    const int ring = (slot->newest + 1 + s) % stack;  // Oldest first.
    const uint8_t* src = slot->frames.data() + ring * frame_bytes;
    if (stack == 1) {
      std::memcpy(out, src, frame_bytes);
      return;
    }
    for (size_t p = 0; p < pixels; ++p) {
      for (int ch = 0; ch < c; ++ch) {
        out[p * stack * c + s * c + ch] = src[p * c + ch];
      }
    }
  }
}

}  // namespace tfrl
