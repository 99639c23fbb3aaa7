"""qmd/agents"""
