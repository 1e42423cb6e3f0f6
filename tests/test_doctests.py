"""The docstrings' examples run, every documented class and function users call has one, and every
documented constant its own documentation.

* One test per module of ``recsys_ltr`` (walked with :mod:`pkgutil`) runs its doctests (the
  ``>>>`` lines of its docstrings, numpydoc's ``Examples`` sections) on generated data; a module
  whose import or examples need a missing optional dependency is skipped, naming it.
* :func:`test_documented_api_has_examples`: every class and function of the autosummary tables of
  ``docs/api/*.rst`` has an ``Examples`` section, except the names of :data:`NO_EXAMPLES` (nothing
  to show a user: exceptions, result records, kernel-facing helpers, the command line's internals).
* :func:`test_documented_constants_have_their_own_docs`: the constants of those pages show their
  own documentation, not their type's docstring.
"""

from __future__ import annotations

import doctest
import importlib
import inspect
import pkgutil
import re
import runpy
from pathlib import Path

import pytest

import recsys_ltr

ROOT = Path(__file__).resolve().parents[1]
OPTIONAL = ("ray", "lightfm", "lightgbm")
FLAGS = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE

#: Documented names with nothing to show in an example, by reason.
NO_EXAMPLES = {
    # exceptions and warnings: raised by the library, not called
    "recsys_ltr.UnknownIdError",
    "recsys_ltr.datasets.ChecksumError",
    "recsys_ltr.metric_learning.gmml.SingularScatterWarning",
    # result records: returned by the functions whose examples show them
    "recsys_ltr.executors.TaskStats",
    "recsys_ltr.warp.WarpStats",
    "recsys_ltr.warp.Minibatch",
    "recsys_ltr.eval.results.FoldResult",
    "recsys_ltr.eval.results.Experiment",
    # abstract bases: their subclasses' examples show the interface
    "recsys_ltr.models.Recommender",
    "recsys_ltr.febr.training.OptADGRecommender",
    "recsys_ltr.febr.training.OptADG",  # the loop over the engine's trusted state: FEBR's examples run it
    "recsys_ltr.executors.Executor",
    "recsys_ltr.ltr.QueryRanker",
    # numba kernels and the helpers that feed them checked arrays
    "recsys_ltr.warp.dot_score",
    # the unchecked entry points of the sampler's kernels: WarpSampler.sgd / .minibatch show them
    "recsys_ltr.warp.warp_sgd",
    "recsys_ltr.warp.warp_minibatch",
    "recsys_ltr.warp.dot_update",
    "recsys_ltr.executors.method_block",
    "recsys_ltr.executors.check_model_users",
    "recsys_ltr.executors.user_stream",
    "recsys_ltr.ltr.listwise.listwise_objective",
    # the command line's internals (python -m recsys_ltr.eval; docs/api/cli.rst shows the commands)
    "recsys_ltr.eval.runner.run_experiment",
    "recsys_ltr.eval.results.table_metrics",
    "recsys_ltr.eval.results.selection_metric",
    "recsys_ltr.eval.results.filtered_name",
    "recsys_ltr.eval.results.method_of",
    "recsys_ltr.eval.runner.check_parts",
    "recsys_ltr.eval.tuning.tune_and_test",
    "recsys_ltr.eval.cache.UnitCache",
    "recsys_ltr.eval.cache.TrialLog",
    "recsys_ltr.eval.report.summarize",
    "recsys_ltr.eval.report.paired_tests",
    "recsys_ltr.eval.report.format_table",
    "recsys_ltr.eval.report.error_caption",
    "recsys_ltr.eval.report.plot_metric",
    "recsys_ltr.eval.report.metric_figure",
    "recsys_ltr.eval.report.write_outputs",
    "recsys_ltr.eval.methods.Method",
}


def _modules() -> list[str]:
    return sorted(m.name for m in pkgutil.walk_packages(recsys_ltr.__path__, "recsys_ltr."))


