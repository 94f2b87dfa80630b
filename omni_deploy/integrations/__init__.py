"""Integrations with other programs; each depends on omni_deploy.speaker only, never on the config side."""
