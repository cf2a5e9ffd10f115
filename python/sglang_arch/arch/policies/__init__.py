"""One module per decision; each function is pure and returns its decision with a reason."""
