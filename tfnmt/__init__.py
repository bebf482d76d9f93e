"""tfnmt: neural machine translation research architectures on TensorFlow 2 / Keras 3."""

__version__ = "0.1.0"
