# A stand-in for an unreleased vllm-omni source tree (a few lines in the shape of the real files),
# read by omni-deploy's code reader in tests; never imported.
