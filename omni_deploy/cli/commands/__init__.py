"""One module per command; each exposes a click command and returns an exit code."""
