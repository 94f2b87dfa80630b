"""What every command shares when it writes for people (tables, colour, progress) or for programs (JSON)."""
