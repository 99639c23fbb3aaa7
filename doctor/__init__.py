"""`qmd doctor`, `qmd teardown`: check what breaks quietly, repair what is safe, and a clean way out.

Uses only qmd's public API and the harness packages' status functions.
"""
