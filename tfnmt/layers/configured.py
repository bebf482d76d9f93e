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

    def build(self, input_shape):
        """A layer without a build() of its own builds its layers when it first calls them. Keras
        would first trace call() symbolically to create them, and the first real call creates
        them anyway: building a paper-size DenseNMT took 1.4x as long (docs/benchmarks.md,
        "Start-up"). Same variables, same paths (both under the layer's name scope)."""

    def get_config(self):
        return dict(super().get_config(), **{name: getattr(self, name) for name in self._config_names})
