"""Sphinx configuration: the API reference is built from the numpydoc docstrings.

Build (warnings are errors, as in CI)::

    pip install -e ".[docs]"
    python -m sphinx -W --keep-going -b html docs docs/_build/html
"""

import os
import re
import sys

sys.path.insert(0, os.path.abspath(".."))  # the checkout's recsys_ltr, also without an install

import recsys_ltr
import recsys_ltr.models


def _write_model_list():
    """The summary table of docs/api/models.rst: every recommender :mod:`recsys_ltr.models` exports
    (written at each build: a model added to the package is on the page by itself)."""
    names = [n for n in recsys_ltr.models.__all__ if isinstance(getattr(recsys_ltr.models, n), type)]
    names.sort(key=lambda n: (n != "Recommender", n.lower()))
    table = ".. currentmodule:: recsys_ltr.models\n\n.. autosummary::\n   :toctree: ../generated\n   :nosignatures:\n\n"
    table += "".join(f"   {n}\n" for n in names)
    with open(os.path.join(os.path.dirname(__file__), "api", "_models.rst"), "w") as f:
        f.write(table)


_write_model_list()

project = "recsys_ltr"
author = "recsys_ltr contributors"
copyright = "recsys_ltr contributors"
version = release = recsys_ltr.__version__

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.mathjax",
    "sphinx.ext.viewcode",
    "numpydoc",
]

templates_path = ["_templates"]
exclude_patterns = ["_build", "api/_models.rst"]  # included by api/models.rst
root_doc = "index"

# every page, and the generated model table (an included file autosummary does not scan by itself)
autosummary_generate = [
    os.path.relpath(os.path.join(d, f), os.path.dirname(__file__))
    for d, _, files in os.walk(os.path.dirname(__file__))
    if "_build" not in d and "generated" not in d
    for f in files
    if f.endswith(".rst") and f != "_models.rst"
] + ["api/_models.rst"]
autosummary_imported_members = False
autodoc_default_options = {"members": True, "member-order": "bysource"}
autodoc_typehints = "none"  # the numpydoc "Parameters" sections say the types
numpydoc_show_class_members = False  # the class template lists members through autodoc
numpydoc_xref_param_type = False
# scikit-learn's inherited docstrings cite its glossary; nothing else is cross-referenced
nitpicky = True
suppress_warnings = ["autosummary.import_cycle"]

html_theme = "alabaster"
html_theme_options = {
    "description": "Top-N recommendation from implicit feedback by learning to rank",
    "fixed_sidebar": True,
}
html_static_path = []


def _skip_foreign_members(app, what, name, obj, skip, options):
    """Document a class's own and recsys_ltr-inherited members, not scikit-learn's machinery
    (``get_metadata_routing``, ``set_output``, ... cite scikit-learn's own glossary) nor a builtin
    base's methods (a named tuple's ``count`` and ``index``)."""
    module = getattr(obj, "__module__", None) or ""
    if what == "class" and module and not module.startswith("recsys_ltr"):
        return True
    if what == "class" and getattr(getattr(obj, "__objclass__", None), "__module__", None) == "builtins":
        return True
    return None


def _drop_builtin_docstrings(app, what, name, obj, options, lines):
    """A named tuple's field has the generated docstring "Alias for field number 0": show the field
    without it (the class docstring describes its fields)."""
    text = [line for line in map(str.strip, lines) if line and line not in ("..", "!! processed by numpydoc !!")]
    if len(text) == 1 and re.fullmatch(r"Alias for field number \d+", text[0]):
        lines.clear()


def _resolve_reexported(app, env, node, contnode):
    """Objects are documented under the package that re-exports them (``recsys_ltr.neighbors.Affinity``,
    not ``recsys_ltr.neighbors.affinity.Affinity``): a reference written with the defining module's
    name, or unqualified inside that module's docstring, is retried one package up, then as the
    one documented object of that name.  A reference to a private module (``recsys_ltr._io``) is
    shown as code, without a link."""
    if node.get("refdomain") != "py":
        return None
    target = node["reftarget"].lstrip("~.")
    module = node.get("py:module") or ""
    candidates = []
    if "." in target:
        head, name = target.rsplit(".", 1)
        candidates.append(f"{head.rsplit('.', 1)[0]}.{name}" if "." in head else None)
    if module:
        candidates += [f"{module}.{target}", f"{module.rsplit('.', 1)[0]}.{target}"]
    domain = env.get_domain("py")
    for candidate in filter(None, candidates):
        parent = candidate.rsplit(".", 1)[0]
        for full in (candidate, f"{parent.rsplit('.', 1)[0]}.{candidate.rsplit('.', 1)[1]}"):
            if full in domain.objects:
                node["reftarget"] = full
                return domain.resolve_xref(env, node["refdoc"], app.builder, node["reftype"], full, node, contnode)
    if any(part.startswith("_") and not part.startswith("__") for part in f"{module}.{target}".split(".")):
        return contnode
    name = target.rsplit(".", 1)[-1]
    same_name = [
        full
        for full, entry in domain.objects.items()
        if full.rsplit(".", 1)[-1] == name and full.startswith("recsys_ltr.") and not entry.aliased
    ]
    if len(same_name) == 1:  # e.g. SingularScatterWarning, named in GMML's docstring, lives in metric_learning.gmml
        node["reftarget"] = same_name[0]
        return domain.resolve_xref(env, node["refdoc"], app.builder, node["reftype"], same_name[0], node, contnode)
    return None


def setup(app):
    app.connect("autodoc-skip-member", _skip_foreign_members)
    app.connect("autodoc-process-docstring", _drop_builtin_docstrings)
    app.connect("missing-reference", _resolve_reexported)
