"""GA3C agents: each owns a slice of slots of one batched env.

Agent `i` owns slots [i*k, (i+1)*k) (k = envs_per_agent). One call of
`run_segment(i)` (a `tf.function`, traced once for every agent) plays t_max
steps on those slots:

  for t in range(t_max):
    prediction_queue.enqueue_many({agent: i, slot: 0..k-1, obs})
    {slot, action, behaviour_log_prob, version} = response_queue[i].dequeue_many(k)
    obs, reward, terminated, truncated = env.step(action, slots)
    finished episodes -> episode_queue
  training_queue.enqueue_many(k segments {obs [T+1], action, reward, done,
                                          behaviour_log_prob, version})

A Python thread per agent only calls `run_segment` until told to stop or
until the queues are closed.
"""

import tensorflow as tf


class AgentPool(tf.Module):
  """The agents' shared per-slot state and their segment function.

  Args:
    env: batched env (tfrl.envs.AtariEnv or GymEnv) with
      `num_envs >= num_agents * envs_per_agent`.
    queues: tfrl.ga3c.queues.Queues.
    num_agents: maximum number of agents.
    envs_per_agent: k, slots per agent.
    t_max: segment length.
    counters: dict of int64 tf.Variables; `env_steps` and `episodes` are
      incremented here.
  """

  def __init__(self, env, queues, *, num_agents: int, envs_per_agent: int,
               t_max: int, counters, name=None):
    super().__init__(name=name)
    slots = num_agents * envs_per_agent
    if env.num_envs < slots:
      raise ValueError(
          f"env has {env.num_envs} slots; {num_agents} agents x "
          f"{envs_per_agent} envs need {slots}.")
    self._env = env
    self._queues = queues
    self._k = envs_per_agent
    self._t_max = t_max
    self._num_agents = num_agents
    self._counters = counters
    first_obs = env.reset(tf.range(slots, dtype=tf.int32))
    self.obs = tf.Variable(first_obs, trainable=False, name="obs")
    self.episode_return = tf.Variable(tf.zeros([slots]), trainable=False,
                                      name="episode_return")
    self.episode_length = tf.Variable(tf.zeros([slots], tf.int32),
                                      trainable=False, name="episode_length")
    self.run_segment = tf.function(
        self._run_segment,
        input_signature=[tf.TensorSpec([], tf.int32, name="agent")])

  def _dequeue_response(self, agent):
    branches = [
        (lambda q=q: q.dequeue_many(self._k)) for q in self._queues.responses]
    return tf.switch_case(agent, branches)

  def _run_segment(self, agent):
    k, t_max = self._k, self._t_max
    queues = self._queues
    idx = agent * k + tf.range(k, dtype=tf.int32)
    local = tf.range(k, dtype=tf.int32)
    obs = tf.gather(self.obs, idx)
    ep_return = tf.gather(self.episode_return, idx)
    ep_length = tf.gather(self.episode_length, idx)
    obs_ta = tf.TensorArray(obs.dtype, size=t_max + 1,
                            element_shape=obs.shape)
    act_ta = tf.TensorArray(tf.int32, size=t_max)
    rew_ta = tf.TensorArray(tf.float32, size=t_max)
    done_ta = tf.TensorArray(tf.bool, size=t_max)
    logp_ta = tf.TensorArray(tf.float32, size=t_max)
    version_ta = tf.TensorArray(tf.int64, size=t_max)
    finished = tf.constant(0, tf.int64)
    for t in tf.range(t_max):
      queues.prediction.enqueue_many(
          {"agent": tf.fill([k], agent), "slot": local, "obs": obs})
      response = self._dequeue_response(agent)
      by_slot = lambda x: tf.scatter_nd(response["slot"][:, None], x, [k])
      action = by_slot(response["action"])
      obs_ta = obs_ta.write(t, obs)
      act_ta = act_ta.write(t, action)
      logp_ta = logp_ta.write(t, by_slot(response["behaviour_log_prob"]))
      version_ta = version_ta.write(t, by_slot(response["version"]))
      obs, reward, terminated, truncated = self._env.step(action, idx)
      obs = tf.ensure_shape(obs, obs_ta.element_shape)
      reward = tf.ensure_shape(tf.cast(reward, tf.float32), [k])
      terminated = tf.ensure_shape(terminated, [k])
      truncated = tf.ensure_shape(truncated, [k])
      done = tf.logical_or(terminated, truncated)
      ep_return += reward
      ep_length += 1
      queues.episodes.enqueue_many({
          "score": tf.boolean_mask(ep_return, done),
          "length": tf.boolean_mask(ep_length, done)})
      finished += tf.reduce_sum(tf.cast(done, tf.int64))
      ep_return = tf.where(done, tf.zeros_like(ep_return), ep_return)
      ep_length = tf.where(done, tf.zeros_like(ep_length), ep_length)
      rew_ta = rew_ta.write(t, reward)
      done_ta = done_ta.write(t, done)
    obs_ta = obs_ta.write(t_max, obs)
    self.obs.scatter_update(tf.IndexedSlices(obs, idx))
    self.episode_return.scatter_update(tf.IndexedSlices(ep_return, idx))
    self.episode_length.scatter_update(tf.IndexedSlices(ep_length, idx))

    def batch_major(ta):
      x = ta.stack()  # [T, k, ...]
      perm = [1, 0] + list(range(2, x.shape.rank))
      return tf.transpose(x, perm)

    queues.training.enqueue_many({
        "obs": batch_major(obs_ta),
        "action": batch_major(act_ta),
        "reward": batch_major(rew_ta),
        "done": batch_major(done_ta),
        "behaviour_log_prob": batch_major(logp_ta),
        "version": batch_major(version_ta)})
    self._counters["env_steps"].assign_add(k * t_max)
    self._counters["episodes"].assign_add(finished)
    return finished
