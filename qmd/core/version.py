"""The version of qmd: one place (`qmd.__version__`, `pyproject.toml` reads it from here)."""

__version__ = "0.1.0"
