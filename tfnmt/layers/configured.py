"""`Configured`: a layer names its constructor arguments once, in `set_config`, which keeps them
on the layer and makes them its config."""


class Configured:
    """Comes before `keras.layers.Layer` in a layer's bases. A mixin rather than a Layer: every
    Layer class of tfnmt is a layer of its own, with a case in tests/layers/test_every_layer.py."""

    _config_names = ()

    def set_config(self, **arguments):
        """Called in `__init__` after `super().__init__`: sets each argument on the layer under its
        name. `get_config` records the values set here, so a value the layer normalises (to int,
        to a tuple) is recorded normalised, and `from_config` gives it back unchanged."""
        for name, value in arguments.items():
            setattr(self, name, value)
        # Added to, not replaced: a subclass's arguments join its base class's.
        self._config_names += tuple(arguments)

    def get_config(self):
        return dict(super().get_config(), **{name: getattr(self, name) for name in self._config_names})
