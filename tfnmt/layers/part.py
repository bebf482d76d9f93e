"""The base of encoders and decoders (tfnmt/encoders, tfnmt/decoders): parts a model wires."""

import keras


class Part(keras.layers.Layer):
    """A group of layers that a model drives through the part's methods (`encode`, `decode`,
    `step`, ...), never by calling the part itself. A part that is not called opens no name
    scope: its layers' variables get the paths they would get as the model's own layers, so the
    checkpoint keys of models that held those layers directly stay valid. Keras still tracks the
    part's layers, so the model's weights include them."""

    def __init__(self, hparams, scope=None, **kwargs):
        super().__init__(**kwargs)
        self.hparams = dict(hparams)
        # The model's name: layers built before the model is called (`build_now`) go under it.
        self.scope = scope
        # Its layers build themselves when the model first runs the part.
        self.built = True

    def build_now(self, layer, input_shape):
        """Builds `layer` under the model's name, as a first call inside the model would (the
        checkpoint keys); for layers first called inside a tf.while_loop, where variables
        cannot be created."""
        with keras.name_scope(self.scope):
            layer.build(input_shape)
        return layer

    def memory(self, encoded):
        """A decoder's memory from its encoder's output (default: the output as it is)."""
        return encoded

    def decoding_memory(self, memory):
        """The memory its `step` reads (models/base.py; default: the memory as it is)."""
        return memory

    def call(self, *args, **kwargs):
        raise TypeError(f"{type(self).__name__} is a part: call its methods, not the part")
