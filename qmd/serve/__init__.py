"""qmd/serve"""
