"""`validate`: schema and semantic checks of a deploy file, each finding pointing at a line."""
