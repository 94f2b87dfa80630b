"""The launch spec: from a Deployment, a platform, the serving host, the environment and the
user's overrides to everything a launch needs (the speaker decision, the rendered deploy file,
the vllm argv and environment, the run record). serve, `serve --dry-run`, k8s and explain each
start from `launch.spec.launch_spec`; nothing here starts a process or writes a file.
"""
