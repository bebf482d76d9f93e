"""Imports every model family so that the registry knows them. Add new families here."""

from tfnmt.models import convs2s, deep_transformer, deeplau, densenmt, transformer  # noqa: F401
