// Kernels of the MuJoCo ops: the simulation batch lives in a ResourceBase;
// every input is checked before any simulation moves, so bad input changes
// nothing.
#include <cmath>
#include <new>
#include <string>
#include <vector>

#include "env_kernels.h"
#include "mujoco_batch.h"
#include "tensorflow/core/framework/op_kernel.h"
#include "tensorflow/core/framework/resource_mgr.h"
#include "tensorflow/core/framework/tensor.h"
#include "tensorflow/core/platform/threadpool.h"

namespace tensorflow {
namespace {

using tfrl::env_kernels::OutputNewResource;
using tfrl::env_kernels::ParallelOverSlots;
using MujocoEnvResource = tfrl::env_kernels::BatchResource<tfrl::MujocoBatch>;
using MujocoSlotsOp = tfrl::env_kernels::SlotsOpKernel<tfrl::MujocoBatch>;

class MujocoEnvCreateOp : public OpKernel {
 public:
  static constexpr int64_t kMaxEnvs = 4096;
  static constexpr int64_t kMaxFrameSkip = 1000;

  explicit MujocoEnvCreateOp(OpKernelConstruction* ctx) : OpKernel(ctx) {
    int64_t num_envs, frame_skip;
    OP_REQUIRES_OK(ctx, ctx->GetAttr("model_path", &config_.model_path));
    OP_REQUIRES_OK(ctx, ctx->GetAttr("task", &config_.task));
    OP_REQUIRES_OK(ctx, ctx->GetAttr("num_envs", &num_envs));
    OP_REQUIRES_OK(ctx, ctx->GetAttr("frame_skip", &frame_skip));
    OP_REQUIRES_OK(ctx, ctx->GetAttr("max_episode_steps", &config_.max_episode_steps));
    OP_REQUIRES(ctx, num_envs <= kMaxEnvs,
                errors::InvalidArgument("num_envs must be in 1..", kMaxEnvs, ", got ",
                                        num_envs));
    OP_REQUIRES(ctx, frame_skip <= kMaxFrameSkip,
                errors::InvalidArgument("frame_skip must be in 1..", kMaxFrameSkip,
                                        ", got ", frame_skip));
    config_.num_envs = static_cast<int>(num_envs);
    config_.frame_skip = static_cast<int>(frame_skip);
  }

  void Compute(OpKernelContext* ctx) override {
    std::unique_ptr<tfrl::MujocoBatch> batch;
    std::string error;
    try {
      error = tfrl::MujocoBatch::Create(config_, &batch);
    } catch (const std::bad_alloc&) {
      error = "out of memory making " + std::to_string(config_.num_envs) +
              " MuJoCo simulations";
    }
    OP_REQUIRES(ctx, error.empty(), errors::InvalidArgument(error));
    OP_REQUIRES_OK(ctx, OutputNewResource(ctx, "tfrl_mujoco_env_",
                                          new MujocoEnvResource(std::move(batch), "MujocoEnv",
                                                                config_.task)));
  }

