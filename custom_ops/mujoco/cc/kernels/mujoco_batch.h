// A batch of MuJoCo simulations of one locomotion task, stepped as
// gymnasium's MujocoEnv steps one: ctrl = action, frame_skip x mj_step,
// mj_rnePostConstraint; then the task's observation and reward.
//
// All slots share one mjModel (read-only while stepping); each has its own
// mjData and mutex, so different slots may be stepped from different threads
// at once. Resets take the episode's initial qpos and qvel from the caller
// (the Python side draws them with gymnasium's own random streams), so a
// slot's episode is the gymnasium env's episode for the same seed.
#ifndef TFRL_CUSTOM_OPS_MUJOCO_KERNELS_MUJOCO_BATCH_H_
#define TFRL_CUSTOM_OPS_MUJOCO_KERNELS_MUJOCO_BATCH_H_

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "mujoco/mujoco.h"
#include "mujoco_tasks.h"

namespace tfrl {

struct MujocoBatchConfig {
  std::string model_path;  // the task's MJCF file (gymnasium's assets)
  std::string task;        // "half_cheetah" or "humanoid"
  int num_envs = 1;
  int frame_skip = 5;
  int64_t max_episode_steps = 1000;  // truncation (gymnasium's TimeLimit); 0: none
};

struct MujocoStepOutput {
  float reward = 0.0f;
  bool terminated = false;
  bool truncated = false;
};

class MujocoBatch {
 public:
  // Loads the model and makes the slots; returns "" or why it failed.
  static std::string Create(const MujocoBatchConfig& config,
                            std::unique_ptr<MujocoBatch>* batch);
  ~MujocoBatch();
  MujocoBatch(const MujocoBatch&) = delete;
  MujocoBatch& operator=(const MujocoBatch&) = delete;

  const MujocoBatchConfig& config() const { return config_; }
  int num_envs() const { return config_.num_envs; }
  int nq() const { return model_->nq; }
  int nv() const { return model_->nv; }
  int nu() const { return model_->nu; }
  int observation_size() const { return observation_size_; }
  bool needs_reset(int slot) const;

  // Starts a new episode in `slot` from (qpos, qvel) as gymnasium's reset
  // does (mj_resetData, set the state, mj_forward); writes its observation.
  std::string Reset(int slot, const double* qpos, const double* qvel, double* obs);
  // One step of `slot` with `action` (nu floats); writes the observation.
  // A slot whose episode ended needs Reset before its next step.
  std::string Step(int slot, const float* action, double* obs, MujocoStepOutput* out);
  // The slot's current observation (zeros before its first reset); returns
  // whether it has stepped since its last reset (true before the first).
  bool Observe(int slot, double* obs) const;

 private:
  struct Slot {
    mjData* data = nullptr;
    int64_t steps = 0;  // since the episode's reset
    bool needs_reset = true;
    bool ever_reset = false;
    mutable std::mutex mu;
  };
  MujocoBatch(const MujocoBatchConfig& config, mjModel* model,
              const mujoco_tasks::Task* task, int observation_size);

  MujocoBatchConfig config_;
  mjModel* model_;
  const mujoco_tasks::Task* task_;
  int observation_size_;
  double dt_;  // one step: timestep x frame_skip, as gymnasium's env.dt
  std::vector<std::unique_ptr<Slot>> slots_;
};

}  // namespace tfrl

#endif  // TFRL_CUSTOM_OPS_MUJOCO_KERNELS_MUJOCO_BATCH_H_
