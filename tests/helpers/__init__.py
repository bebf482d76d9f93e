"""Shared test helpers, importable from every test directory (pytest.ini: pythonpath = tests):
`from helpers.layers import run_layer_test` (what every Keras layer must do) and
`from helpers.recurrent import numpy_lau, numpy_gru` (recurrent cells in numpy)."""
