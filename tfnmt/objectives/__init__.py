"""What a model's loss computes, below models/ so that models never import training/: the
losses (`losses.py`) and the layer-diversity term (`diversity.py`)."""
