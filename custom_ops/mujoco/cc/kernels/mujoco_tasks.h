// The locomotion tasks the MuJoCo op steps: gymnasium's v5 observation,
// reward and termination of each, with gymnasium's default settings.
//
// Each task reads the mjData that the batch stepped exactly as gymnasium
// steps it (ctrl, frame_skip x mj_step, mj_rnePostConstraint), so the
// observations are bit for bit gymnasium's; the rewards sum their terms in
// numpy's order (see PairwiseSum), so they are too on the machines tested
// (tests/envs/test_mujoco_env.py checks both against gymnasium).
#ifndef TFRL_CUSTOM_OPS_MUJOCO_KERNELS_MUJOCO_TASKS_H_
#define TFRL_CUSTOM_OPS_MUJOCO_KERNELS_MUJOCO_TASKS_H_

#include <string>
#include <vector>

#include "mujoco/mujoco.h"

namespace tfrl {
namespace mujoco_tasks {

// What a task remembers of the state before a step (the position it
// measures its forward velocity from).
struct BeforeStep {
  double x = 0.0;
  double y = 0.0;
};

struct StepReward {
  double reward = 0.0;
  bool terminated = false;
};

class Task {
 public:
  virtual ~Task() = default;
  // The observation's length for `m`; 0 if `m` is not this task's model.
  virtual int ObservationSize(const mjModel* m) const = 0;
  virtual void Observe(const mjModel* m, const mjData* d, double* obs) const = 0;
  virtual BeforeStep Before(const mjModel* m, const mjData* d) const = 0;
  // The step's reward and termination, from the state after it; `action` is
  // the float32 action as the caller gave it, `dt` the step's duration.
  virtual StepReward Reward(const mjModel* m, const mjData* d, const BeforeStep& before,
                            const float* action, double dt) const = 0;
};

// The task of a gymnasium id's family ("half_cheetah", "humanoid"); null if
// there is none. `Names` lists the known ones for error messages.
const Task* FindTask(const std::string& name);
std::string TaskNames();

// numpy's sum of a contiguous float64 or float32 vector (np.sum): pairwise,
// eight accumulators per block of up to 128, so that rewards match numpy's.
double PairwiseSum(const double* a, long n);
float PairwiseSum(const float* a, long n);

}  // namespace mujoco_tasks
}  // namespace tfrl

#endif  // TFRL_CUSTOM_OPS_MUJOCO_KERNELS_MUJOCO_TASKS_H_
