"""Named classes: the one way models (models/registry.py) and encoder and decoder parts
(layers/part.py) are registered under the names flags and config.json use."""


def registrar(registry, kind, attribute):
    """`register(NAME)`, a class decorator that puts the class in `registry` (a dict) under NAME
    and sets its `attribute` to NAME; a name registered twice is an error (two modules would
    otherwise silently answer to one flag value)."""
    def register(name):
        def decorator(cls):
            if name in registry:
                raise ValueError(f"{kind} {name!r} registered twice")
            setattr(cls, attribute, name)
            registry[name] = cls
            return cls
        return decorator
    return register
