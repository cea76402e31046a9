// Kernels of the MuJoCo ops: the simulation batch lives in a ResourceBase;
// every input is checked before any simulation moves, so bad input changes
// nothing.
#include <atomic>
#include <cmath>
#include <new>
#include <string>
#include <vector>

#include "mujoco_batch.h"
#include "tensorflow/core/framework/op_kernel.h"
#include "tensorflow/core/framework/resource_mgr.h"
#include "tensorflow/core/framework/tensor.h"
#include "tensorflow/core/platform/threadpool.h"

namespace tensorflow {
namespace {

class MujocoEnvResource : public ResourceBase {
 public:
  explicit MujocoEnvResource(std::unique_ptr<tfrl::MujocoBatch> batch)
      : batch_(std::move(batch)) {}
  tfrl::MujocoBatch* batch() { return batch_.get(); }
  std::string DebugString() const override {
    return "MujocoEnv(" + batch_->config().task + ", " +
           std::to_string(batch_->num_envs()) + " slots)";
  }

 private:
  std::unique_ptr<tfrl::MujocoBatch> batch_;
};

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
    static std::atomic<int64_t> counter{0};
    const std::string container = ctx->resource_manager()->default_container();
    const std::string name = "tfrl_mujoco_env_" + std::to_string(counter++);
    OP_REQUIRES_OK(ctx, ctx->resource_manager()->Create(
                            container, name, new MujocoEnvResource(std::move(batch))));
    Tensor* handle;
    AllocatorAttributes attr;
    attr.set_on_host(true);
    OP_REQUIRES_OK(ctx, ctx->allocate_output(0, TensorShape({}), &handle, attr));
    handle->scalar<ResourceHandle>()() =
        MakeResourceHandle<MujocoEnvResource>(ctx, container, name);
  }

 private:
  tfrl::MujocoBatchConfig config_;
};

// Looks up the batch and checks `indices` (rank 1, in range, no repeats).
Status GetBatchAndIndices(OpKernelContext* ctx, core::RefCountPtr<MujocoEnvResource>* env,
                          std::vector<int>* indices) {
  TF_RETURN_IF_ERROR(LookupResource(ctx, HandleFromInput(ctx, 0), env));
  const Tensor& t = ctx->input(1);
  if (t.dims() != 1) {
    return errors::InvalidArgument("indices must be a vector of slot numbers, got shape ",
                                   t.shape().DebugString());
  }
  const int n = (*env)->batch()->num_envs();
  auto flat = t.vec<int32>();
  std::vector<bool> seen(n, false);
  for (int64_t i = 0; i < flat.size(); ++i) {
    const int slot = flat(i);
    if (slot < 0 || slot >= n) {
      return errors::InvalidArgument("env index ", slot, " at position ", i,
                                     " is out of range: allowed 0..", n - 1);
    }
    if (seen[slot]) {
      return errors::InvalidArgument("env index ", slot,
                                     " appears twice in indices; each slot at most once");
    }
    seen[slot] = true;
    indices->push_back(slot);
  }
  return absl::OkStatus();
}

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

// Runs fn(i) for i in [0, n) on the intra-op pool, one slot per task;
// returns the first error message, naming the slot.
Status ParallelOverSlots(OpKernelContext* ctx, const std::vector<int>& indices,
                         const std::function<std::string(int)>& fn) {
  const int n = indices.size();
  std::vector<std::string> errors_out(n);
  auto* workers = ctx->device()->tensorflow_cpu_worker_threads()->workers;
  // A step costs 1e5-1e6 cycles (HalfCheetah-Humanoid): one task per slot.
  workers->ParallelFor(n, /*cost_per_unit=*/1000000, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) errors_out[i] = fn(i);
  });
  for (int i = 0; i < n; ++i) {
    if (!errors_out[i].empty()) {
      return errors::Internal("env slot ", indices[i], ": ", errors_out[i]);
    }
  }
  return absl::OkStatus();
}

class MujocoResetOp : public OpKernel {
 public:
  using OpKernel::OpKernel;
  void Compute(OpKernelContext* ctx) override {
    core::RefCountPtr<MujocoEnvResource> env;
    std::vector<int> indices;
    OP_REQUIRES_OK(ctx, GetBatchAndIndices(ctx, &env, &indices));
    tfrl::MujocoBatch* batch = env->batch();
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

class MujocoStepOp : public OpKernel {
 public:
  using OpKernel::OpKernel;
  void Compute(OpKernelContext* ctx) override {
    core::RefCountPtr<MujocoEnvResource> env;
    std::vector<int> indices;
    OP_REQUIRES_OK(ctx, GetBatchAndIndices(ctx, &env, &indices));
    tfrl::MujocoBatch* batch = env->batch();
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

class MujocoObserveOp : public OpKernel {
 public:
  using OpKernel::OpKernel;
  void Compute(OpKernelContext* ctx) override {
    core::RefCountPtr<MujocoEnvResource> env;
    std::vector<int> indices;
    OP_REQUIRES_OK(ctx, GetBatchAndIndices(ctx, &env, &indices));
    tfrl::MujocoBatch* batch = env->batch();
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
