"""Fuzzes every custom op of tfrl with random shapes, dtypes, sizes, indices and values.

  python tests/fuzz_ops.py      # 5,000 calls per op, JSON to --out (fuzz_ops.json)
  python tests/fuzz_ops.py --calls=300 --ops=population_delta_net
  python tests/fuzz_ops.py --repro=population_matmul:1234   # one call, printed

The ops: PopulationMatmul, PopulationConv2D, PopulationDeltaNet,
PopulationKernelInfo (library `population`; PopulationDeltaConv2D too in a
library built with TFRL_BUILD_DELTA_CONV2D=1), AleEnvCreate, AleReset,
AleStep, AleObserve, AleActionSet, AleKernelInfo (library `ale`) and
MujocoEnvCreate, MujocoReset, MujocoStep, MujocoObserve (library `mujoco`). About half
the calls get valid input - shapes from empty to a few hundred elements, both
weight dtypes, uint8 and float inputs, float values with NaN, +-inf, huge
(1e30, 3e38), subnormal, zero and negative ones mixed in, empty tensors with
huge dimensions - and the other half input made bad in one named way (a wrong
rank, shape, length, dtype or attr, an index out of range, an output whose
size overflows int64, a destroyed resource...). The calls of each op are in
tests/fuzz/ (population.py, population_delta.py, ale.py, mujoco.py).

Outcomes of a call:
  ok              valid input, result checked (see below)
  rejected        bad input refused with the error that mutation expects
                  (InvalidArgument, or NotFound for a missing resource or ROM,
                  or TypeError for a dtype the op's definition does not allow)
  crash           the process died (a signal); counted, and the fuzzer goes on
  hang            no progress for --timeout seconds
  bad_accepted    bad input, no error
  wrong_error     bad input, another error than expected
  valid_rejected  valid input, an error
  wrong_result    valid input, a wrong result
The last five, and crashes, are bugs (goal: 0).

The MuJoCo ops' results are checked against gymnasium's own envs, played
alongside with the same states and actions (tests/fuzz/mujoco.py). The
population ops' are checked against their one reference, `tfrl.ops.reference`,
summed in float64, within a tolerance worked out per element
(tests/fuzz/checks.py): NaN in, NaN out; inf where the reference has it;
finite values within (K + 2) * 2^-23 * the sum of the magnitudes of the
products. The incremental ops are played for 1 to 4 steps, every step
checked against the full convolution of that step's input.

Calls run in batches of --batch, each batch in a subprocess (address space
limited to --memory_gb): a signal kills only that batch; its log says which
call was running, and the fuzzer resumes with the next call. Every call's
input depends only on (seed, op, call number) - and for the ALE ops on the
calls of its batch before it, which --repro replays - so a finding is
reproduced with --repro=OP:N (an ALE or MuJoCo call, which also depends on
its worker's simulations, with --replay=its worker's jobs: the JSON's bugs
carry the command).
The JSON (--out) holds the figures, the provenance (commit, command, CPU,
date), each mutation's first error message, and every bug found.
"""

import argparse
import collections
import json
import os
import resource
import signal
import subprocess
import sys
import tempfile
import time
import traceback

import numpy as np

_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if _ROOT not in sys.path:
  sys.path.insert(0, _ROOT)
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

POPULATION_OPS = ("population_matmul", "population_conv2d", "population_delta_conv2d",
                  "population_delta_net", "population_kernel_info")
ALE_OPS = ("ale_env_create", "ale_reset", "ale_step", "ale_observe", "ale_action_set",
           "ale_kernel_info")
MUJOCO_OPS = ("mujoco_env_create", "mujoco_reset", "mujoco_step", "mujoco_observe")
# The ops a library built with its options has; `available_ops()` those of this one.
OPS = POPULATION_OPS + ALE_OPS + MUJOCO_OPS
# Ops whose calls depend on the calls of their worker before them (on the
# emulators or simulations the worker keeps, made with its `state_rng`).
STATEFUL = ("ale_", "mujoco_")
# Targets that test the fuzzer itself (a crash and a hang on purpose).
SELFTEST_OPS = ("selftest_crash", "selftest_hang")
OP_IDS = {op: i for i, op in enumerate(OPS + SELFTEST_OPS)}

BUGS = ("crash", "hang", "bad_accepted", "wrong_error", "valid_rejected", "wrong_result")
OUTCOMES = ("ok", "rejected") + BUGS


def available_ops(ops=OPS):
  """`ops` less the per-layer delta op when the library is built without it."""
  from tfrl.ops import population_delta  # pylint: disable=import-outside-toplevel
  if population_delta.have_delta_conv2d_op():
    return tuple(ops)
  return tuple(op for op in ops if op != "population_delta_conv2d")


