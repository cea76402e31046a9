// Kernels of the ALE ops: the emulator batch lives in a ResourceBase; every
// input is checked before any emulator moves, so bad input changes nothing.
#include <filesystem>
#include <new>
#include <set>
#include <string>
#include <vector>

#include "ale_batch.h"
#include "env_kernels.h"
#include "tensorflow/core/framework/op_kernel.h"
#include "tensorflow/core/framework/resource_mgr.h"
#include "tensorflow/core/framework/tensor.h"
#include "tensorflow/core/platform/threadpool.h"

namespace tensorflow {
namespace {

namespace fs = std::filesystem;

using tfrl::env_kernels::OutputNewResource;
using tfrl::env_kernels::ParallelOverSlots;
using AleEnvResource = tfrl::env_kernels::BatchResource<tfrl::AleBatch>;
using AleSlotsOp = tfrl::env_kernels::SlotsOpKernel<tfrl::AleBatch>;

std::string JoinGames(const std::string& directory) {
  std::set<std::string> games;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(directory, ec)) {
    if (entry.path().extension() == ".bin") games.insert(entry.path().stem().string());
  }
  std::string out;
  for (const auto& g : games) out += (out.empty() ? "" : ", ") + g;
  return out.empty() ? "(none)" : out;
}

bool IsRomId(const std::string& game) {
  if (game.empty()) return false;
  for (char ch : game) {
    if (!((ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') || ch == '_')) return false;
  }
  return true;
}

class AleEnvCreateOp : public OpKernel {
 public:
  static constexpr int64_t kMaxFrameSkip = 1000;
  static constexpr int64_t kMaxStack = 64;
  static constexpr int64_t kMaxNoops = 100000;
  static constexpr int64_t kMaxObservationBytes = int64_t{1} << 33;  // 8 GiB

  explicit AleEnvCreateOp(OpKernelConstruction* ctx) : OpKernel(ctx) {
    int64_t num_envs, frame_skip, height, width, stack, noop_max, max_frames, max_steps, seed;
    OP_REQUIRES_OK(ctx, ctx->GetAttr("game", &game_));
    OP_REQUIRES_OK(ctx, ctx->GetAttr("rom_directory", &rom_directory_));
    OP_REQUIRES_OK(ctx, ctx->GetAttr("num_envs", &num_envs));
    OP_REQUIRES_OK(ctx, ctx->GetAttr("frame_skip", &frame_skip));
    OP_REQUIRES_OK(ctx, ctx->GetAttr("max_pool", &config_.max_pool));
    OP_REQUIRES_OK(ctx, ctx->GetAttr("grayscale", &config_.grayscale));
    OP_REQUIRES_OK(ctx, ctx->GetAttr("resize", &config_.resize));
    OP_REQUIRES_OK(ctx, ctx->GetAttr("height", &height));
    OP_REQUIRES_OK(ctx, ctx->GetAttr("width", &width));
    OP_REQUIRES_OK(ctx, ctx->GetAttr("stack", &stack));
    OP_REQUIRES_OK(ctx, ctx->GetAttr("noop_max", &noop_max));
    OP_REQUIRES_OK(ctx, ctx->GetAttr("fire_reset", &config_.fire_reset));
    OP_REQUIRES_OK(ctx, ctx->GetAttr("repeat_action_probability",
                                     &config_.repeat_action_probability));
    OP_REQUIRES_OK(ctx, ctx->GetAttr("full_action_space", &config_.full_action_space));
    OP_REQUIRES_OK(ctx, ctx->GetAttr("episodic_life", &config_.episodic_life));
    OP_REQUIRES_OK(ctx, ctx->GetAttr("max_episode_frames", &max_frames));
    OP_REQUIRES_OK(ctx, ctx->GetAttr("max_episode_steps", &max_steps));
    OP_REQUIRES_OK(ctx, ctx->GetAttr("seed", &seed));
    OP_REQUIRES(ctx, num_envs <= 4096,
                errors::InvalidArgument("num_envs must be in 1..4096, got ", num_envs));
    OP_REQUIRES(ctx, config_.repeat_action_probability >= 0.0f &&
                         config_.repeat_action_probability <= 1.0f,
                errors::InvalidArgument(
                    "repeat_action_probability must be in [0, 1], got ",
                    config_.repeat_action_probability));
    OP_REQUIRES(ctx, height <= 1024 && width <= 1024,
                errors::InvalidArgument("height and width must be in 1..1024, got ",
                                        height, "x", width));
    // Bounds that keep the emulator's ints (and a step's time) sane.
    OP_REQUIRES(ctx, frame_skip <= kMaxFrameSkip,
                errors::InvalidArgument("frame_skip must be in 1..", kMaxFrameSkip, ", got ",
                                        frame_skip));
    OP_REQUIRES(ctx, stack <= kMaxStack,
                errors::InvalidArgument("stack must be in 1..", kMaxStack, ", got ", stack));
    OP_REQUIRES(ctx, noop_max <= kMaxNoops,
                errors::InvalidArgument("noop_max must be in 0..", kMaxNoops, ", got ",
                                        noop_max));
    // The stacked observations every slot keeps (the screen is 210x160 when
    // not resized).
    const int64_t frame = (config_.resize ? height * width : int64_t{210} * 160) *
                          (config_.grayscale ? 1 : 3);
    const int64_t bytes = num_envs * frame * stack;
    OP_REQUIRES(ctx, bytes <= kMaxObservationBytes,
                errors::InvalidArgument(
                    "the batch's stacked observations would take ", bytes,
                    " bytes (num_envs x height x width x channels x stack = ", num_envs, " x ",
                    config_.resize ? height : 210, " x ", config_.resize ? width : 160, " x ",
                    config_.grayscale ? 1 : 3, " x ", stack, "); at most ",
                    kMaxObservationBytes, " are allowed"));
    config_.num_envs = static_cast<int>(num_envs);
    config_.frame_skip = static_cast<int>(frame_skip);
    config_.height = static_cast<int>(height);
    config_.width = static_cast<int>(width);
    config_.stack = static_cast<int>(stack);
    config_.noop_max = static_cast<int>(noop_max);
    config_.max_episode_frames = max_frames;
    config_.max_episode_steps = max_steps;
    config_.seed = seed;
  }

  void Compute(OpKernelContext* ctx) override {
    OP_REQUIRES(ctx, IsRomId(game_),
                errors::InvalidArgument(
                    "unknown game '", game_, "': a game is an ALE ROM id of lower-case "
                    "letters, digits and '_' (e.g. 'pong'); available games: ",
                    JoinGames(rom_directory_)));
    std::error_code ec;
    OP_REQUIRES(ctx, fs::is_directory(rom_directory_, ec),
                errors::NotFound("ROM directory '", rom_directory_,
                                 "' does not exist; ale-py ships its ROMs in "
                                 "ale_py/roms (pip install ale-py)"));
    tfrl::AleBatchConfig config = config_;
    config.rom_path = (fs::path(rom_directory_) / (game_ + ".bin")).string();
    OP_REQUIRES(ctx, fs::is_regular_file(config.rom_path, ec),
                errors::NotFound("no ROM for game '", game_, "' (looked for ",
                                 config.rom_path, "); available games: ",
                                 JoinGames(rom_directory_)));
    std::unique_ptr<tfrl::AleBatch> batch;
    std::string error;
    try {
      error = tfrl::AleBatch::Create(config, &batch);
    } catch (const std::bad_alloc&) {
      OP_REQUIRES(ctx, false,
                  errors::ResourceExhausted("out of memory making ", config.num_envs,
                                            " emulators of '", game_, "'"));
    }
    OP_REQUIRES(ctx, error.empty(), errors::InvalidArgument(error));
    OP_REQUIRES_OK(ctx, OutputNewResource(ctx, "tfrl_ale_env_",
                                          new AleEnvResource(std::move(batch), "AleEnv",
                                                             config.rom_path)));
  }

 private:
  std::string game_;
  std::string rom_directory_;
  tfrl::AleBatchConfig config_;
};

class AleResetOp : public AleSlotsOp {
 public:
  explicit AleResetOp(OpKernelConstruction* ctx) : AleSlotsOp(ctx) {
    OP_REQUIRES_OK(ctx, ctx->GetAttr("only_played", &only_played_));
  }
  void ComputeSlots(OpKernelContext* ctx, tfrl::AleBatch* batch,
                    const std::vector<int>& indices) override {
    const Tensor& seeds_t = ctx->input(2);
    OP_REQUIRES(ctx, seeds_t.dims() == 1 && (seeds_t.dim_size(0) == 0 ||
                                             seeds_t.dim_size(0) == indices.size()),
                errors::InvalidArgument("seeds must be an empty vector or one seed per "
                                        "index (", indices.size(), "), got shape ",
                                        seeds_t.shape().DebugString()));
    auto seeds = seeds_t.vec<int64_t>();
    const bool seeded = seeds_t.dim_size(0) > 0;
    for (int64_t i = 0; seeded && i < seeds.size(); ++i) {
      OP_REQUIRES(ctx, seeds(i) >= 0 && seeds(i) <= 0x7fffffff,
                  errors::InvalidArgument("seed ", seeds(i), " at position ", i,
                                          " is out of range: allowed 0..2147483647"));
    }
    OP_REQUIRES_OK(ctx, ParallelOverSlots(ctx, indices, [&](int i) {
                     return batch->Reset(indices[i], only_played_, seeded ? seeds(i) : -1);
                   }));
  }

 private:
  bool only_played_ = false;
};

class AleStepOp : public AleSlotsOp {
 public:
  explicit AleStepOp(OpKernelConstruction* ctx) : AleSlotsOp(ctx) {
    OP_REQUIRES_OK(ctx, ctx->GetAttr("auto_reset", &auto_reset_));
  }
  void ComputeSlots(OpKernelContext* ctx, tfrl::AleBatch* batch,
                    const std::vector<int>& indices) override {
    const Tensor& actions_t = ctx->input(2);
    OP_REQUIRES(ctx, actions_t.dims() == 1 && actions_t.dim_size(0) == indices.size(),
                errors::InvalidArgument("actions must be a vector with one action per index (",
                                        indices.size(), "), got shape ",
                                        actions_t.shape().DebugString()));
    auto actions = actions_t.vec<int32>();
    const int num_actions = batch->action_set().size();
    for (size_t i = 0; i < indices.size(); ++i) {
      OP_REQUIRES(ctx, actions(i) >= 0 && actions(i) < num_actions,
                  errors::InvalidArgument("action ", actions(i), " for env ", indices[i],
                                          " is outside the action set: allowed 0..",
                                          num_actions - 1));
      OP_REQUIRES(ctx, !batch->needs_reset(indices[i]),
                  errors::InvalidArgument("env slot ", indices[i],
                                          " needs a reset before it can step: call reset "
                                          "on it first"));
    }
    const int64_t k = indices.size();
    Tensor *reward, *terminated, *truncated, *game_over;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(0, TensorShape({k}), &reward));
    OP_REQUIRES_OK(ctx, ctx->allocate_output(1, TensorShape({k}), &terminated));
    OP_REQUIRES_OK(ctx, ctx->allocate_output(2, TensorShape({k}), &truncated));
    OP_REQUIRES_OK(ctx, ctx->allocate_output(3, TensorShape({k}), &game_over));
    auto r = reward->vec<float>();
    auto term = terminated->vec<bool>();
    auto trunc = truncated->vec<bool>();
    auto over = game_over->vec<bool>();
    OP_REQUIRES_OK(ctx, ParallelOverSlots(ctx, indices, [&](int i) {
                     tfrl::StepOutput out;
                     std::string error = batch->Step(indices[i], actions(i), auto_reset_, &out);
                     r(i) = out.reward;
                     term(i) = out.terminated;
                     trunc(i) = out.truncated;
                     over(i) = out.game_over;
                     return error;
                   }));
  }

 private:
  bool auto_reset_;
};

class AleObserveOp : public AleSlotsOp {
 public:
  explicit AleObserveOp(OpKernelConstruction* ctx) : AleSlotsOp(ctx) {
    OP_REQUIRES_OK(ctx, ctx->GetAttr("height", &height_));
    OP_REQUIRES_OK(ctx, ctx->GetAttr("width", &width_));
    OP_REQUIRES_OK(ctx, ctx->GetAttr("channels", &channels_));
  }
  void ComputeSlots(OpKernelContext* ctx, tfrl::AleBatch* batch,
                    const std::vector<int>& indices) override {
    const int64_t channels = batch->channels() * batch->config().stack;
    OP_REQUIRES(ctx, height_ == batch->out_height() && width_ == batch->out_width() &&
                         channels_ == channels,
                errors::InvalidArgument("observation shape attrs ", height_, "x", width_,
                                        "x", channels_, " do not match the env batch (",
                                        batch->out_height(), "x", batch->out_width(), "x",
                                        channels, ")"));
    Tensor* obs;
    const int64_t k = indices.size();
    OP_REQUIRES_OK(ctx, ctx->allocate_output(0, TensorShape({k, height_, width_, channels_}),
                                             &obs));
    uint8_t* out = obs->flat<uint8>().data();
    const int64_t size = batch->observation_size();
    for (int64_t i = 0; i < k; ++i) {
      OP_REQUIRES(ctx, batch->has_observation(indices[i]),
                  errors::InvalidArgument("env slot ", indices[i],
                                          " has no observation yet: call reset on it first"));
      batch->Observe(indices[i], out + i * size);
    }
  }

 private:
  int64_t height_, width_, channels_;
};

class AleActionSetOp : public OpKernel {
 public:
  using OpKernel::OpKernel;
  void Compute(OpKernelContext* ctx) override {
    core::RefCountPtr<AleEnvResource> env;
    OP_REQUIRES_OK(ctx, LookupResource(ctx, HandleFromInput(ctx, 0), &env));
    const auto& set = env->batch()->action_set();
    Tensor* out;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(0, TensorShape({(int64_t)set.size()}), &out));
    for (size_t i = 0; i < set.size(); ++i) out->vec<int32>()(i) = set[i];
  }
};

// Which SIMD builds of the observation pipeline ran in this process.
class AleKernelInfoOp : public OpKernel {
 public:
  using OpKernel::OpKernel;
  void Compute(OpKernelContext* ctx) override {
    constexpr int kPaths = static_cast<int>(tfrl::ObsPath::kCount);
    Tensor* names;
    Tensor* ran;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(0, TensorShape({kPaths}), &names));
    OP_REQUIRES_OK(ctx, ctx->allocate_output(1, TensorShape({kPaths}), &ran));
    for (int i = 0; i < kPaths; ++i) {
      const auto path = static_cast<tfrl::ObsPath>(i);
      names->vec<tstring>()(i) = tfrl::ObsPathName(path);
      ran->vec<bool>()(i) = tfrl::ObsPathRan(path);
    }
  }
};

REGISTER_KERNEL_BUILDER(Name("AleEnvCreate").Device(DEVICE_CPU), AleEnvCreateOp);
REGISTER_KERNEL_BUILDER(Name("AleReset").Device(DEVICE_CPU), AleResetOp);
REGISTER_KERNEL_BUILDER(Name("AleStep").Device(DEVICE_CPU), AleStepOp);
REGISTER_KERNEL_BUILDER(Name("AleObserve").Device(DEVICE_CPU), AleObserveOp);
REGISTER_KERNEL_BUILDER(Name("AleActionSet").Device(DEVICE_CPU), AleActionSetOp);
REGISTER_KERNEL_BUILDER(Name("AleKernelInfo").Device(DEVICE_CPU), AleKernelInfoOp);

}  // namespace
}  // namespace tensorflow
