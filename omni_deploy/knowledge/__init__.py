"""What each vllm-omni version reads from a deploy file: the one table behind the schema, the
checks, explain and docs/deploy-reference.md."""
