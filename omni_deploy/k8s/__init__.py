"""Kubernetes manifests for a deploy file: pure builders of the objects, from the launch spec and
the topology's node groups. Nothing here talks to a cluster or writes files."""
