"""Pure decisions from an effective config, a platform, the environment and a host snapshot."""
