"""The TD3 update (Fujimoto et al. 2018), as one tf.function per training phase.

Per update: target policy smoothing a' = clip(pi'(s') + clip(sigma * eps, -c, c))
(eps standard normal, drawn by the caller, so that an update is determined
by the learner's state and its inputs, and a test can replay it);
y = r + gamma * d * min(Q1'(s', a'), Q2'(s', a')); both critics regress y;
every `policy_delay` updates the actor ascends Q1(s, pi(s)) and the targets
move by Polyak averaging. Right after each optimizer step `tfrl.layers.after_apply`
runs on the networks it trained (GST's dual-mode layers refresh their kernel
before the next forward pass reads it). After every update `tfrl.layers.after_update` runs
on the actor and both critics (so pruning schedules count training
iterations). Target networks average the trainable variables and copy the
non-trainable ones (masks, schedule state) from the online networks, so a
target's forward pass uses the online mask.

RigL regrowth (layers with `needs_gradient`, i.e. `dst` with regrowth by
gradient magnitude) gets the dense gradients of the pruned kernels: the
critics' come from the critic step of the same update (already computed, no
extra work); the actor has a gradient only every `policy_delay` updates, so
its hook gets a callable that computes the dense actor-loss gradient on the
update's batch, called only inside the regrowth branch, i.e. on the rare
pruning steps. Networks without such layers get no gradients (their update
graph is the same as without RigL).
"""

import numpy as np
import tensorflow as tf

from tfrl import layers as tl
from tfrl import optimizers
from tfrl import precision
from tfrl.td3 import config as config_lib
from tfrl.td3 import networks


class FusedAdam(optimizers.Adam):
  """`tfrl.optimizers.Adam` (the same slots and checkpoints, the same update
  up to rounding) with each variable's step in one fused kernel
  (`ResourceApplyAdam`) instead of about ten element-wise ops: a TD3 update
  steps 12 critic and 6 actor variables, and on a CPU each op costs a dispatch."""

  def _update(self, g, v, slots, lr, step):
    t = tf.cast(step, v.dtype)
    tf.raw_ops.ResourceApplyAdam(
        var=v.handle, m=slots["m"].handle, v=slots["u"].handle,
        beta1_power=tf.pow(tf.constant(self.beta1, v.dtype), t),
        beta2_power=tf.pow(tf.constant(self.beta2, v.dtype), t),
        lr=tf.cast(lr, v.dtype), beta1=tf.constant(self.beta1, v.dtype),
        beta2=tf.constant(self.beta2, v.dtype), epsilon=tf.constant(self.epsilon, v.dtype),
        grad=g)


def _sync(online: tf.Module, target: tf.Module, tau):
  for o, t in zip(online.variables, target.variables):
    if o.trainable:
      t.assign(tau * o + (1.0 - tau) * t)
    else:
      t.assign(o)


