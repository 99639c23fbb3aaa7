from qmd.cli.fast import run

run()
