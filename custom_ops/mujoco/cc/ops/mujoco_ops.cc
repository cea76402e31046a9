// Registrations of the MuJoCo ops: a batch of simulations of one locomotion
// task as a TF resource, and reset / step over any subset of its slots.
#include "tensorflow/core/framework/common_shape_fns.h"
#include "tensorflow/core/framework/op.h"
#include "tensorflow/core/framework/shape_inference.h"

namespace tensorflow {

using shape_inference::DimensionHandle;
using shape_inference::InferenceContext;
using shape_inference::ShapeHandle;

REGISTER_OP("MujocoEnvCreate")
    .Output("handle: resource")
    .Attr("model_path: string")
    .Attr("task: string")
    .Attr("num_envs: int >= 1")
    .Attr("frame_skip: int >= 1 = 5")
    .Attr("max_episode_steps: int >= 0 = 1000")
    .SetIsStateful()
    .SetShapeFn(shape_inference::ScalarShape)
    .Doc(R"doc(
Creates `num_envs` MuJoCo simulations of one task and returns their handle.

Each call makes a new batch; destroy it with DestroyResourceOp. A step is
gymnasium's MujocoEnv step (ctrl = action, frame_skip x mj_step,
mj_rnePostConstraint) followed by the task's v5 observation and reward.
Every slot needs MujocoReset before its first MujocoStep.

model_path: the task's MJCF file (gymnasium's assets).
task: "half_cheetah" (HalfCheetah-v5) or "humanoid" (Humanoid-v5).
num_envs: 1..4096 simulations.
frame_skip: mj_step calls per step (1..1000).
max_episode_steps: an episode is truncated after this many steps (0: never).
)doc");

REGISTER_OP("MujocoReset")
    .Input("handle: resource")
    .Input("indices: int32")
    .Input("qpos: float64")
    .Input("qvel: float64")
    .Output("observation: float64")
    .SetIsStateful()
    .SetShapeFn([](InferenceContext* c) {
      ShapeHandle unused, indices, qpos, qvel;
      TF_RETURN_IF_ERROR(c->WithRank(c->input(0), 0, &unused));
      TF_RETURN_IF_ERROR(c->WithRank(c->input(1), 1, &indices));
      TF_RETURN_IF_ERROR(c->WithRank(c->input(2), 2, &qpos));
      TF_RETURN_IF_ERROR(c->WithRank(c->input(3), 2, &qvel));
      DimensionHandle k;
      TF_RETURN_IF_ERROR(c->Merge(c->Dim(indices, 0), c->Dim(qpos, 0), &k));
      TF_RETURN_IF_ERROR(c->Merge(k, c->Dim(qvel, 0), &k));
      c->set_output(0, c->Matrix(k, c->UnknownDim()));
      return absl::OkStatus();
    })
    .Doc(R"doc(
Starts a new episode in each slot of `indices` from its initial state, as
gymnasium's reset does after drawing it: mj_resetData, qpos and qvel set,
mj_forward. Returns the slots' first observations.

qpos: [k, nq] initial positions, one row per index.
qvel: [k, nv] initial velocities, one row per index.
)doc");

REGISTER_OP("MujocoStep")
    .Input("handle: resource")
    .Input("indices: int32")
    .Input("actions: float")
    .Output("observation: float64")
    .Output("reward: float")
    .Output("terminated: bool")
    .Output("truncated: bool")
    .SetIsStateful()
    .SetShapeFn([](InferenceContext* c) {
      ShapeHandle unused, indices, actions;
      TF_RETURN_IF_ERROR(c->WithRank(c->input(0), 0, &unused));
      TF_RETURN_IF_ERROR(c->WithRank(c->input(1), 1, &indices));
      TF_RETURN_IF_ERROR(c->WithRank(c->input(2), 2, &actions));
      DimensionHandle k;
      TF_RETURN_IF_ERROR(c->Merge(c->Dim(indices, 0), c->Dim(actions, 0), &k));
      c->set_output(0, c->Matrix(k, c->UnknownDim()));
      for (int i = 1; i < 4; ++i) c->set_output(i, c->Vector(k));
      return absl::OkStatus();
    })
    .Doc(R"doc(
Steps the slots in `indices` with `actions` ([k, nu], one row per index),
spread over the intra-op thread pool. A slot whose episode ended
(terminated or truncated) needs MujocoReset before its next step.

observation: [k, observation size] after the step.
reward: the task's reward of the step (computed in float64, as gymnasium).
terminated: the task ended the episode (Humanoid: the torso left its heights).
truncated: the episode reached max_episode_steps.
)doc");

REGISTER_OP("MujocoObserve")
    .Input("handle: resource")
    .Input("indices: int32")
    .Output("observation: float64")
    .Output("played: bool")
    .SetIsStateful()
    .SetShapeFn([](InferenceContext* c) {
      ShapeHandle unused, indices;
      TF_RETURN_IF_ERROR(c->WithRank(c->input(0), 0, &unused));
      TF_RETURN_IF_ERROR(c->WithRank(c->input(1), 1, &indices));
      c->set_output(0, c->Matrix(c->Dim(indices, 0), c->UnknownDim()));
      c->set_output(1, c->Vector(c->Dim(indices, 0)));
      return absl::OkStatus();
    })
    .Doc(R"doc(
The current observations of the slots in `indices` (a finished slot's final
one; zeros before a slot's first reset), and whether each slot has stepped
since its last reset (true before its first reset).
)doc");

}  // namespace tensorflow
