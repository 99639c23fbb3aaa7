"""qmd/store/sqlite"""
