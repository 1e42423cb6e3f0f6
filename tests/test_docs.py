"""The documentation cannot drift: every Python snippet of README.md and docs/*.rst runs here.

Each page's Python blocks (```` ```python ```` fences in Markdown, ``.. code-block:: python`` in
reStructuredText) run in order in one namespace, in a temporary working directory, once per page;
each block is reported as its own test.  A block that loads a registered data set absent from the
data directory (``datasets.load("name")``, ``load_presplit``, ``load_letor``) is skipped with the
set's name as the reason (CI has no real data; ``RECSYS_LTR_DATA`` points at it here), and so is a
later block of the same page that fails with ``NameError`` on a name such a skipped block would
have defined.  Console blocks (``bash``, ``console``) are not run.
"""

from __future__ import annotations

import os
import re
import traceback
from pathlib import Path

import pytest

from recsys_ltr import datasets

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("**/*.rst"))]
_LOADS = re.compile(r"\bload(?:_letor|_presplit)?\(\s*[\"']([\w.-]+)[\"']")


def python_blocks(path: Path) -> list[tuple[int, str]]:
    """``(line, code)`` of every Python block of a Markdown or reStructuredText page."""
    lines = path.read_text(encoding="utf-8").splitlines()
    blocks = []
    if path.suffix == ".md":
        start = None
        for i, line in enumerate(lines):
            if start is None and line.strip() == "```python":
                start = i + 1
            elif start is not None and line.strip() == "```":
                blocks.append((start + 1, "\n".join(lines[start:i])))
                start = None
        return blocks
    i = 0
    while i < len(lines):
        if re.match(r"\s*\.\. code-block:: (python|pycon)\s*$", lines[i]):
            indent = len(lines[i]) - len(lines[i].lstrip()) + 3
            j = i + 1
            while j < len(lines) and (not lines[j].strip() or lines[j].lstrip().startswith(":")):
                j += 1  # blank lines and options
            body_start, body = j, []
            while j < len(lines) and (not lines[j].strip() or len(lines[j]) - len(lines[j].lstrip()) >= indent):
                body.append(lines[j][indent:])
                j += 1
            blocks.append((body_start + 1, "\n".join(body).rstrip()))
            i = j
        else:
            i += 1
    return blocks


def _missing_data(code: str) -> list[str]:
    present = set(datasets.available(include_ltr=True))
    registered = set(datasets.list_datasets(include_ltr=True))
    return [name for name in dict.fromkeys(_LOADS.findall(code)) if name in registered and name not in present]


_RESULTS: dict[Path, list] = {}


def _run_page(path: Path, workdir: Path) -> list:
    """Run the page's blocks once; per block ``("ok", None)``, ``("skip", reason)`` or
    ``("error", traceback text)``."""
    if path in _RESULTS:
        return _RESULTS[path]
    namespace = {"__name__": f"docs_{path.stem}"}
    results, skipped_because = [], []
    cwd, env = os.getcwd(), os.environ.get(datasets.ENV_VAR)
    # the data directory as the caller's working directory resolves it (../shared/datasets), not the page's
    os.environ[datasets.ENV_VAR] = str(datasets.resolve_data_dir().resolve())
    os.chdir(workdir)
    try:
        for line, code in python_blocks(path):
            missing = _missing_data(code)
            if missing:
                reason = f"needs the data set(s) {', '.join(missing)}, not in {datasets.resolve_data_dir()}"
                results.append(("skip", reason))
                skipped_because.append(reason)
                continue
            try:
                exec(compile(code, f"{path.name}:{line}", "exec"), namespace)
            except NameError as exc:
                if not skipped_because:
                    results.append(("error", traceback.format_exc()))
                else:
                    results.append(("skip", f"uses {exc.name!r} from a skipped block ({skipped_because[-1]})"))
            except Exception:
                results.append(("error", traceback.format_exc()))
            else:
                results.append(("ok", None))
    finally:
        os.chdir(cwd)
        if env is None:
            os.environ.pop(datasets.ENV_VAR)
        else:
            os.environ[datasets.ENV_VAR] = env
    _RESULTS[path] = results
    return results


