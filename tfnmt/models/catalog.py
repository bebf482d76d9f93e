"""Imports every model family so that the registry knows them. Add new families here."""

from tfnmt.models import convs2s, transformer  # noqa: F401
