"""omni-deploy: check, explain and launch vllm-omni deploy configs."""

__version__ = "0.1.0"
