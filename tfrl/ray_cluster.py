"""Starting or joining Ray for a run (--ray_address), the same for every algorithm.

    ray, started = ray_cluster.connect("local")   # a Ray instance of this process
    ...
    ray_cluster.disconnect(ray, started)          # stops it if `connect` started it

Addresses: 'local' starts a Ray instance inside this process, its nodes on
the loopback address; 'auto' or HOST:PORT join a running cluster (`ray start`;
token authentication from RAY_AUTH_MODE / RAY_AUTH_TOKEN in the environment,
docs/scaling.md). A process where Ray already runs (a test's cluster) keeps
it. Ray is imported only here, when a run asks for it.
"""

import os
import re
from typing import Optional, Tuple

# Set to "0" before Ray is imported, Ray gives its nodes the loopback address
# (it was meant for single-machine Ray on Windows and macOS).
LOOPBACK_ENV = "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"
ADDRESSES = "'' (no Ray), 'local', 'auto' or HOST:PORT"


def check_address(address: str, flag: str = "--ray_address") -> None:
  """Raises ValueError naming `flag` unless `address` is one of ADDRESSES."""
  if address in ("", "local", "auto") or re.fullmatch(r"[^:\s]+:\d{1,5}", address):
    return
  raise ValueError(f"{flag} must be {ADDRESSES}, got {address!r}.")


def connect(address: str, *, object_store_memory: Optional[int] = None,
            log_to_driver: bool = True) -> Tuple[object, bool]:
  """(the ray module, whether this call started Ray) for a non-empty `address`."""
  check_address(address)
  if not address:
    raise ValueError("connect needs a Ray address: 'local', 'auto' or HOST:PORT.")
  if address == "local":
    # A Ray instance of this process serves this machine only: its nodes
    # take the loopback address rather than the machine's network address.
    os.environ.setdefault(LOOPBACK_ENV, "0")
  try:
    import ray  # pylint: disable=import-outside-toplevel
  except ImportError as e:
    raise ImportError("--ray_address needs Ray: pip install -e '.[ray]'") from e
  if ray.is_initialized():
    return ray, False
  if address == "local":
    # Ray reads the variable once, when it is first imported: a process that
    # imported it earlier (a test process, a notebook) would give this
    # instance the machine's network address. Its constant says the same.
    from ray._private import ray_constants  # pylint: disable=import-outside-toplevel
    ray_constants.ENABLE_RAY_CLUSTER = False
    ray.init(address="local", include_dashboard=False, log_to_driver=log_to_driver,
             object_store_memory=object_store_memory)
  else:
    ray.init(address=address, log_to_driver=log_to_driver)
  return ray, True


def disconnect(ray, started: bool) -> None:
  """Stops the Ray instance `connect` started (a joined cluster keeps running)."""
  if started and ray.is_initialized():
    ray.shutdown()
