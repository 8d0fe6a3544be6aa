"""The patch queue: the series, the pinned base, trees of base + series, export, file changes."""