CASES = [
    pytest.param(path, index, id=f"{path.relative_to(ROOT)}:{line}")
    for path in PAGES
    for index, (line, _) in enumerate(python_blocks(path))
]


@pytest.mark.parametrize("path, index", CASES)
def test_snippet_runs(path, index, tmp_path_factory):
    outcome, detail = _run_page(path, tmp_path_factory.mktemp(path.stem))[index]
    if outcome == "skip":
        pytest.skip(detail)
    assert outcome == "ok", f"the snippet at {path.name} block {index} failed:\n{detail}"


def test_every_page_has_runnable_snippets_found():
    """The extractor sees the blocks (a changed fence syntax would silently test nothing)."""
    assert len(python_blocks(ROOT / "README.md")) >= 2
    assert len(CASES) >= 20


def test_rst_extraction_keeps_indentation_and_stops_at_dedent(tmp_path):
    page = tmp_path / "p.rst"
    page.write_text(
        "Text\n\n.. code-block:: python\n   :caption: x\n\n   for i in range(2):\n       print(i)\n\n   y = 1\n"
        "\nAfter\n\n.. code-block:: bash\n\n   echo no\n"
    )
    assert python_blocks(page) == [(6, "for i in range(2):\n    print(i)\n\ny = 1")]


def test_help_opens_with_our_docstring_without_metadata_routing():
    import pydoc

    from recsys_ltr.models import ALS, BPR, EASE, KUNN, SLIM, ContentItemKNN, ItemKNN, Popularity, RP3beta, UserKNN
    from recsys_ltr.neighbors import ContentAffinity

    for cls in (ItemKNN, UserKNN, KUNN, SLIM, RP3beta, EASE, ALS, BPR, Popularity, ContentItemKNN, ContentAffinity):
        head = pydoc.render_doc(cls, renderer=pydoc.plaintext).splitlines()[:8]
        assert any(cls.__doc__.splitlines()[0] in line for line in head), head
        requests = [n for n in dir(cls) if n.startswith("set_") and n.endswith("_request")]
        assert requests == [], f"{cls.__name__} has scikit-learn's metadata-routing methods {requests}"


def test_settings_table_is_regenerated_from_the_results():
    """docs/tuned_settings.inc is what docs/make_settings_table.py writes from eval/results."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("make_settings_table", ROOT / "docs" / "make_settings_table.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert module.OUTPUT.read_text() == module.render(), "rerun python docs/make_settings_table.py"
    assert module.describe({"lam": 0.001, "affinity_params": {"l1": 1.0, "l2": 1.0}, "k": 50}, "k") == (
        "k=50, affinity_params.l1=1, affinity_params.l2=1, lam=0.001"
    )


_API_MODULES = (
    "recsys_ltr", "recsys_ltr.models", "recsys_ltr.febr", "recsys_ltr.ltr", "recsys_ltr.metric_learning",
    "recsys_ltr.neighbors", "recsys_ltr.metrics", "recsys_ltr.split", "recsys_ltr.datasets", "recsys_ltr.executors",
    "recsys_ltr.warp", "recsys_ltr.query_metrics",
)  # fmt: skip


def test_api_summaries_are_whole_sentences():
    """The API tables show each docstring up to its first ". ": "Stacked FEBR: OPT-ADG (Alg." was
    FEBR's summary.  A first sentence must close its brackets and literals and not end on an abbreviation."""
    import importlib
    import inspect

    cut = []
    for module in _API_MODULES:
        mod = importlib.import_module(module)
        for name in mod.__all__:
            obj = getattr(mod, name)
            if not (inspect.isclass(obj) or inspect.isfunction(obj)):
                continue
            first = re.split(r"(?<=\.)\s", " ".join((inspect.getdoc(obj) or "").split("\n\n")[0].split()))[0]
            unclosed = first.count("(") != first.count(")") or first.count("``") % 2
            if unclosed or re.search(r"\b(Alg|Eq|sec|Def|al|e\.g|i\.e)\.$", first):
                cut.append(f"{module}.{name}: {first!r}")
    assert not cut, cut
