"""Deep GA (Such et al. 2017) and random search over seed-chain genomes.

Each generation:
  1. every individual plays `episodes_per_eval` episodes (pipelined, batched);
  2. the top `elite_candidates` (plus the current elite) are re-evaluated on
     `elite_episodes` more episodes; the best mean becomes the elite;
  3. the next population is the elite, unchanged, plus `population - 1`
     children, each a uniformly chosen parent among the top `truncation`
     with one mutation theta += mutation_power * noise[offset].

The children depend only on step 1's ranking, so they are drawn before step
2. With `overlap_elite` (and an evaluator that can: the local one) they play
in one call with the elite candidates: the children's episodes (the next
generation's step 1) fill the slots the candidates leave idle, and the next
elite, the best candidate, plays its own step-1 episodes as soon as the last
candidate's episode ends; the next generation then goes straight to its
ranking. Otherwise they are handed to the evaluator (`prepare`), which may
build their weights while the elite candidates play. Each child's parent's
episode length tells the evaluator which networks to start first. Every
episode starts from a seed of (seed, generation, phase, individual,
episode), so a run gives the same result on any evaluator, overlapped or not.

Random search (`random_search=True`, "the GA with no selection") draws a fresh
random population every generation and keeps the best re-evaluated
individual ever seen as the elite.

With observation normalization (`--obs_norm`,
`tfrl/neuroevolution/normalization.py`) every call of a generation, the elite
candidates' re-evaluation included, plays with the statistics fixed at its
start; a fraction of step 1's episodes update them afterwards. The elite
(always among the candidates) is thus scored, and exported, with the
statistics of the generation that last scored it.
"""

import time
from typing import Dict, List, Optional

import numpy as np

from tfrl.neuroevolution import evaluators
from tfrl.neuroevolution import genome as genome_lib
from tfrl.neuroevolution import search
from tfrl.neuroevolution import timing
from tfrl.neuroevolution.metrics import generation_metrics
from tfrl.neuroevolution.metrics import rankable
from tfrl.ga.config import GAConfig

# The evaluation calls of a generation, for `evaluators.episode_seeds`.
POPULATION_PHASE, ELITE_PHASE = 0, 1