def gen_selftest_crash(rng):
  del rng
  from tests.fuzz.cases import FuncCase  # pylint: disable=import-outside-toplevel
  return FuncCase(lambda: os.kill(os.getpid(), signal.SIGSEGV), None)


def gen_selftest_hang(rng):
  del rng
  from tests.fuzz.cases import FuncCase  # pylint: disable=import-outside-toplevel
  return FuncCase(lambda: time.sleep(3600), None)


def generator(op):
  """gen_<op> of the module that fuzzes `op` (imported when first needed)."""
  if op in SELFTEST_OPS:
    return globals()["gen_" + op]
  # pylint: disable=import-outside-toplevel
  if op.startswith("ale_"):
    from tests.fuzz import ale as module
  elif op.startswith("mujoco_"):
    from tests.fuzz import mujoco as module
  elif op in ("population_delta_conv2d", "population_delta_net", "population_kernel_info"):
    from tests.fuzz import population_delta as module
  else:
    from tests.fuzz import population as module
  return getattr(module, "gen_" + op)


# ----------------------------------------------------------------------------
# The worker: runs calls, one JSON line before (start) and after (result).


def call_rng(seed, op, i):
  return np.random.default_rng([seed, OP_IDS[op], i])


def run_one(seed, op, i, state_rng, log=None):
  """Generates and runs call i of op; returns its result record. The case
  (its mutation and shapes) goes to `log` before it runs, so that a crash is
  attributed."""
  rng = call_rng(seed, op, i)
  if op.startswith("ale_"):
    from tests.fuzz import ale  # pylint: disable=import-outside-toplevel
    ale.emulators(state_rng)
  elif op.startswith("mujoco_"):
    from tests.fuzz import mujoco  # pylint: disable=import-outside-toplevel
    mujoco.simulations(state_rng)
  record = dict(op=op, i=i)
  try:
    case = generator(op)(rng)
  except Exception as e:  # pylint: disable=broad-except
    record.update(outcome="valid_rejected", mutation=None,
                  detail=f"making the input failed: {type(e).__name__}: {e}"[:400],
                  error_type=type(e).__name__, message=str(e)[:400])
    return record
  record.update(mutation=case.mutation, detail=case.detail[:300])
  if log is not None:
    log.write(json.dumps(dict(op=op, i=i, case=True, mutation=case.mutation,
                              detail=record["detail"])) + "\n")
    log.flush()
  try:
    wrong = case.run()
  except Exception as e:  # pylint: disable=broad-except
    message = getattr(e, "message", None) or str(e)
    record.update(error_type=type(e).__name__, message=message[:500])
    if case.mutation is None:
      record["outcome"] = "valid_rejected"
      record["trace"] = traceback.format_exc()[-1500:]
    elif isinstance(e, case.expect) and message.strip():
      record["outcome"] = "rejected"
    else:
      record["outcome"] = "wrong_error"
    return record
  if case.mutation is not None:
    record["outcome"] = "bad_accepted"
  elif wrong:
    record.update(outcome="wrong_result", message=wrong[:500])
  else:
    record["outcome"] = "ok"
  return record


def worker(args):
  jobs = [j.split(":") for j in args.jobs.split(",")]
  state_rng = np.random.default_rng([args.seed, 999, int(jobs[0][1])])
  with open(args.log, "a") as log:
    for op, first, count in jobs:
      for i in range(int(first), int(first) + int(count)):
        log.write(json.dumps(dict(op=op, i=i, start=True)) + "\n")
        log.flush()
        record = run_one(args.seed, op, i, state_rng, log)
        log.write(json.dumps(record) + "\n")
        log.flush()


# ----------------------------------------------------------------------------
# The parent: deals calls to worker subprocesses and counts.


def _limit_memory(gigabytes):
  def limit():
    size = int(gigabytes * 2**30)
    resource.setrlimit(resource.RLIMIT_AS, (size, size))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    os.setsid()
  return limit


