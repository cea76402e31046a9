"""GA3C runs for tests, made the one way every run is made:
`run_loop.run(system.build(config))`, which locks the logdir before it builds
the system. The system the run builds is kept for the test to look at.

    system, summary = runs.run(config)        # a whole run

    run = runs.Background(config)             # a run in a thread of its own
    system = run.start()                      # once built (its threads may not run yet)
    ...
    summary = run.stop()                      # asks it to stop; its final save done
"""

import threading
from typing import Any, Callable, Dict, Optional, Tuple

from tfrl import run_loop
from tfrl.ga3c import system as system_lib


def job(config, built: Callable[[system_lib.GA3C], None]) -> run_loop.Job:
  """`system.build(config)`, handing the system to `built` once the skeleton built it
  (before its first step)."""
  return system_lib.build(config).then(built)


def run(config) -> Tuple[system_lib.GA3C, Dict[str, Any]]:
  """A whole run in this thread: (the system it built, its summary)."""
  kept = []
  summary = run_loop.run(job(config, kept.append))
  return kept[0], summary


class Background:
  """A run in a thread of its own.

  Args:
    config: the run's GA3CConfig.
    prepare: called with the system once built, before its first step.
  """

  def __init__(self, config, prepare: Optional[Callable[[system_lib.GA3C], None]] = None):
    self.system: Optional[system_lib.GA3C] = None
    self.summary: Optional[Dict[str, Any]] = None
    self._prepare = prepare
    self._error: Optional[BaseException] = None
    self._built = threading.Event()
    self._thread = threading.Thread(target=self._run, args=(job(config, self._keep),),
                                    name="ga3c_test_run", daemon=True)

  def _keep(self, system) -> None:
    if self._prepare is not None:
      self._prepare(system)
    self.system = system
    self._built.set()

  def _run(self, the_job: run_loop.Job) -> None:
    try:
      self.summary = run_loop.run(the_job)
    except BaseException as e:  # pylint: disable=broad-except
      self._error = e
    finally:
      self._built.set()

  def start(self, timeout: float = 300.0) -> system_lib.GA3C:
    """Starts the run; the system once built."""
    self._thread.start()
    if not self._built.wait(timeout):
      raise AssertionError(f"the GA3C system was not built within {timeout:g} s")
    self._raise()
    return self.system

  def stop(self, timeout: float = 60.0) -> Dict[str, Any]:
    """Asks the run to stop and waits for its final save; the summary."""
    if self.system is not None:
      self.system.stop()
    self._thread.join(timeout)
    if self._thread.is_alive():
      raise AssertionError(f"the GA3C run did not end within {timeout:g} s of stop()")
    self._raise()
    return self.summary

  def _raise(self) -> None:
    if self._error is not None:
      raise self._error