class GeneticAlgorithm(search.Search):
  """The GA (and random search) over an `evaluators.Evaluator` (`search.Search`)."""

  name = "ga"
  config_type = GAConfig

  def __init__(self, config: GAConfig, layout, table, evaluator: evaluators.Evaluator):
    super().__init__(config, layout, table, evaluator)
    self.name = "random_search" if config.random_search else "ga"
    self.population: Optional[List[genome_lib.Genome]] = None
    self.elite: Optional[genome_lib.Genome] = None
    # Each individual's expected episode length (env steps), or None.
    self._expected_steps: Optional[np.ndarray] = None
    # The population's result, when it played with the last elite candidates.
    self._played: Optional[evaluators.EvalResult] = None

  def _rng(self, stream: int) -> np.random.Generator:
    return np.random.default_rng([self.config.seed, self.generation, stream])

  def _random_genomes(self, rng, count) -> List[genome_lib.Genome]:
    offsets = self.table.sample_offsets(rng, self.genome_layout.dim, count)
    return [genome_lib.Genome(int(o)) for o in offsets]

  def _overlaps(self, candidates) -> bool:
    """Whether the elite candidates play in one call with the next population
    (its elite apart, for the GA): with overlap_elite, no observation
    normalization (the next population plays with statistics that the
    candidates' generation updates) and an evaluator that can."""
    cfg = self.config
    count = len(candidates) + cfg.population - (0 if cfg.random_search else 1)
    return (cfg.overlap_elite and self.normalizer is None
            and self.evaluator.can_overlap(count))

  def step(self) -> Dict[str, float]:
    """Runs one generation; returns its metrics."""
    cfg = self.config
    start = time.time()
    breakdown = timing.Breakdown()
    if self.population is None:
      self.population = self._random_genomes(self._rng(0), cfg.population)
    pop = self.population
    res, self._played = self._played, None  # played with the last generation's elite
    played = 0  # frames of the episodes this step plays
    if res is None:
      res = self._evaluate_population(breakdown, pop)
      played += res.frames
    fitness = res.fitness
    frames = res.frames
    # NaN returns rank last (never a parent); generation_metrics counts them.
    order = np.argsort(-rankable(fitness), kind="stable")

    top = min(cfg.elite_candidates,
              self.evaluator.capacity - (0 if self.elite is None else 1))
    candidates = [pop[i] for i in order[:top]]
    if self.elite is not None and self.elite not in candidates:
      candidates.append(self.elite)

    # The next population but its elite depends only on this ranking: draw
    # it now, so that it can play (or its weights be built) while the elite
    # candidates play.
    children, expected = self._children(pop, order, res)
    elite_seeds = self._seeds(ELITE_PHASE, len(candidates), cfg.elite_episodes)
    if self._overlaps(candidates):
      elite_res = self._play_with_next(breakdown, candidates, elite_seeds, children, expected)
    else:
      self.evaluator.prepare(children)
      elite_res = breakdown.evaluate("elite", self.evaluator, candidates, cfg.elite_episodes,
                                     elite_seeds)
    frames += elite_res.frames
    played += elite_res.frames + (self._played.frames if self._played is not None else 0)
    scores = elite_res.fitness
    best = int(np.argmax(rankable(scores)))
    self.elite, self.elite_score = candidates[best], float(scores[best])
    if self.normalizer is not None:
      self.normalizer.end(res)

    if cfg.random_search:
      self._expected_steps = None
    else:
      children[0] = self.elite
      # A child is expected to play about as long as its parent did.
      self._expected_steps = np.concatenate([[elite_res.lengths[best].mean()], expected])
    self.population = children
    calls = sum(breakdown.parts.get(p, 0.0) for p in ("eval", "elite", "overlapped"))
    metrics = generation_metrics(self, fitness, frames, start, calls)
    metrics.update(breakdown.step_metrics())
    # Overlapped, a step plays the next population, not its own: its speed is
    # what it played in its time.
    metrics["played_frames"] = played
    metrics["frames_per_second"] = played / max(metrics["generation_seconds"], 1e-9)
    return metrics

  def _evaluate_population(self, breakdown, pop):
    cfg = self.config
    seeds = self._seeds(POPULATION_PHASE, len(pop), cfg.episodes_per_eval)
    return breakdown.evaluate("eval", self.evaluator, pop, cfg.episodes_per_eval, seeds,
                              expected_steps=self._expected_steps, **self._observing(seeds))

  def _children(self, pop, order, res):
    """The next population (GA: [None] + children, the elite comes first) and
    the children's expected episode lengths (GA: their parents'; else None)."""
    cfg = self.config
    rng = self._rng(1)
    if cfg.random_search:
      return self._random_genomes(rng, cfg.population), None
    parents = [pop[i] for i in order[:cfg.truncation]]
    self.evaluator.remember(parents)
    choice = rng.integers(0, len(parents), size=cfg.population - 1)
    offsets = self.table.sample_offsets(rng, self.genome_layout.dim, cfg.population - 1)
    children = [None] + [parents[c].child(o, cfg.mutation_power)
                         for c, o in zip(choice, offsets)]
    return children, res.lengths.mean(axis=1)[order[:cfg.truncation]][choice]

  def _play_with_next(self, breakdown, candidates, elite_seeds, children, expected):
    """The elite candidates' re-evaluation in one call with the next
    generation's population (GA: its elite, the best candidate, once the
    candidates have played); keeps the population's result for the next step."""
    cfg = self.config
    next_seeds = evaluators.episode_seeds(cfg.seed, self.generation + 1, POPULATION_PHASE,
                                          len(children), cfg.episodes_per_eval)
    first = evaluators.Request(candidates, cfg.elite_episodes, elite_seeds)
    followup = None
    rest = slice(0, None)
    if not cfg.random_search:  # the next population's elite comes first
      rest = slice(1, None)
      followup = evaluators.Followup(lambda r: [int(np.argmax(rankable(r.fitness)))], 1,
                                     cfg.episodes_per_eval, next_seeds[:1])
    second = evaluators.Request(children[rest], cfg.episodes_per_eval, next_seeds[rest],
                                expected)
    elite_res, next_res, elite_next = breakdown.evaluate_overlapped(
        "overlapped", self.evaluator, first, second, followup)
    self._played = next_res if followup is None else evaluators.join_rows(
        [elite_next, next_res])
    return elite_res

  def elite_params(self) -> np.ndarray:
    if self.elite is None:
      raise ValueError("no elite yet: run at least one generation.")
    builder = genome_lib.ParamBuilder(self.table, self.genome_layout.init_scale,
                                      cache_size=0)
    params = builder.build(self.elite, cache=False)
    return self.normalizer.export_params(params) if self.normalizer else params

  def _own_state(self):
    return {
        "population": [g.to_json() for g in self.population],
        "elite": self.elite.to_json() if self.elite is not None else None,
    }, {}

  def _restore_own(self, state: dict, arrays) -> None:
    del arrays  # the GA's state is all JSON
    self.population = [genome_lib.Genome.from_json(g) for g in state["population"]]
    self.elite = (genome_lib.Genome.from_json(state["elite"])
                  if state["elite"] is not None else None)
    self._expected_steps = None
    self._played = None
