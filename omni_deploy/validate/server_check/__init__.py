"""The server check: vllm-omni's own start-up config code, run on deploy files in a child process."""
