"""Launching and supervising `vllm serve --omni`: the process and network edges of the tool."""
