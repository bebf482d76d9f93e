"""Naming a model class: `@register(NAME)`.

A leaf: it imports no model. `tfnmt/models/catalog.py` imports every family (which registers
them) and answers `--model NAME`.
"""

from tfnmt.registries import registrar

_MODELS = {}
register = registrar(_MODELS, "model", "registry_name")


def registered():
    """{name: class} of the models registered so far (catalog.py imports them all)."""
    return dict(_MODELS)
