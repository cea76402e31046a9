#include "mujoco_batch.h"

#include <algorithm>
#include <exception>

namespace tfrl {
namespace {

// Runs a MuJoCo call; its errors (mju_error, which the Python bindings turn
// into C++ exceptions once `mujoco` is imported) become a message.
template <typename Fn>
std::string Guarded(const char* what, Fn&& fn) {
  try {
    fn();
  } catch (const std::exception& e) {
    return std::string(what) + ": " + e.what();
  } catch (...) {
    return std::string(what) + ": MuJoCo raised an error";
  }
  return "";
}

}  // namespace

std::string MujocoBatch::Create(const MujocoBatchConfig& config,
                                std::unique_ptr<MujocoBatch>* batch) {
  if (mj_version() != mjVERSION_HEADER) {
    return "the MuJoCo library loaded (version " + std::to_string(mj_version()) +
           ") is not the one the op was built against (" +
           std::to_string(mjVERSION_HEADER) + "): reinstall tfrl against mujoco " +
           "of the pinned version";
  }
  const mujoco_tasks::Task* task = mujoco_tasks::FindTask(config.task);
  if (task == nullptr) {
    return "unknown MuJoCo task '" + config.task + "'; known: " +
           mujoco_tasks::TaskNames();
  }
  char error[1000] = "";
  mjModel* model = nullptr;
  std::string failure = Guarded("loading the model", [&] {
    model = mj_loadXML(config.model_path.c_str(), nullptr, error, sizeof(error));
  });
  if (!failure.empty()) return failure;
  if (model == nullptr) {
    return "MuJoCo could not load '" + config.model_path + "': " + error;
  }
  const int size = task->ObservationSize(model);
  if (size == 0) {
    mj_deleteModel(model);
    return "'" + config.model_path + "' is not the model of task '" + config.task +
           "' (its sizes differ)";
  }
  batch->reset(new MujocoBatch(config, model, task, size));
  for (auto& slot : (*batch)->slots_) {
    slot->data = mj_makeData(model);
    if (slot->data == nullptr) {
      batch->reset();
      return "out of memory making the MuJoCo data of " +
             std::to_string(config.num_envs) + " slots";
    }
  }
  return "";
}

MujocoBatch::MujocoBatch(const MujocoBatchConfig& config, mjModel* model,
                         const mujoco_tasks::Task* task, int observation_size)
    : config_(config),
      model_(model),
      task_(task),
      observation_size_(observation_size),
      dt_(model->opt.timestep * config.frame_skip) {
  slots_.reserve(config.num_envs);
  for (int i = 0; i < config.num_envs; ++i) slots_.push_back(std::make_unique<Slot>());
}

MujocoBatch::~MujocoBatch() {
  for (auto& slot : slots_) {
    if (slot->data != nullptr) mj_deleteData(slot->data);
  }
  mj_deleteModel(model_);
}

bool MujocoBatch::needs_reset(int slot) const {
  std::lock_guard<std::mutex> lock(slots_[slot]->mu);
  return slots_[slot]->needs_reset;
}

std::string MujocoBatch::Reset(int index, const double* qpos, const double* qvel,
                               double* obs) {
  Slot& slot = *slots_[index];
  std::lock_guard<std::mutex> lock(slot.mu);
  mjData* d = slot.data;
  std::string error = Guarded("reset", [&] {
    mj_resetData(model_, d);
    std::copy(qpos, qpos + model_->nq, d->qpos);
    std::copy(qvel, qvel + model_->nv, d->qvel);
    mj_forward(model_, d);
  });
  if (!error.empty()) return error;
  task_->Observe(model_, d, obs);
  slot.steps = 0;
  slot.needs_reset = false;
  slot.ever_reset = true;
  return "";
}

bool MujocoBatch::Observe(int index, double* obs) const {
  const Slot& slot = *slots_[index];
  std::lock_guard<std::mutex> lock(slot.mu);
  if (!slot.ever_reset) {
    std::fill(obs, obs + observation_size_, 0.0);
    return true;
  }
  task_->Observe(model_, slot.data, obs);
  return slot.steps > 0;
}

std::string MujocoBatch::Step(int index, const float* action, double* obs,
                              MujocoStepOutput* out) {
  Slot& slot = *slots_[index];
  std::lock_guard<std::mutex> lock(slot.mu);
  if (slot.needs_reset) return "slot needs a reset before it can step";
  mjData* d = slot.data;
  const mujoco_tasks::BeforeStep before = task_->Before(model_, d);
  std::string error = Guarded("step", [&] {
    std::copy(action, action + model_->nu, d->ctrl);
    for (int i = 0; i < config_.frame_skip; ++i) mj_step(model_, d);
    // As gymnasium: cfrc_ext and the other force terms need it after a step.
    mj_rnePostConstraint(model_, d);
  });
  if (!error.empty()) return error;
  const mujoco_tasks::StepReward r = task_->Reward(model_, d, before, action, dt_);
  task_->Observe(model_, d, obs);
  ++slot.steps;
  out->reward = static_cast<float>(r.reward);
  out->terminated = r.terminated;
  out->truncated = config_.max_episode_steps > 0 && slot.steps >= config_.max_episode_steps;
  slot.needs_reset = out->terminated || out->truncated;
  return "";
}

}  // namespace tfrl
