"""Kubernetes manifests for a deploy file: pure planning (which stage on which node) and pure
builders of the objects. Nothing here talks to a cluster or writes files."""