 private:
  tfrl::MujocoBatchConfig config_;
};

// A [k, width] input with one row per index (and, if `finite`, only finite
// values).
template <typename T>
Status CheckRows(const Tensor& t, const char* name, int64_t k, int64_t width,
                 bool finite) {
  if (t.dims() != 2 || t.dim_size(0) != k || t.dim_size(1) != width) {
    return errors::InvalidArgument(name, " must have shape [", k, ", ", width,
                                   "] (one row per index), got ", t.shape().DebugString());
  }
  auto flat = t.flat<T>();
  for (int64_t i = 0; finite && i < flat.size(); ++i) {
    if (!std::isfinite(static_cast<double>(flat(i)))) {
      return errors::InvalidArgument(name, " holds ", static_cast<double>(flat(i)),
                                     " at row ", i / width, ", column ", i % width,
                                     ": only finite values are allowed");
    }
  }
  return absl::OkStatus();
}

class MujocoResetOp : public MujocoSlotsOp {
 public:
  using MujocoSlotsOp::MujocoSlotsOp;
  void ComputeSlots(OpKernelContext* ctx, tfrl::MujocoBatch* batch,
                    const std::vector<int>& indices) override {
    const int64_t k = indices.size();
    OP_REQUIRES_OK(ctx, CheckRows<double>(ctx->input(2), "qpos", k, batch->nq(), true));
    OP_REQUIRES_OK(ctx, CheckRows<double>(ctx->input(3), "qvel", k, batch->nv(), true));
    const double* qpos = ctx->input(2).flat<double>().data();
    const double* qvel = ctx->input(3).flat<double>().data();
    const int64_t size = batch->observation_size();
    Tensor* obs;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(0, TensorShape({k, size}), &obs));
    double* out = obs->flat<double>().data();
    OP_REQUIRES_OK(ctx, ParallelOverSlots(ctx, indices, [&](int i) {
                     return batch->Reset(indices[i], qpos + i * batch->nq(),
                                         qvel + i * batch->nv(), out + i * size);
                   }));
  }
};

class MujocoStepOp : public MujocoSlotsOp {
 public:
  using MujocoSlotsOp::MujocoSlotsOp;
  void ComputeSlots(OpKernelContext* ctx, tfrl::MujocoBatch* batch,
                    const std::vector<int>& indices) override {
    const int64_t k = indices.size();
    const int nu = batch->nu();
    // Non-finite actions go to MuJoCo as gymnasium passes them (MuJoCo warns
    // and zeroes the controls; a cost of the action is NaN), so that a run
    // plays as it does on gymnasium's envs: a NaN return ranks last.
    OP_REQUIRES_OK(ctx, CheckRows<float>(ctx->input(2), "actions", k, nu, false));
    for (int slot : indices) {
      OP_REQUIRES(ctx, !batch->needs_reset(slot),
                  errors::InvalidArgument("env slot ", slot,
                                          " needs a reset before it can step: its episode "
                                          "ended (or it was never reset)"));
    }
    const float* actions = ctx->input(2).flat<float>().data();
    const int64_t size = batch->observation_size();
    Tensor *obs, *reward, *terminated, *truncated;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(0, TensorShape({k, size}), &obs));
    OP_REQUIRES_OK(ctx, ctx->allocate_output(1, TensorShape({k}), &reward));
    OP_REQUIRES_OK(ctx, ctx->allocate_output(2, TensorShape({k}), &terminated));
    OP_REQUIRES_OK(ctx, ctx->allocate_output(3, TensorShape({k}), &truncated));
    double* out = obs->flat<double>().data();
    auto r = reward->vec<float>();
    auto term = terminated->vec<bool>();
    auto trunc = truncated->vec<bool>();
    OP_REQUIRES_OK(ctx, ParallelOverSlots(ctx, indices, [&](int i) {
                     tfrl::MujocoStepOutput step;
                     std::string error =
                         batch->Step(indices[i], actions + i * nu, out + i * size, &step);
                     r(i) = step.reward;
                     term(i) = step.terminated;
                     trunc(i) = step.truncated;
                     return error;
                   }));
  }
};

class MujocoObserveOp : public MujocoSlotsOp {
 public:
  using MujocoSlotsOp::MujocoSlotsOp;
  void ComputeSlots(OpKernelContext* ctx, tfrl::MujocoBatch* batch,
                    const std::vector<int>& indices) override {
    const int64_t k = indices.size();
    const int64_t size = batch->observation_size();
    Tensor *obs, *played;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(0, TensorShape({k, size}), &obs));
    OP_REQUIRES_OK(ctx, ctx->allocate_output(1, TensorShape({k}), &played));
    double* out = obs->flat<double>().data();
    for (int64_t i = 0; i < k; ++i) {
      played->vec<bool>()(i) = batch->Observe(indices[i], out + i * size);
    }
  }
};

REGISTER_KERNEL_BUILDER(Name("MujocoEnvCreate").Device(DEVICE_CPU), MujocoEnvCreateOp);
REGISTER_KERNEL_BUILDER(Name("MujocoReset").Device(DEVICE_CPU), MujocoResetOp);
REGISTER_KERNEL_BUILDER(Name("MujocoStep").Device(DEVICE_CPU), MujocoStepOp);
REGISTER_KERNEL_BUILDER(Name("MujocoObserve").Device(DEVICE_CPU), MujocoObserveOp);

}  // namespace
}  // namespace tensorflow
