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

from tfrl import lazy_names

# Each name's module, imported when the name is first asked for: the entry
# point parses and checks its flags (config.py) before TensorFlow is loaded.
_MODULES = {
    "AgentPool": "agents",
    "DynamicAdjuster": "adjuster",
    "GA3C": "system",
    "GA3CConfig": "config",
    "Learner": "learner",
    "LearnerConfig": "config",
    "Predictor": "predictor",
    "Queues": "queues",
    "Stats": "stats",
    "Trainer": "trainer",
    "a3c_loss": "learner",
    "build": "system",
    "make_network": "network",
    "n_step_returns": "learner",
}

__all__ = [
    "AgentPool",
    "DynamicAdjuster",
    "GA3C",
    "GA3CConfig",
    "Learner",
    "LearnerConfig",
    "Predictor",
    "Queues",
    "Stats",
    "Trainer",
    "a3c_loss",
    "build",
    "make_network",
    "n_step_returns",
]

__getattr__ = lazy_names.getattr_of(__name__, _MODULES)
