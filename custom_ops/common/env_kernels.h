// What the kernels of the env op families share (custom_ops/ale,
// custom_ops/mujoco): a batch of env slots owned by a TF resource, the ops
// on some of its slots (the batch looked up, the slots checked), and the
// slots' work on TF's thread pool.
// Both builds find this folder: setup.py compiles every family with
// -I custom_ops/common, Bazel through //custom_ops/common:env_kernels.

#ifndef TFRL_CUSTOM_OPS_COMMON_ENV_KERNELS_H_
#define TFRL_CUSTOM_OPS_COMMON_ENV_KERNELS_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "tensorflow/core/framework/op_kernel.h"
#include "tensorflow/core/framework/resource_mgr.h"
#include "tensorflow/core/framework/tensor.h"
#include "tensorflow/core/platform/errors.h"
#include "tensorflow/core/platform/status.h"
#include "tensorflow/core/platform/threadpool.h"

namespace tfrl {
namespace env_kernels {

// The resource of one env batch (`Batch` has num_envs()); its DebugString
// reads `kind(what, N slots)`, e.g. "AleEnv(.../pong.bin, 8 slots)".
template <typename Batch>
class BatchResource : public tensorflow::ResourceBase {
 public:
  BatchResource(std::unique_ptr<Batch> batch, const std::string& kind,
                const std::string& what)
      : batch_(std::move(batch)),
        description_(kind + "(" + what + ", " + std::to_string(batch_->num_envs()) +
                     " slots)") {}
  Batch* batch() { return batch_.get(); }
  std::string DebugString() const override { return description_; }

 private:
  std::unique_ptr<Batch> batch_;
  const std::string description_;
};

// Puts `resource` (owned from now on) in the op's resource manager under a
// new name starting with `prefix`, and its handle into output 0.
template <typename Resource>
tensorflow::Status OutputNewResource(tensorflow::OpKernelContext* ctx,
                                     const std::string& prefix, Resource* resource) {
  static std::atomic<int64_t> counter{0};
  const std::string container = ctx->resource_manager()->default_container();
  const std::string name = prefix + std::to_string(counter++);
  TF_RETURN_IF_ERROR(ctx->resource_manager()->Create(container, name, resource));
  tensorflow::Tensor* handle;
  tensorflow::AllocatorAttributes attr;
  attr.set_on_host(true);
  TF_RETURN_IF_ERROR(ctx->allocate_output(0, tensorflow::TensorShape({}), &handle, attr));
  handle->scalar<tensorflow::ResourceHandle>()() =
      tensorflow::MakeResourceHandle<Resource>(ctx, container, name);
  return absl::OkStatus();
}

// The slots of `t` (an int32 vector, each in [0, num_envs), none twice)
// appended to *slots.
inline tensorflow::Status CheckSlots(const tensorflow::Tensor& t, int num_envs,
                                     std::vector<int>* slots) {
  if (t.dims() != 1) {
    return tensorflow::errors::InvalidArgument(
        "indices must be a vector of slot numbers, got shape ", t.shape().DebugString());
  }
  auto flat = t.vec<int32_t>();
  std::vector<bool> seen(num_envs, false);
  for (int64_t i = 0; i < flat.size(); ++i) {
    const int slot = flat(i);
    if (slot < 0 || slot >= num_envs) {
      return tensorflow::errors::InvalidArgument("env index ", slot, " at position ", i,
                                                 " is out of range: allowed 0..",
                                                 num_envs - 1);
    }
    if (seen[slot]) {
      return tensorflow::errors::InvalidArgument(
          "env index ", slot, " appears twice in indices; each slot at most once");
    }
    seen[slot] = true;
    slots->push_back(slot);
  }
  return absl::OkStatus();
}

// An op on some slots of a batch: input 0 is the batch's resource, input 1
// the slots (`indices`). Compute looks the batch up and checks the slots,
// then calls ComputeSlots, which holds the batch for the whole call.
template <typename Batch>
class SlotsOpKernel : public tensorflow::OpKernel {
 public:
  using OpKernel::OpKernel;

  void Compute(tensorflow::OpKernelContext* ctx) final {
    tensorflow::core::RefCountPtr<BatchResource<Batch>> env;
    OP_REQUIRES_OK(ctx,
                   tensorflow::LookupResource(ctx, tensorflow::HandleFromInput(ctx, 0), &env));
    std::vector<int> indices;
    OP_REQUIRES_OK(ctx, CheckSlots(ctx->input(1), env->batch()->num_envs(), &indices));
    ComputeSlots(ctx, env->batch(), indices);
  }

 protected:
  virtual void ComputeSlots(tensorflow::OpKernelContext* ctx, Batch* batch,
                            const std::vector<int>& indices) = 0;
};

// Runs fn(i) for each slot indices[i] on the intra-op pool, one slot per
// task (a slot's step costs 1e5-1e6 cycles: an emulator's frames, a MuJoCo
// task's physics); returns the first error message, naming its slot.
inline tensorflow::Status ParallelOverSlots(tensorflow::OpKernelContext* ctx,
                                            const std::vector<int>& indices,
                                            const std::function<std::string(int)>& fn) {
  const int n = indices.size();
  std::vector<std::string> errors_out(n);
  auto* workers = ctx->device()->tensorflow_cpu_worker_threads()->workers;
  workers->ParallelFor(n, /*cost_per_unit=*/1000000, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) errors_out[i] = fn(i);
  });
  for (int i = 0; i < n; ++i) {
    if (!errors_out[i].empty()) {
      return tensorflow::errors::Internal("env slot ", indices[i], ": ", errors_out[i]);
    }
  }
  return absl::OkStatus();
}

}  // namespace env_kernels
}  // namespace tfrl

#endif  // TFRL_CUSTOM_OPS_COMMON_ENV_KERNELS_H_
