"""Development-time generators (not installed): the CLI reference, the bundled output schemas, the typed-config owners."""