def _import(name: str):
    """The module, or a skip naming the optional dependency it needs."""
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as exc:
        if (exc.name or "").split(".")[0] in OPTIONAL:
            pytest.skip(f"{name} needs the optional dependency {exc.name}")
        raise


@pytest.mark.parametrize("name", _modules())
def test_doctests(name, tmp_path, monkeypatch):
    module = _import(name)
    monkeypatch.chdir(tmp_path)  # examples that save files write here
    finder = doctest.DocTestFinder(exclude_empty=True)
    runner = doctest.DocTestRunner(optionflags=FLAGS)
    report = []
    for test in finder.find(module, name, globs={}):  # each example imports what it uses
        runner.run(test, out=report.append)
    missing = re.search(rf"No module named '({'|'.join(OPTIONAL)})", "".join(report))
    if missing:
        pytest.skip(f"an example of {name} needs the optional dependency {missing.group(1)}")
    assert runner.failures == 0, "".join(report)


def documented_api() -> list[tuple[str, object]]:
    """``(qualified name, object)`` of every entry of the autosummary tables and ``autodata``
    directives of ``docs/api/*.rst``, qualified by the page's current module as Sphinx resolves it
    (the models' table, ``api/_models.rst``, written as the docs' build writes it)."""
    runpy.run_path(str(ROOT / "docs" / "conf.py"))
    found = []
    for page in sorted((ROOT / "docs" / "api").glob("*.rst")):
        current, in_table = None, False
        for line in page.read_text(encoding="utf-8").splitlines():
            directive = re.match(r"\.\. (currentmodule|automodule|autodata):: (\S+)", line)
            entry = None
            if directive and directive.group(1) == "autodata":
                entry, in_table = directive.group(2), False
            elif directive:
                current, in_table = directive.group(2), False
            elif line.startswith(".. autosummary::"):
                in_table = True
            elif in_table and line.strip() and not line.startswith("   "):
                in_table = False
            elif in_table and line.strip() and not line.strip().startswith(":"):
                entry = line.strip()
            if entry:
                name = entry if entry.startswith("recsys_ltr.") else f"{current}.{entry}"
                found.append((name, _resolve(name)))
    return found


def _resolve(name: str):
    module, attribute = name, []
    while True:
        try:
            obj = importlib.import_module(module)
            break
        except ModuleNotFoundError:
            module, last = module.rsplit(".", 1)
            attribute.insert(0, last)
    for part in attribute:
        obj = getattr(obj, part)
    return obj


def has_examples(obj) -> bool:
    return bool(re.search(r"^Examples\n-{8,}$", inspect.getdoc(obj) or "", re.MULTILINE))


def test_documented_api_has_examples():
    api = {name: obj for name, obj in documented_api() if inspect.isclass(obj) or callable(obj)}
    assert len(api) > 100, "the autosummary tables were not found"
    missing = sorted(n for n, obj in api.items() if not has_examples(obj) and n not in NO_EXAMPLES)
    assert not missing, f"add an Examples section to: {missing}"
    stale = sorted(n for n in NO_EXAMPLES if n not in api or has_examples(api[n]))
    assert not stale, f"remove from NO_EXAMPLES (documented with Examples, or no longer in docs/api): {stale}"


def test_documented_constants_have_their_own_docs():
    """A documented constant shows its ``#:`` comment, not its type's docstring (``tuple``'s "Built-in
    immutable sequence"): Sphinx finds the comment only in the module the constant is documented
    under, so a constant re-exported by a package is documented under its defining module."""
    analyzer = pytest.importorskip("sphinx.pycode").ModuleAnalyzer
    constants = [name for name, obj in documented_api() if not (inspect.isclass(obj) or callable(obj))]
    assert len(constants) >= 10, "the constants of the API pages were not found"
    undocumented = [
        name
        for name in constants
        if ("", name.rsplit(".", 1)[1]) not in analyzer.for_module(name.rsplit(".", 1)[0]).find_attr_docs()
    ]
    assert not undocumented, f"give these a #: comment where they are documented: {undocumented}"
