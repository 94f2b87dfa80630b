"""The vocabulary and safe I/O every part may use: codes, errors, defaults, guarded reads, atomic writes, redaction, output."""
