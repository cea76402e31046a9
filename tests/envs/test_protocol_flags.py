"""The env protocol's flags are the same in every entry point: name, type, help.

Each entry point runs in its own process (their flag sets differ); only the
defaults may differ (GA3C's game is PongNoFrameskip-v4, neuroevolution's pong).
"""

import json
import os
import subprocess
import sys
import textwrap

from absl.testing import absltest

from tfrl import flagconfig
from tfrl.envs import EnvProtocol

_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
_ENTRY_POINTS = ("tfrl.ga3c.__main__", "tfrl.ga.__main__", "tfrl.es.__main__",
                 "tfrl.random_search.__main__", "tfrl.td3.__main__", "tfrl.evaluate")

_LISTER = textwrap.dedent("""
    import importlib, json, sys
    from absl import flags
    importlib.import_module(sys.argv[1])
    out = {}
    for name in json.loads(sys.argv[2]):
      flag = flags.FLAGS[name] if name in flags.FLAGS else None
      out[name] = None if flag is None else {
          "type": flag.flag_type(), "help": flag.help, "default": flag.default,
          "module": flags.FLAGS.find_module_defining_flag(name)}
    print(json.dumps(out))
""")


class ProtocolFlagsTest(absltest.TestCase):

  def test_same_flags_in_every_entry_point(self):
    names = sorted(flagconfig.flag_names(EnvProtocol))
    self.assertEqual(names, sorted(EnvProtocol.__dataclass_fields__))
    env = dict(os.environ, PYTHONPATH=_ROOT, TF_CPP_MIN_LOG_LEVEL="3")
    seen = {}
    for module in _ENTRY_POINTS:
      out = subprocess.run([sys.executable, "-c", _LISTER, module, json.dumps(names)],
                           env=env, cwd=_ROOT, capture_output=True, text=True, timeout=300)
      self.assertEqual(out.returncode, 0, out.stderr[-3000:])
      seen[module] = json.loads(out.stdout.strip().splitlines()[-1])
    for name in names:
      with self.subTest(flag=name):
        defined = {m: flags[name] for m, flags in seen.items()}
        missing = [m for m, f in defined.items() if f is None]
        self.assertEqual(missing, [], f"--{name} is not a flag of {missing}")
        self.assertLen({(f["type"], f["help"]) for f in defined.values()}, 1, defined)
        # Defined from the protocol's field, not copied next to it.
        self.assertEqual({f["module"] for f in defined.values()}, {"tfrl.flagconfig"})
    defaults = {m: (f["game"]["default"], f["env"]["default"]) for m, f in seen.items()}
    self.assertEqual(defaults["tfrl.ga3c.__main__"], ("PongNoFrameskip-v4", None))
    self.assertEqual(defaults["tfrl.ga.__main__"], ("pong", None))
    self.assertEqual(defaults["tfrl.td3.__main__"], (None, "Pendulum-v1"))
    self.assertEqual(defaults["tfrl.evaluate"], (None, None))


if __name__ == "__main__":
  absltest.main()
