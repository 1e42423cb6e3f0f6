"""recsys_ltr: top-N recommendation from implicit feedback by learning to rank."""

from recsys_ltr import _compile_notice  # noqa: F401  (a one-line notice while kernels first compile)

__version__ = "0.1.0"
__all__ = ["Interactions", "UnknownIdError", "__version__"]


def __getattr__(name):
    # Lazy, so that `import recsys_ltr.<submodule>` does not pay for pandas.
    if name in ("Interactions", "UnknownIdError"):
        from recsys_ltr import interactions

        return getattr(interactions, name)
    raise AttributeError(f"module 'recsys_ltr' has no attribute {name!r}")
