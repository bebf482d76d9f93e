"""`tfnmt bench`'s measurements, given what to measure: the verb (cli/bench.py) reads the flags,
opens the model and the sentences, and hands them here. One module per bench: train.py,
translate.py (translate, decode), serve.py (the REST load test), soak.py, data.py, and
ctranslate2.py with its engine processes (engine.py) and figures (comparison.py)."""
