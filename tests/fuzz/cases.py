"""A fuzz call (`Case`) and the random values the generators draw."""

import numpy as np
import tensorflow as tf

F32_MAX = float(np.finfo(np.float32).max)
F32_TINY = float(np.finfo(np.float32).tiny)  # smallest normal
SPECIALS = np.array([np.nan, np.inf, -np.inf, 3e38, -3e38, 1e30, -1e30, 1e-40, -1e-40, -0.0,
                     0.0, 1e-20], np.float32)
INT32_EXTREMES = (-2**31, 2**31 - 1)


class Case:
  """One fuzz call: `run()` calls the op(s) and checks; `mutation` names the
  bad input (None when valid) and `expect` the errors it must raise."""

  def __init__(self, mutation=None, expect=None, detail=""):
    self.mutation = mutation
    self.expect = expect or ()
    self.detail = detail

  def run(self):
    """Calls the op; raises on an op error; returns an error string when a
    valid call's result is wrong, else None."""
    raise NotImplementedError


class FuncCase(Case):

  def __init__(self, fn, mutation=None, expect=None, detail=""):
    super().__init__(mutation, expect, detail)
    self._fn = fn

  def run(self):
    return self._fn()


def bad_create_case(create, mutation, expect, detail):
  """A call that makes an env batch from bad input (`create()` returns its
  handle), which must raise `expect`; a batch made anyway is destroyed."""
  def run():
    handle = create()
    tf.raw_ops.DestroyResourceOp(resource=handle, ignore_lookup_error=True)
  return FuncCase(run, mutation, expect, detail)


def shape_case(fn, want, what, detail):
  """A valid call (empty inputs with huge dimensions) whose result must have
  shape `want`."""
  def run():
    got = tuple(fn().shape)
    return None if got == tuple(want) else f"{what} shape {got}, expected {tuple(want)}"
  return FuncCase(run, None, detail=detail)


def invalid():
  return (tf.errors.InvalidArgumentError,)


def invalid_or_type():
  return (tf.errors.InvalidArgumentError, TypeError, ValueError)


def rand_floats(rng, shape, specials=0.0, scale=None):
  scale = float(rng.choice([1.0, 1e-3, 1e3])) if scale is None else scale
  a = (rng.standard_normal(shape) * scale).astype(np.float32)
  if specials > 0 and a.size:
    mask = rng.random(shape) < specials
    a[mask] = rng.choice(SPECIALS, int(mask.sum()))
  return a


def special_rate(rng):
  return float(rng.choice([0.0, 0.0, 0.002, 0.02, 0.2]))


def size(rng, small, large=None, p_large=0.1, p_zero=0.05):
  if rng.random() < p_zero:
    return 0
  if large is not None and rng.random() < p_large:
    return int(rng.integers(*large))
  return int(rng.integers(*small))


def bf16_round(a):
  """float32 values as bfloat16 would hold them (tf.cast: nearest even)."""
  return tf.cast(tf.cast(tf.constant(a, tf.float32), tf.bfloat16), tf.float32).numpy()


def weights(rng, shape, dtype, specials):
  """(the op's w, its values as float32)."""
  w = rand_floats(rng, shape, specials, scale=float(rng.choice([1.0, 0.1, 10.0])))
  if dtype == "bfloat16":
    return tf.cast(tf.constant(w), tf.bfloat16), bf16_round(w)
  return tf.constant(w), w


def network_index(rng, batch, pop, active):
  """Each row's network; inactive rows may hold any index."""
  index = rng.integers(0, max(pop, 1), size=batch).astype(np.int32)
  for b in range(batch):
    if not active[b] and rng.random() < 0.3:
      index[b] = rng.choice([pop, -1, *INT32_EXTREMES])
  return index


def input_scale(rng):
  if rng.random() < 0.6:
    return 1.0
  return float(rng.choice([1 / 255, 0.5, -2.0, 0.0, 1e30, np.nan, np.inf, 1e-40, 3e38]))


def conv_input(rng, shape, tx, spec):
  if tx == "uint8":
    return rng.integers(0, 256, size=shape).astype(np.uint8)
  return rand_floats(rng, shape, spec)


def next_input(rng, x, tx, spec):
  """x with a fraction of its values redrawn (specials can come and go)."""
  x = x.copy()
  if x.size == 0:
    return x
  mask = rng.random(x.shape) < rng.choice([0.01, 0.05, 0.3])
  if tx != "uint8":
    # Values that were special leave now and then.
    mask |= (~np.isfinite(x) | (np.abs(x) > 1e20)) & (rng.random(x.shape) < 0.5)
  x[mask] = conv_input(rng, x.shape, tx, spec)[mask]
  return x


def empty_bias():
  return tf.zeros([0, 0])


def bad_indices(rng, num_slots: int):
  """(kind, int32 indices) that a batched env op must reject for `num_slots`
  slots: out of range, negative, a slot twice, or not a vector."""
  kind = str(rng.choice(["out_of_range", "negative", "duplicate", "rank"]))
  if kind == "out_of_range":
    return kind, np.array([int(rng.choice([num_slots, num_slots + 5, 2**31 - 1]))], np.int32)
  if kind == "negative":
    return kind, np.array([int(rng.choice([-1, -2**31]))], np.int32)
  if kind == "duplicate":
    return kind, np.array([0, 0], np.int32)
  return kind, np.zeros((1, 1), np.int32)


def random_slots(rng, slots):
  """A random subset of the slot numbers `slots`, in random order, as int32."""
  slots = list(slots)
  rng.shuffle(slots)
  return np.array(slots[:int(rng.integers(0, len(slots) + 1))], np.int32)


class EnvPool:
  """A fuzz worker's live batches of an env op family (dicts with a
  "handle"): at most `size`, the oldest destroyed first; the last two
  destroyed handles and a resource of another kind serve as bad handles."""

  _WORKER = {}  # class -> the worker's one pool of that class

  @classmethod
  def of_worker(cls, rng) -> "EnvPool":
    """The worker's one pool of this class, made with `rng` on first use."""
    if cls not in EnvPool._WORKER:
      EnvPool._WORKER[cls] = cls(rng)
    return EnvPool._WORKER[cls]

  def __init__(self, size: int = 3):
    self.pool = []
    self.dead = []  # handles of destroyed batches
    self.variable = tf.Variable(1.0)  # a resource of another kind
    self._size = size

  def add(self, env: dict) -> dict:
    self.pool.append(env)
    if len(self.pool) > self._size:
      self.destroy(self.pool.pop(0))
    return env

  def release(self, env: dict) -> None:
    """Frees what a batch holds besides its handle (nothing here)."""

  def destroy(self, env: dict) -> None:
    tf.raw_ops.DestroyResourceOp(resource=env["handle"], ignore_lookup_error=True)
    self.release(env)
    self.dead.append(env["handle"])
    del self.dead[:-2]

  def pick(self, rng) -> dict:
    return self.pool[int(rng.integers(0, len(self.pool)))]

  def handle_mutation(self, rng):
    """(mutation, a bad handle, the errors it must raise)."""
    if rng.random() < 0.5 and self.dead:
      return "destroyed_handle", self.dead[-1], (tf.errors.NotFoundError,
                                                 tf.errors.InvalidArgumentError)
    return "wrong_resource_kind", self.variable.handle, (tf.errors.InvalidArgumentError,
                                                          tf.errors.NotFoundError)
