"""qmd/index"""
