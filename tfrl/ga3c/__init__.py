"""GA3C (Babaeizadeh et al., ICLR 2017) in TensorFlow graphs.

Entry point: `python -m tfrl.ga3c` (see `__main__`). Library:

  GA3CConfig       typed run configuration          (config.py)
  LearnerConfig    the loss and its settings        (config.py)
  build            the run for run_loop.run          (system.py)
  GA3C             the system: loops, threads, stats (system.py; build's job makes it)
  make_network     the actor-critic of a config     (network.py)
  Queues           typed bounded FIFOQueues          (queues.py)
  AgentPool        agents owning slices of env slots (agents.py)
  Predictor        batched forward passes            (predictor.py)
  Trainer          batched learner updates           (trainer.py)
  Learner          a3c / vtrace / appo updates       (learner.py; losses.py, vtrace.py)
  DynamicAdjuster  NA/NP/NT hill climbing            (adjuster.py)
  Stats            console + TensorBoard             (stats.py)
"""

from tfrl.ga3c.adjuster import DynamicAdjuster
from tfrl.ga3c.agents import AgentPool
from tfrl.ga3c.config import GA3CConfig, LearnerConfig
from tfrl.ga3c.learner import Learner, a3c_loss, n_step_returns
from tfrl.ga3c.network import make_network
from tfrl.ga3c.predictor import Predictor
from tfrl.ga3c.queues import Queues
from tfrl.ga3c.stats import Stats
from tfrl.ga3c.system import GA3C, build
from tfrl.ga3c.trainer import Trainer
