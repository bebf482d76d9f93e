"""Naming a model class: `@register(NAME)`.

A leaf: it imports no model. `tfnmt/models/catalog.py` imports every family (which registers
them) and answers `--model NAME`.
"""

_MODELS = {}


def register(name):
    def decorator(cls):
        if name in _MODELS:
            raise ValueError(f"model {name!r} registered twice")
        cls.registry_name = name
        _MODELS[name] = cls
        return cls
    return decorator


def registered():
    """{name: class} of the models registered so far (catalog.py imports them all)."""
    return dict(_MODELS)
