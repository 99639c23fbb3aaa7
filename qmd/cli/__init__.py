"""The `qmd` command line: a thin layer of typer commands over qmd's public API."""
