"""Shared test helpers, importable from every test directory (pytest.ini: pythonpath = tests):
`from helpers.layers import run_layer_test`."""
