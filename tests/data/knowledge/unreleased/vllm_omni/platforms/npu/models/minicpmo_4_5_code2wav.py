# Stand-in: MiniCPM-o 4.5's NPU graph switches, read from stage 2's additional_config.
def graph_switches(config):
    return bool(config.get("code2wav_enable_npu_graph", False)), int(
        config.get("code2wav_max_npu_graphs", 32)
    )
