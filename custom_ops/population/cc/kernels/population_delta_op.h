// What the op classes of the two delta ops share, PopulationDeltaNet
// (population_delta_net.cc) and PopulationDeltaConv2D
// (population_delta_conv2d.cc): the checks of the inputs both take, the pass
// of their row runs over the thread pool, and their registration for each
// weight and input type. The row machinery they share is in
// population_delta_row.h.

#ifndef TFRL_CUSTOM_OPS_POPULATION_DELTA_OP_H_
#define TFRL_CUSTOM_OPS_POPULATION_DELTA_OP_H_

#include <cstdint>

#include "tensorflow/core/framework/op_kernel.h"
#include "tensorflow/core/framework/tensor.h"
#include "tensorflow/core/platform/status.h"
#include "tensorflow/core/platform/threadpool.h"
#include "population_rows.h"

namespace tfrl {
namespace population {

// The inputs both ops take beside their layers: this step's input x (called
// `x_name`, [B, H, W, C]), the last step's (`prev_name`, of x's shape), and
// the rows' network `index` and `fresh` flags ([B] each).
inline tensorflow::Status CheckStepInputs(const tensorflow::Tensor& x, const char* x_name,
                                          const tensorflow::Tensor& prev,
                                          const char* prev_name,
                                          const tensorflow::Tensor& index,
                                          const tensorflow::Tensor& fresh) {
  TF_RETURN_IF_ERROR(CheckRank(x, 4, x_name, "[B, H, W, C]"));
  if (prev.shape() != x.shape()) {
    return tensorflow::errors::InvalidArgument(prev_name, " must have the shape of ", x_name,
                                               " ", x.shape().DebugString(), ", got ",
                                               prev.shape().DebugString());
  }
  TF_RETURN_IF_ERROR(CheckRowVector(index, "index", x.dim_size(0)));
  return CheckRowVector(fresh, "fresh", x.dim_size(0));
}

// Runs shard(first_run, last_run) over the runs on the intra-op pool; `cost`
// is a run's cost, enough for the pool to give each run a shard.
template <typename Shard>
void ParallelOverRuns(tensorflow::OpKernelContext* ctx, const RowRuns& runs, int64_t cost,
                      const Shard& shard) {
  auto* workers = ctx->device()->tensorflow_cpu_worker_threads()->workers;
  workers->ParallelFor(runs.count(), cost, shard);
}

}  // namespace population
}  // namespace tfrl

// Registers Op<T, TX> as the CPU kernel of the op `name` for each weight type
// T (float32, bfloat16) and input type TX (float32, uint8).
#define TFRL_REGISTER_DELTA_OP(name, Op)                                   \
  TFRL_REGISTER_DELTA_KERNEL(name, Op, float, float)                       \
  TFRL_REGISTER_DELTA_KERNEL(name, Op, float, ::tensorflow::uint8)         \
  TFRL_REGISTER_DELTA_KERNEL(name, Op, ::tensorflow::bfloat16, float)      \
  TFRL_REGISTER_DELTA_KERNEL(name, Op, ::tensorflow::bfloat16, ::tensorflow::uint8)
#define TFRL_REGISTER_DELTA_KERNEL(name, Op, T, TX)   \
  REGISTER_KERNEL_BUILDER(Name(name)                  \
                              .Device(::tensorflow::DEVICE_CPU) \
                              .TypeConstraint<T>("T")           \
                              .TypeConstraint<TX>("TX"),        \
                          Op<T, TX>);

#endif  // TFRL_CUSTOM_OPS_POPULATION_DELTA_OP_H_
