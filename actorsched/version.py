"""The version of actorsched: the one place it is written (pyproject reads it)."""

__version__ = "0.2.0"
