"""tfnmt: neural machine translation research architectures on TensorFlow 2 / Keras 3.

The Python API is `tfnmt.Translator` (tfnmt/api.py); `import tfnmt` stays cheap: the API, and
TensorFlow behind it, load when first named."""

__version__ = "0.1.0"

_API = ("Translator", "Translation", "Score", "UnsupportedError")
__all__ = ["__version__", *_API]


def __getattr__(name):
    if name in _API:
        from tfnmt import api
        return getattr(api, name)
    raise AttributeError(f"module 'tfnmt' has no attribute {name!r}")


def __dir__():
    return sorted(list(globals()) + list(_API))
