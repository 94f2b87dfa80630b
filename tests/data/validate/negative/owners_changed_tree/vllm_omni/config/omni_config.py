# A stand-in for a vllm-omni main checkout whose typed-config ownership differs from every release's.
_STAGE_ENGINE_FIELDS = frozenset({"max_num_seqs", "a_key_no_release_owns"})


def _validate_stage_engine_override_ownership(stage_id, execution_type, overrides):
    unowned = set(overrides) - _STAGE_ENGINE_FIELDS
    if unowned:
        raise ValueError(f"Stage {stage_id} has explicit engine argument(s) with no structured config owner")
