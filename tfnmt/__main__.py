from tfnmt.cli.main import run

run()
