"""Imports every model family so that the registry knows them. Add new families here."""

from tfnmt.models import (conv_encoder, convs2s, ctc_nat, deep_transformer, deeplau,  # noqa: F401
                          densenmt, transformer)
