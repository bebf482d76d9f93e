"""Imports every model family so that the registry knows them. Add new families here."""

from tfnmt.models import transformer  # noqa: F401
