"""The speaker-embedding backend decision: the host snapshot it takes, what each platform gets, and what the server reported."""
