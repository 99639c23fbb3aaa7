"""qmd/core"""
