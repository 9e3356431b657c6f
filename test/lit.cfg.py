# lit configuration of the aicfc FileCheck suite.
# The venv's bin goes first on PATH (not realpath()'d: that would leave the venv).
import os
import sys

import lit.formats

config.name = "aicfc"  # noqa: F821
config.test_format = lit.formats.ShTest(execute_external=False)  # noqa: F821
config.suffixes = [".mlir"]  # noqa: F821
config.test_source_root = os.path.dirname(__file__)  # noqa: F821
config.excludes = ["lit.cfg.py", "python", "Inputs"]  # noqa: F821
config.environment["PATH"] = os.pathsep.join(  # noqa: F821
    [os.path.dirname(sys.executable), config.environment.get("PATH", "")]  # noqa: F821
)
for var in ("HOME", "TMPDIR"):
    if var in os.environ:
        config.environment[var] = os.environ[var]  # noqa: F821
