#include "mujoco_tasks.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace tfrl {
namespace mujoco_tasks {
namespace {

// numpy's pairwise summation (its `pairwise_sum` loop): below 8 values one
// running sum, up to 128 eight interleaved ones, above that halves.
template <typename T>
T Pairwise(const T* a, long n) {
  if (n < 8) {
    T res = 0;
    for (long i = 0; i < n; ++i) res += a[i];
    return res;
  }
  if (n <= 128) {
    T r[8];
    for (int j = 0; j < 8; ++j) r[j] = a[j];
    long i = 8;
    for (; i < n - (n % 8); i += 8) {
      for (int j = 0; j < 8; ++j) r[j] += a[i + j];
    }
    T res = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]));
    for (; i < n; ++i) res += a[i];
    return res;
  }
  long half = n / 2;
  half -= half % 8;
  return Pairwise(a, half) + Pairwise(a + half, n - half);
}

// np.sum(np.square(a)) of a contiguous vector.
template <typename T>
T SumOfSquares(const T* a, long n) {
  std::vector<T> squares(a, a + n);
  for (T& x : squares) x *= x;
  return Pairwise(squares.data(), n);
}

// gymnasium's HalfCheetah-v5: forward velocity of the root's x minus 0.1 x
// the action's squared norm (computed in float32, as numpy does for a
// float32 action); never terminates.
class HalfCheetah : public Task {
 public:
  int ObservationSize(const mjModel* m) const override {
    if (m->nq != 9 || m->nv != 9 || m->nu != 6) return 0;
    return (m->nq - 1) + m->nv;
  }
  void Observe(const mjModel* m, const mjData* d, double* obs) const override {
    obs = std::copy(d->qpos + 1, d->qpos + m->nq, obs);
    std::copy(d->qvel, d->qvel + m->nv, obs);
  }
  BeforeStep Before(const mjModel*, const mjData* d) const override {
    return {d->qpos[0], 0.0};
  }
  StepReward Reward(const mjModel* m, const mjData* d, const BeforeStep& before,
                    const float* action, double dt) const override {
    const double x_velocity = (d->qpos[0] - before.x) / dt;
    const double forward_reward = 1.0 * x_velocity;
    const float ctrl_cost = 0.1f * SumOfSquares(action, m->nu);
    return {forward_reward - static_cast<double>(ctrl_cost), false};
  }
};

// gymnasium's Humanoid-v5: 1.25 x the centre of mass's x velocity, 5 while
// the torso's height is in (1, 2), minus 0.1 x |ctrl|^2 and 5e-7 x
// |cfrc_ext|^2 (at most 10); terminates when the height leaves (1, 2).
class Humanoid : public Task {
 public:
  static constexpr int kBodies = 14;

  int ObservationSize(const mjModel* m) const override {
    if (m->nq != 24 || m->nv != 23 || m->nu != 17 || m->nbody != kBodies) return 0;
    const int bodies = m->nbody - 1;  // the world body is left out
    return (m->nq - 2) + m->nv + bodies * 10 + bodies * 6 + (m->nv - 6) + bodies * 6;
  }
  void Observe(const mjModel* m, const mjData* d, double* obs) const override {
    obs = std::copy(d->qpos + 2, d->qpos + m->nq, obs);
    obs = std::copy(d->qvel, d->qvel + m->nv, obs);
    obs = std::copy(d->cinert + 10, d->cinert + 10 * m->nbody, obs);
    obs = std::copy(d->cvel + 6, d->cvel + 6 * m->nbody, obs);
    obs = std::copy(d->qfrc_actuator + 6, d->qfrc_actuator + m->nv, obs);
    std::copy(d->cfrc_ext + 6, d->cfrc_ext + 6 * m->nbody, obs);
  }
  BeforeStep Before(const mjModel* m, const mjData* d) const override {
    return MassCenter(m, d);
  }
  StepReward Reward(const mjModel* m, const mjData* d, const BeforeStep& before,
                    const float*, double dt) const override {
    const BeforeStep after = MassCenter(m, d);
    const double x_velocity = (after.x - before.x) / dt;
    const double forward_reward = 1.25 * x_velocity;
    const double z = d->qpos[2];
    const bool healthy = 1.0 < z && z < 2.0;
    const double rewards = forward_reward + (healthy ? 5.0 : 0.0);
    const double ctrl_cost = 0.1 * SumOfSquares(d->ctrl, m->nu);
    double contact_cost = 5e-7 * SumOfSquares(d->cfrc_ext, 6L * m->nbody);
    if (!std::isnan(contact_cost)) {
      contact_cost = std::min(std::max(contact_cost,
                                       -std::numeric_limits<double>::infinity()), 10.0);
    }
    return {rewards - (ctrl_cost + contact_cost), !healthy};
  }

 private:
  // The bodies' mass-weighted mean position (x, y), summed body by body in
  // order as numpy's einsum does.
  static BeforeStep MassCenter(const mjModel* m, const mjData* d) {
    double num[2] = {0.0, 0.0};
    for (int b = 0; b < m->nbody; ++b) {
      num[0] += m->body_mass[b] * d->xipos[3 * b];
      num[1] += m->body_mass[b] * d->xipos[3 * b + 1];
    }
    const double mass = Pairwise(m->body_mass, m->nbody);
    return {num[0] / mass, num[1] / mass};
  }
};

}  // namespace

const Task* FindTask(const std::string& name) {
  static const HalfCheetah* half_cheetah = new HalfCheetah();
  static const Humanoid* humanoid = new Humanoid();
  if (name == "half_cheetah") return half_cheetah;
  if (name == "humanoid") return humanoid;
  return nullptr;
}

std::string TaskNames() { return "half_cheetah, humanoid"; }

double PairwiseSum(const double* a, long n) { return Pairwise(a, n); }
float PairwiseSum(const float* a, long n) { return Pairwise(a, n); }

}  // namespace mujoco_tasks
}  // namespace tfrl
