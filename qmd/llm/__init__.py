"""Local models: the one place that knows llama-cpp-python (imported lazily, never by `import qmd`)."""
