# A stand-in for a vllm-omni main checkout (not vllm-omni's code): start-up builds the typed config.
def serve(args):
    return resolve_omni_config(args)  # noqa: F821