class TD3Learner(tf.Module):
  """Actor, twin critics, their targets and Adam optimizers (checkpointable)."""

  def __init__(self, config: config_lib.TD3Config, obs_dim: int, action_low, action_high,
               plan=None, name="td3"):
    super().__init__(name=name)
    self.config = config
    self.obs_dim = obs_dim
    low = np.asarray(action_low, np.float32)
    high = np.asarray(action_high, np.float32)
    self.action_dim = int(low.shape[0])
    # The action bounds (public: the export copies the actor with them).
    self.action_low, self.action_high = tf.constant(low), tf.constant(high)
    self._scale = tf.constant((high - low) / 2.0)
    h = config.hidden_sizes
    self.precision = precision.resolve(config.precision, image_network=False)
    dtype = self.precision.dtype
    self.actor = networks.Actor(low, high, h, plan, compute_dtype=dtype, name="actor")
    self.critic_1 = networks.Critic(h, plan, compute_dtype=dtype, name="critic_1")
    self.critic_2 = networks.Critic(h, plan, compute_dtype=dtype, name="critic_2")
    self.target_actor = networks.Actor(low, high, h, plan, compute_dtype=dtype, name="actor")
    self.target_critic_1 = networks.Critic(h, plan, compute_dtype=dtype, name="critic_1")
    self.target_critic_2 = networks.Critic(h, plan, compute_dtype=dtype, name="critic_2")
    obs = tf.zeros([1, obs_dim])
    act = tf.zeros([1, self.action_dim])
    for net in (self.actor, self.target_actor):
      net(obs)
    for net in (self.critic_1, self.critic_2, self.target_critic_1, self.target_critic_2):
      net(obs, act)
    for online, target in self._pairs():
      _sync(online, target, 1.0)
    self.actor_optimizer = FusedAdam(config.actor_lr, name="actor_adam")
    self.critic_optimizer = FusedAdam(config.critic_lr, name="critic_adam")
    self.num_updates = tf.Variable(0, dtype=tf.int64, trainable=False, name="num_updates")
    self._rigl_actor = any(l.needs_gradient for l in tl.layers_of(self.actor))
    self._rigl_critics = any(l.needs_gradient for net in (self.critic_1, self.critic_2)
                             for l in tl.layers_of(net))
    self.actor_optimizer.build(self.actor.trainable_variables)
    self.critic_optimizer.build(self._critic_variables())
    self.update = tf.function(self._update, jit_compile=config.jit_compile, input_signature=[
        tf.TensorSpec([None, None, obs_dim], tf.float32),
        tf.TensorSpec([None, None, self.action_dim], tf.float32),
        tf.TensorSpec([None, None], tf.float32),
        tf.TensorSpec([None, None, obs_dim], tf.float32),
        tf.TensorSpec([None, None], tf.float32),
        tf.TensorSpec([None, None, self.action_dim], tf.float32)])
    self.act = tf.function(self.actor, input_signature=[tf.TensorSpec([None, obs_dim],
                                                                      tf.float32)])

  @property
  def networks(self):
    """The trained networks (for after_update and compression reports)."""
    return [self.actor, self.critic_1, self.critic_2]

  def _pairs(self):
    return ((self.actor, self.target_actor), (self.critic_1, self.target_critic_1),
            (self.critic_2, self.target_critic_2))

  def _critic_variables(self):
    return self.critic_1.trainable_variables + self.critic_2.trainable_variables

  def _one_update(self, obs, action, reward, next_obs, discount, normal):
    c = self.config
    noise = tf.clip_by_value(normal * c.policy_noise, -c.noise_clip, c.noise_clip) * self._scale
    next_action = tf.clip_by_value(self.target_actor(next_obs) + noise, self.action_low,
                                   self.action_high)
    target_q = tf.minimum(self.target_critic_1(next_obs, next_action),
                          self.target_critic_2(next_obs, next_action))
    y = tf.stop_gradient(reward + c.discount * discount * target_q)
    critic_vars = self._critic_variables()
    with tf.GradientTape() as tape:
      q1 = self.critic_1(obs, action)
      q2 = self.critic_2(obs, action)
      critic_loss = tf.reduce_mean(tf.square(q1 - y)) + tf.reduce_mean(tf.square(q2 - y))
    critic_grads = tape.gradient(critic_loss, critic_vars)
    self.critic_optimizer.apply(critic_grads, critic_vars)
    tl.after_apply([self.critic_1, self.critic_2])
    step = self.num_updates.assign_add(1)

    def actor_step():
      actor_vars = self.actor.trainable_variables
      with tf.GradientTape() as tape:
        actor_loss = -tf.reduce_mean(self.critic_1(obs, self.actor(obs)))
      self.actor_optimizer.apply(tape.gradient(actor_loss, actor_vars), actor_vars)
      tl.after_apply(self.actor)
      for online, target in self._pairs():
        _sync(online, target, c.tau)
      return actor_loss

    actor_loss = tf.cond(tf.equal(step % c.policy_delay, 0), actor_step,
                         lambda: tf.constant(np.nan, tf.float32))
    if self._rigl_actor or self._rigl_critics:
      self._after_update_with_gradients(obs, critic_grads, critic_vars)
    else:
      tl.after_update(self.networks)
    return critic_loss, actor_loss, tf.reduce_mean(q1)

  def _after_update_with_gradients(self, obs, critic_grads, critic_vars):
    """`tl.after_update` handing the pruned kernels' gradients to RigL layers."""
    actor_pairs = None
    if self._rigl_actor:

      def actor_gradient(var):
        def compute():
          with tf.GradientTape() as tape:
            loss = -tf.reduce_mean(self.critic_1(obs, self.actor(obs)))
          return tape.gradient(loss, var)
        return compute

      actor_pairs = [(actor_gradient(l.kernel), l.kernel)
                     for l in tl.layers_of(self.actor) if l.needs_gradient]
    tl.after_update(self.actor, actor_pairs)
    critic_pairs = list(zip(critic_grads, critic_vars)) if self._rigl_critics else None
    tl.after_update([self.critic_1, self.critic_2], critic_pairs)

  def _update(self, obs, action, reward, next_obs, discount, normal):
    """Runs K updates on batches shaped [K, B, ...] (`normal`: the standard normal
    draws of target policy smoothing, [K, B, action_dim]); returns mean metrics."""
    k = tf.shape(obs)[0]
    critic_sum = tf.constant(0.0)
    actor_sum = tf.constant(0.0)
    actor_count = tf.constant(0.0)
    q_sum = tf.constant(0.0)
    for i in tf.range(k):
      critic_loss, actor_loss, q = self._one_update(obs[i], action[i], reward[i], next_obs[i],
                                                    discount[i], normal[i])
      critic_sum += critic_loss
      q_sum += q
      has_actor = tf.logical_not(tf.math.is_nan(actor_loss))
      actor_sum += tf.where(has_actor, actor_loss, 0.0)
      actor_count += tf.cast(has_actor, tf.float32)
    kf = tf.cast(k, tf.float32)
    return {"critic_loss": critic_sum / kf, "actor_loss": actor_sum / tf.maximum(actor_count, 1.0),
            "q_mean": q_sum / kf}
