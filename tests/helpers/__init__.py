"""Shared test helpers, importable from every test directory (pytest.ini: pythonpath = tests):
`from helpers.layers import run_layer_test` (what every Keras layer must do),
`from helpers.recurrent import numpy_lau, numpy_gru` (recurrent cells in numpy),
`from helpers.families import SOURCE, densenmt` (tiny models whose parts are tested apart) and
`from helpers import experiments` (the tiny experiment of tests/experiments/)."""
