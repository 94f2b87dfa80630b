# Stand-in: a connector entry's reads, in the shape of vllm-omni's connector set-up code.
def connector_spec(conn_config):
    extra = dict(conn_config.get("extra", {}))
    return conn_config["name"], extra
