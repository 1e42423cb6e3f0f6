"""Every benchmark script still runs as far as its command line: its imports resolve against the
package as it is now and ``--help`` builds its parser.  A removed or renamed name a script imports
(``bench_ease.py`` imported an EASE helper for months after it was gone) fails here, not on the
day somebody reruns a table."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCRIPTS = sorted(p for p in (ROOT / "benchmarks").glob("*.py") if not p.name.startswith("_"))

#: Runs each script given on its command line as ``script --help`` in this one process (a
#: process per script would pay the package's import 24 times); prints the ones that fail.
_RUNNER = """
import runpy, sys, traceback
failed = []
for path in sys.argv[1:]:
    sys.argv = [path, "--help"]
    sys.path.insert(0, str(__import__("pathlib").Path(path).parent))
    try:
        runpy.run_path(path, run_name="__main__")
        failed.append(f"{path}: ran without exiting on --help")
    except SystemExit as exc:
        if exc.code not in (0, None):
            failed.append(f"{path}: --help exited with {exc.code}")
    except BaseException:
        failed.append(f"{path}: " + traceback.format_exc(limit=-2))
    finally:
        sys.path.pop(0)
print("FAILED:" + repr(failed))
"""


def test_every_benchmark_script_imports_and_builds_its_command_line():
    assert len(SCRIPTS) >= 20
    done = subprocess.run(
        [sys.executable, "-c", _RUNNER, *map(str, SCRIPTS)], capture_output=True, text=True, timeout=600, cwd=ROOT
    )
    assert done.returncode == 0, done.stderr[-3000:]
    report = done.stdout.rsplit("FAILED:", 1)[-1].strip()
    assert report == "[]", report