def _run_worker(jobs, seed, timeout, memory_gb, env):
  """Runs one worker over `jobs`; returns (records, started-but-unfinished
  (op, i) or None, its case {mutation, detail}, how it ended, stderr tail)."""
  with tempfile.NamedTemporaryFile("w", suffix=".jsonl", delete=False) as f:
    log_path = f.name
  spec = ",".join(f"{op}:{first}:{count}" for op, first, count in jobs)
  cmd = [sys.executable, os.path.abspath(__file__), "--worker", f"--jobs={spec}",
         f"--seed={seed}", f"--log={log_path}"]
  err_path = log_path + ".err"
  with open(err_path, "w") as err:
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=err, env=env, cwd=_ROOT,
                            preexec_fn=_limit_memory(memory_gb))
  last_size, last_change, ended = -1, time.time(), None
  while True:
    try:
      proc.wait(timeout=0.5)
      break
    except subprocess.TimeoutExpired:
      size = os.path.getsize(log_path)
      if size != last_size:
        last_size, last_change = size, time.time()
      elif time.time() - last_change > timeout:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        ended = "hang"
        break
  records, started, case = [], None, {}
  with open(log_path) as f:
    for line in f:
      if not line.endswith("\n"):
        break
      r = json.loads(line)
      if r.get("start"):
        started, case = (r["op"], r["i"]), {}
      elif r.get("case"):
        case = dict(mutation=r["mutation"], detail=r["detail"])
      else:
        records.append(r)
        started = None
  with open(err_path, errors="replace") as f:
    stderr = f.read()[-3000:]
  os.remove(log_path)
  os.remove(err_path)
  if ended is None:
    rc = proc.returncode
    ended = "ok" if rc == 0 else (f"signal {-rc} ({signal.Signals(-rc).name})" if rc < 0
                                  else f"exit status {rc}")
  return records, started, case, ended, stderr


def _repro(seed, op, i, jobs):
  """The command line that reruns call i of op (an ALE call after the calls
  of its worker before it, which made the emulators' state)."""
  command = f"python tests/fuzz_ops.py --seed={seed} --repro={op}:{i}"
  if op.startswith(STATEFUL):
    command += " --replay=" + ",".join(f"{o}:{f}:{c}" for o, f, c in jobs)
  return command


def fuzz(ops, calls, seed=0, batch=250, timeout=120.0, memory_gb=8.0, env=None, verbose=True):
  """Runs `calls` calls of each op in `ops`; returns the summary dict."""
  env = dict(os.environ if env is None else env)
  env.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
  env["PYTHONPATH"] = os.pathsep.join([_ROOT] + [p for p in env.get("PYTHONPATH", "").split(
      os.pathsep) if p])
  queue = collections.deque((op, 0, calls) for op in ops)
  per_op = {op: dict(collections.Counter({o: 0 for o in OUTCOMES}), calls=0) for op in ops}
  mutations = {op: collections.Counter() for op in ops}
  messages = {op: {} for op in ops}
  bugs = []
  workers = 0
  start = time.time()
  while queue:
    # Up to `batch` calls per worker, across ops.
    jobs, room = [], batch
    while queue and room > 0:
      op, first, count = queue.popleft()
      take = min(count, room)
      jobs.append((op, first, take))
      if take < count:
        queue.appendleft((op, first + take, count - take))
      room -= take
    workers += 1
    records, started, case, ended, stderr = _run_worker(jobs, seed, timeout, memory_gb, env)
    for r in records:
      op = r["op"]
      per_op[op]["calls"] += 1
      per_op[op][r["outcome"]] += 1
      mutations[op][r["mutation"] or "valid"] += 1
      if r["outcome"] == "rejected" and r["mutation"] not in messages[op]:
        messages[op][r["mutation"]] = f"{r['error_type']}: {r['message']}"[:300]
      if r["outcome"] in BUGS:
        bugs.append(dict(r, repro=_repro(seed, op, r["i"], jobs)))
    if ended != "ok":
      if started is None:
        raise RuntimeError(f"a fuzz worker ended with {ended} between calls: {stderr}")
      op, i = started
      outcome = "hang" if ended == "hang" else "crash"
      per_op[op]["calls"] += 1
      per_op[op][outcome] += 1
      mutations[op][case.get("mutation") or "valid"] += 1
      job = next(j for j, (o, f, c) in enumerate(jobs) if o == op and f <= i < f + c)
      first, count = jobs[job][1], jobs[job][2]
      bugs.append(dict(op=op, i=i, outcome=outcome, ended=ended, stderr=stderr[-1500:],
                       mutation=case.get("mutation"), detail=case.get("detail", ""),
                       repro=_repro(seed, op, i, jobs)))
      if verbose:
        print(f"  {op} call {i}: {outcome} ({ended}) [{case.get('mutation') or 'valid'}] "
              f"{case.get('detail', '')}", flush=True)
      # The worker ran its jobs in order: the rest of the crashed job and
      # the jobs after it go back to the front of the queue.
      rest = [(op, i + 1, first + count - i - 1)] if i + 1 < first + count else []
      queue.extendleft(reversed(rest + jobs[job + 1:]))
    if verbose:
      done = sum(v["calls"] for v in per_op.values())
      print(f"  {done} / {calls * len(ops)} calls, {len(bugs)} bugs, "
            f"{time.time() - start:.0f} s", flush=True)
  totals = collections.Counter()
  for v in per_op.values():
    totals.update(v)
  kinds = collections.Counter(f"{b['op']} {b['outcome']} [{b.get('mutation') or 'valid'}]"
                              for b in bugs)
  return dict(
      bug_kinds=dict(kinds.most_common()),
      config=dict(ops=list(ops), calls_per_op=calls, seed=seed, batch=batch,
                  timeout_s=timeout, memory_gb=memory_gb,
                  environment={k: env[k] for k in env if k.endswith("_OPS_LIBRARY") or k in (
                      "TFRL_POPULATION_ISA", "TFRL_POPULATION_NO_AMX", "TFRL_ALE_NO_SIMD")}),
      per_op=per_op, totals=dict(totals), mutations={k: dict(v) for k, v in mutations.items()},
      first_messages=messages, bugs=bugs, workers=workers,
      seconds=round(time.time() - start, 1))


