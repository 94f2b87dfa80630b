"""The CLI edge: the click app, its commands, shared options and settings, FILE arguments."""
