"""qmd/store"""
