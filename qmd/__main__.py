from qmd.cli.main import run

run()
