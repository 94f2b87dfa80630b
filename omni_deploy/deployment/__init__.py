"""The Deployment: one loaded, resolved deploy file, and its stage topology."""
