"""What a model's training step computes, below models/ so that models never import training/:
the losses (`losses.py`), the layer-diversity term (`diversity.py`) and a replica's share of
the step under tf.distribute (`replicas.py`)."""
