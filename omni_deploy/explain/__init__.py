"""What `omni-deploy explain` says: the speaker decision per platform, or an overview."""