def table(summary):
  cols = ("calls",) + OUTCOMES
  head = ["op"] + list(cols)
  rows = [[op] + [str(v[c]) for c in cols] for op, v in summary["per_op"].items()]
  rows.append(["total"] + [str(summary["totals"].get(c, 0)) for c in cols])
  widths = [max(len(r[i]) for r in rows + [head]) for i in range(len(head))]
  fmt = lambda r: "  ".join(s.rjust(w) if i else s.ljust(w) for i, (s, w) in  # noqa: E731
                            enumerate(zip(r, widths)))
  return "\n".join([fmt(head), fmt(["-" * w for w in widths])] + [fmt(r) for r in rows])


def main(argv=None):
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--calls", type=int, default=5000, help="calls per op")
  parser.add_argument("--ops", default=None,
                      help="comma-separated ops (default: every op the libraries have)")
  parser.add_argument("--seed", type=int, default=0)
  parser.add_argument("--batch", type=int, default=250, help="calls per subprocess")
  parser.add_argument("--timeout", type=float, default=120.0,
                      help="seconds without progress that count as a hang")
  parser.add_argument("--memory_gb", type=float, default=8.0,
                      help="address space limit of each worker")
  parser.add_argument("--out", default="fuzz_ops.json",
                      help="JSON path (benchmarks/results/fuzz_ops_<machine>.json to keep it)")
  parser.add_argument("--repro", help="OP:N runs call N of OP here and prints it")
  parser.add_argument("--replay", default=None,
                      help="with --repro of an ALE or MuJoCo op: its worker's jobs "
                      "(OP:FIRST:COUNT,...), run in order up to the call")
  parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
  parser.add_argument("--jobs", help=argparse.SUPPRESS)
  parser.add_argument("--log", help=argparse.SUPPRESS)
  args = parser.parse_args(argv)
  if args.worker:
    return worker(args)
  if args.repro:
    op, i = args.repro.split(":")
    i = int(i)
    jobs = [(o, int(f), int(c)) for o, f, c in (j.split(":") for j in args.replay.split(","))
           ] if args.replay else [(op, i, 1)]
    state_rng = np.random.default_rng([args.seed, 999, jobs[0][1]])
    for o, first, count in jobs:
      for j in range(first, first + count):
        record = run_one(args.seed, o, j, state_rng)
        if (o, j) == (op, i):
          print(json.dumps(record, indent=1))
          return 0
    print(f"{op}:{i} is not in --replay")
    return 1
  ops = [o for o in args.ops.split(",") if o] if args.ops else list(available_ops())
  unknown = [o for o in ops if o not in OPS + SELFTEST_OPS]
  if unknown:
    parser.error(f"unknown ops {unknown}; known: {', '.join(OPS)}")
  summary = fuzz(ops, args.calls, args.seed, args.batch, args.timeout, args.memory_gb)
  print(table(summary))
  for kind, count in summary["bug_kinds"].items():
    print(f"{count:6d}  {kind}")
  for bug in summary["bugs"][:30]:
    print(f"BUG {bug['op']} call {bug['i']}: {bug['outcome']} "
          f"[{bug.get('mutation') or 'valid'}] {bug.get('message') or bug.get('ended', '')}"
          f"\n    {bug.get('detail', '')}\n    repro: {bug['repro']}")
  from benchmarks import provenance  # pylint: disable=import-outside-toplevel
  summary = dict(provenance.provenance(), **summary)
  if args.out:
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out, "w") as f:
      json.dump(summary, f, indent=1, default=str)
    print(f"wrote {args.out}")
  return 0 if not summary["bugs"] else 1


if __name__ == "__main__":
  sys.exit(main())
