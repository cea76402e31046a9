#include "ale_batch.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <filesystem>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define TFRL_X86 1
#endif

#include "ale/ale_interface.hpp"
#include "ale/common/ColourPalette.hpp"
#include "ale/common/Log.hpp"
#include "ale/emucore/Console.hxx"
#include "ale/emucore/OSystem.hxx"
#include "ale/emucore/System.hxx"

namespace tfrl {

struct AleBatch::Slot {
  std::unique_ptr<ale::ALEInterface> ale;
  std::mt19937 rng;
  // The observation as Observe returns it: [pixel][stack][channel], oldest
  // frame first, so that Observe is one copy; PushFrame shifts it.
  std::vector<uint8_t> stacked;
  int lives = 0;
  bool needs_reset = true;
  bool has_observation = false;
  bool played = false;  // stepped since its last reset
  int64_t steps = 0;     // steps since its last reset, for max_episode_steps
  mutable std::mutex mu;
};

// What a step or reset needs only while it runs: one set per thread, not
// per slot (128 KB a slot with 84x84 grey frames), so that a batch's slots
// keep less in the cache between their steps.
struct AleBatch::Scratch {
  std::vector<uint8_t> last;    // Native screen after the last frame.
  // Screen one frame before the last: grey levels (or RGB), or with
  // grayscale the raw palette indices, converted in the max-pool pass.
  std::vector<uint8_t> before;
  std::vector<float> rows;      // The vertical resize pass.
  std::vector<float> acc;       // One row of the horizontal pass.
  std::vector<uint8_t> frame;   // The newest preprocessed frame.
};

AleBatch::Scratch* AleBatch::ThreadScratch() const {
  thread_local Scratch scratch;  // sized for the batch that uses it now
  const size_t c = static_cast<size_t>(channels());
  scratch.last.resize(static_cast<size_t>(native_height_) * native_width_ * c);
  scratch.before.resize(scratch.last.size());
  scratch.rows.resize(static_cast<size_t>(out_height_) * native_width_ * c);
  scratch.acc.resize(static_cast<size_t>(out_width_) * c);
  scratch.frame.resize(static_cast<size_t>(out_height_) * out_width_ * c);
  return &scratch;
}

int SlotSeed(int64_t seed, int slot) {
  // A fixed affine map keeps seeds distinct per slot and reproducible.
  uint64_t s = static_cast<uint64_t>(seed) * 1000003ULL + static_cast<uint64_t>(slot);
  return static_cast<int>(s & 0x7fffffffULL);
}

AreaWeights AreaWeights::Make(int src, int dst) {
  AreaWeights w;
  const double scale = static_cast<double>(src) / dst;
  std::vector<std::vector<float>> taps(dst);
  for (int i = 0; i < dst; ++i) {
    const double lo = i * scale, hi = (i + 1) * scale;
    const int first = static_cast<int>(std::floor(lo));
    const int last = std::min(src - 1, static_cast<int>(std::ceil(hi) - 1));
    w.begin.push_back(first);
    for (int j = first; j <= last; ++j) {
      const double overlap = std::min<double>(hi, j + 1) - std::max<double>(lo, j);
      if (overlap <= 1e-9) {
        if (taps[i].empty()) w.begin.back() = j + 1;
        continue;
      }
      taps[i].push_back(static_cast<float>(overlap / scale));
    }
    w.taps = std::max<int>(w.taps, taps[i].size());
  }
  for (int i = 0; i < dst; ++i) {
    // Pad with zero weights; shift the window left where it would run past
    // the end of the source (the leading taps then carry zero weight).
    int pad_front = std::max(0, w.begin[i] + w.taps - src);
    w.begin[i] -= pad_front;
    std::vector<float> row(w.taps, 0.0f);
    for (size_t k = 0; k < taps[i].size(); ++k) row[pad_front + k] = taps[i][k];
    w.weights.insert(w.weights.end(), row.begin(), row.end());
  }
  w.by_tap.resize(w.weights.size());
  for (int i = 0; i < dst; ++i) {
    for (int k = 0; k < w.taps; ++k) w.by_tap[k * dst + i] = w.weights[i * w.taps + k];
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
  // The palette's grey levels, so that screens are converted in our own
  // fused passes (identical to ALE's getScreenGrayscale).
  ale::ColourPalette& palette = first.theOSystem->colourPalette();
  for (int i = 0; i < 256; ++i) b->gray_[i] = palette.getGrayscale(i);
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
  const size_t frame_bytes =
      static_cast<size_t>(b->out_height_) * b->out_width_ * b->channels();
  for (auto& slot : b->slots_) {
    slot->stacked.assign(frame_bytes * config.stack, 0);
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

namespace {

std::atomic<bool> g_path_ran[static_cast<int>(ObsPath::kCount)];

void MarkRan(ObsPath path) {
  std::atomic<bool>& ran = g_path_ran[static_cast<int>(path)];
  if (!ran.load(std::memory_order_relaxed)) ran.store(true, std::memory_order_relaxed);
}

// TFRL_ALE_NO_SIMD (any value) forces the portable builds (tests compare
// the two).
bool SimdAllowed() {
  static const bool allowed = std::getenv("TFRL_ALE_NO_SIMD") == nullptr;
  return allowed;
}

// Palette indices to grey levels through `table`; with `before`, the max of
// the two screens' grey levels. The AVX-512 VBMI version looks up 64 pixels
// at a time (two 128-byte halves of the table, picked by the index's top bit).
void GreyLevelsScalar(const uint8_t* table, const uint8_t* __restrict raw,
                      const uint8_t* __restrict before, uint8_t* __restrict out, size_t n,
                      size_t from) {
  if (before == nullptr) {
    for (size_t i = from; i < n; ++i) out[i] = table[raw[i]];
  } else {
    for (size_t i = from; i < n; ++i) out[i] = std::max(table[raw[i]], table[before[i]]);
  }
}

#ifdef TFRL_X86
#define TFRL_VBMI __attribute__((target("avx512f,avx512bw,avx512vbmi")))

TFRL_VBMI inline __m512i LookupVbmi(const __m512i table[4], __m512i idx) {
  return _mm512_mask_blend_epi8(_mm512_movepi8_mask(idx),
                                _mm512_permutex2var_epi8(table[0], idx, table[1]),
                                _mm512_permutex2var_epi8(table[2], idx, table[3]));
}

TFRL_VBMI void GreyLevelsVbmi(const uint8_t* table, const uint8_t* raw, const uint8_t* before,
                              uint8_t* out, size_t n) {
  const __m512i t[4] = {_mm512_loadu_si512(table), _mm512_loadu_si512(table + 64),
                        _mm512_loadu_si512(table + 128), _mm512_loadu_si512(table + 192)};
  size_t i = 0;
  for (; i + 64 <= n; i += 64) {
    __m512i grey = LookupVbmi(t, _mm512_loadu_si512(raw + i));
    if (before != nullptr) {
      grey = _mm512_max_epu8(grey, LookupVbmi(t, _mm512_loadu_si512(before + i)));
    }
    _mm512_storeu_si512(out + i, grey);
  }
  GreyLevelsScalar(table, raw, before, out, n, i);
}

bool HasVbmi() {
  static const bool has = __builtin_cpu_supports("avx512vbmi") &&
                          __builtin_cpu_supports("avx512bw") && SimdAllowed();
  return has;
}
#endif

void GreyLevels(const uint8_t* table, const uint8_t* raw, const uint8_t* before, uint8_t* out,
                size_t n) {
#ifdef TFRL_X86
  if (HasVbmi()) {
    MarkRan(ObsPath::kGreyAvx512Vbmi);
    return GreyLevelsVbmi(table, raw, before, out, n);
  }
#endif
  MarkRan(ObsPath::kGreyPortable);
  GreyLevelsScalar(table, raw, before, out, n, 0);
}

}  // namespace

const char* ObsPathName(ObsPath path) {
  switch (path) {
    case ObsPath::kGreyAvx512Vbmi: return "grey_levels_avx512_vbmi";
    case ObsPath::kGreyPortable: return "grey_levels_portable";
    case ObsPath::kResizeAvx2: return "resize_avx2";
    case ObsPath::kResizePortable: return "resize_portable";
    default: return "unknown";
  }
}

bool ObsPathRan(ObsPath path) {
  return g_path_ran[static_cast<int>(path)].load(std::memory_order_relaxed);
}

void AleBatch::GrabScreen(Slot* slot, std::vector<uint8_t>* native) const {
  if (config_.grayscale) {
    GreyLevels(gray_, slot->ale->getScreen().getArray(), nullptr, native->data(),
               native->size());
  } else {
    slot->ale->getScreenRGB(*native);
  }
}

void AleBatch::GrabMaxPooled(Slot* slot, Scratch* s) const {
  if (config_.grayscale) {  // One pass: palette to grey and max together.
    GreyLevels(gray_, slot->ale->getScreen().getArray(), s->before.data(), s->last.data(),
               s->last.size());
    return;
  }
  slot->ale->getScreenRGB(s->last);
  uint8_t* __restrict last = s->last.data();
  const uint8_t* __restrict before = s->before.data();
  const size_t n = s->last.size();
  for (size_t i = 0; i < n; ++i) last[i] = std::max(last[i], before[i]);
}

void AleBatch::KeepBeforeScreen(Slot* slot, Scratch* s) const {
  if (config_.grayscale) {
    std::memcpy(s->before.data(), slot->ale->getScreen().getArray(), s->before.size());
  } else {
    slot->ale->getScreenRGB(s->before);
  }
}

namespace {

// The two passes of the area resize. Built for AVX2 (with gathers) and for
// the baseline ISA; Preprocess picks the one the CPU runs.
#ifdef TFRL_X86
#define TFRL_ALE_INLINE inline __attribute__((always_inline))
#else
#define TFRL_ALE_INLINE inline
#endif

// dst[y][i] = sum_k w[y][k] * src[begin[y] + k][i] over whole rows.
TFRL_ALE_INLINE void ResizeRowsImpl(const uint8_t* __restrict src, int row_len,
                                    const AreaWeights& w, int out_rows,
                                    float* __restrict dst) {
  for (int y = 0; y < out_rows; ++y) {
    float* __restrict d = dst + static_cast<size_t>(y) * row_len;
    const float* wt = w.weights.data() + static_cast<size_t>(y) * w.taps;
    const uint8_t* s = src + static_cast<size_t>(w.begin[y]) * row_len;
    for (int i = 0; i < row_len; ++i) d[i] = wt[0] * s[i];
    for (int k = 1; k < w.taps; ++k) {
      const uint8_t* sk = s + static_cast<size_t>(k) * row_len;
      const float wk = wt[k];
      for (int i = 0; i < row_len; ++i) d[i] += wk * sk[i];
    }
  }
}

// For each row: out[x][ch] = round(sum_k w[x][k] * src[begin[x] + k][ch]),
// taps outermost so that the loop over x vectorises (as gathers).
TFRL_ALE_INLINE void ResizeColumnsImpl(const float* __restrict src, int rows, int in_width,
                                       int channels, const AreaWeights& w, int out_width,
                                       float* __restrict acc, uint8_t* __restrict out) {
  const int n = out_width * channels;
  const int* begin = w.begin.data();
  for (int y = 0; y < rows; ++y) {
    const float* row = src + static_cast<size_t>(y) * in_width * channels;
    for (int i = 0; i < n; ++i) acc[i] = 0.0f;
    for (int k = 0; k < w.taps; ++k) {
      const float* wk = w.by_tap.data() + static_cast<size_t>(k) * out_width;
      if (channels == 1) {
        for (int x = 0; x < out_width; ++x) acc[x] += wk[x] * row[begin[x] + k];
      } else {
        for (int x = 0; x < out_width; ++x) {
          for (int ch = 0; ch < channels; ++ch) {
            acc[x * channels + ch] += wk[x] * row[(begin[x] + k) * channels + ch];
          }
        }
      }
    }
    // Weights sum to one and pixels are >= 0: round half up, clamp high.
    uint8_t* __restrict o = out + static_cast<size_t>(y) * n;
    for (int i = 0; i < n; ++i) o[i] = static_cast<uint8_t>(std::min(acc[i] + 0.5f, 255.0f));
  }
}

void ResizePortable(const uint8_t* __restrict native, int row_len, const AreaWeights& rows,
                    int out_rows, float* __restrict tmp, int in_width, int channels,
                    const AreaWeights& cols, int out_width, float* __restrict acc,
                    uint8_t* __restrict out) {
  ResizeRowsImpl(native, row_len, rows, out_rows, tmp);
  ResizeColumnsImpl(tmp, out_rows, in_width, channels, cols, out_width, acc, out);
}

#ifdef TFRL_X86
__attribute__((target("avx2"))) void ResizeAvx2(
    const uint8_t* __restrict native, int row_len, const AreaWeights& rows, int out_rows,
    float* __restrict tmp, int in_width, int channels, const AreaWeights& cols, int out_width,
    float* __restrict acc, uint8_t* __restrict out) {
  ResizeRowsImpl(native, row_len, rows, out_rows, tmp);
  ResizeColumnsImpl(tmp, out_rows, in_width, channels, cols, out_width, acc, out);
}

bool HasAvx2() {
  static const bool has = __builtin_cpu_supports("avx2") && SimdAllowed();
  return has;
}
#endif

}  // namespace

void AleBatch::Preprocess(Scratch* s) const {
  const uint8_t* native = s->last.data();
  if (!config_.resize) {
    std::memcpy(s->frame.data(), native, s->frame.size());
    return;
  }
  // Rows first: the vertical pass works on whole contiguous rows, and the
  // scattered horizontal pass then runs on out_height rows, not 210.
  const int c = channels();
#ifdef TFRL_X86
  if (HasAvx2()) {
    MarkRan(ObsPath::kResizeAvx2);
    return ResizeAvx2(native, native_width_ * c, rows_, out_height_, s->rows.data(),
                      native_width_, c, cols_, out_width_, s->acc.data(), s->frame.data());
  }
#endif
  MarkRan(ObsPath::kResizePortable);
  ResizePortable(native, native_width_ * c, rows_, out_height_, s->rows.data(), native_width_,
                 c, cols_, out_width_, s->acc.data(), s->frame.data());
}

void AleBatch::PushFrame(Slot* slot, const uint8_t* __restrict frame, bool fill) const {
  const int c = channels(), stack = config_.stack;
  const size_t pixels = static_cast<size_t>(out_height_) * out_width_;
  uint8_t* __restrict out = slot->stacked.data();
  if (fill) {  // A new episode starts with the first frame repeated.
    for (size_t p = 0; p < pixels; ++p) {
      for (int s = 0; s < stack; ++s) {
        std::memcpy(out + (p * stack + s) * c, frame + p * c, c);
      }
    }
    return;
  }
  constexpr bool kLittleEndian = __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__;
  if (kLittleEndian && stack * c == 4) {
    // The common 4 x grayscale: one 32-bit shift per pixel drops byte 0 (the
    // oldest frame) and puts the new frame in byte 3.
    for (size_t p = 0; p < pixels; ++p) {
      uint32_t v;
      std::memcpy(&v, out + 4 * p, 4);
      v = (v >> 8) | (static_cast<uint32_t>(frame[p]) << 24);
      std::memcpy(out + 4 * p, &v, 4);
    }
    return;
  }
  const size_t group = static_cast<size_t>(stack) * c;
  for (size_t p = 0; p < pixels; ++p) {
    uint8_t* px = out + p * group;
    std::memmove(px, px + c, group - c);
    std::memcpy(px + group - c, frame + p * c, c);
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
    Scratch* s = ThreadScratch();
    GrabScreen(slot, &s->last);
    Preprocess(s);
    PushFrame(slot, s->frame.data(), /*fill=*/true);
    slot->lives = a.lives();
    slot->needs_reset = false;
    slot->has_observation = true;
    slot->played = false;
    slot->steps = 0;
  } catch (const std::exception& e) {
    slot->needs_reset = true;
    return std::string("ALE failed to reset: ") + e.what();
  }
  return "";
}

void AleBatch::SeedLocked(Slot* slot, int64_t seed) const {
  const uint32_t s = static_cast<uint32_t>(seed);
  slot->rng.seed(s);
  ale::ALEInterface& a = *slot->ale;
  a.environment->getEnvironmentRNG().seed(s);
  // The power-on RAM and timer of the next reset come from the system's
  // generator; a different stream from the sticky actions'.
  a.theOSystem->console().system().rng().seed(s ^ 0x5bd1e995u);
}

std::string AleBatch::Reset(int slot_index, bool only_played, int64_t seed) {
  Slot* slot = slots_[slot_index].get();
  std::lock_guard<std::mutex> lock(slot->mu);
  if (seed >= 0) {
    SeedLocked(slot, seed);
    return ResetLocked(slot);
  }
  if (only_played && !slot->needs_reset && !slot->played) return "";
  return ResetLocked(slot);
}

std::string AleBatch::Step(int slot_index, int action_index, bool auto_reset,
                           StepOutput* out) {
  Slot* slot = slots_[slot_index].get();
  std::lock_guard<std::mutex> lock(slot->mu);
  if (slot->needs_reset) {
    return "needs a reset before it can step: call reset on it first";
  }
  ale::ALEInterface& a = *slot->ale;
  const ale::Action action = static_cast<ale::Action>(action_set_[action_index]);
  *out = StepOutput();
  slot->played = true;
  bool game_over = false;
  bool have_before = false;
  Scratch* s = ThreadScratch();
  try {
    for (int f = 0; f < config_.frame_skip; ++f) {
      out->reward += static_cast<float>(a.act(action));
      if (a.game_over(false)) {
        game_over = true;
        break;
      }
      if (config_.max_pool && f == config_.frame_skip - 2) {
        KeepBeforeScreen(slot, s);
        have_before = true;
      }
    }
    if (have_before) {  // Max over the last two frames removes flicker.
      GrabMaxPooled(slot, s);
    } else {
      GrabScreen(slot, &s->last);
    }
    const int lives = a.lives();
    out->terminated = game_over;
    ++slot->steps;
    out->truncated = !game_over && ((config_.max_episode_frames > 0 &&
                                     a.getEpisodeFrameNumber() >= config_.max_episode_frames) ||
                                    (config_.max_episode_steps > 0 &&
                                     slot->steps >= config_.max_episode_steps));
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
  Preprocess(s);
  PushFrame(slot, s->frame.data(), /*fill=*/false);
  return "";
}

void AleBatch::Observe(int slot_index, uint8_t* out) const {
  const Slot* slot = slots_[slot_index].get();
  std::lock_guard<std::mutex> lock(slot->mu);
  std::memcpy(out, slot->stacked.data(), slot->stacked.size());
}

}  // namespace tfrl
