"""Hostile and careless deploy files, one per class of issue 14: each with the finding code it gets.

Shared by the loader tests (each class once, exact code) and the fuzz tier (as seeds to mutate).
"""

from __future__ import annotations


def _laughs(levels: int = 9, width: int = 9) -> str:
    lines = ["a0: &a0 [" + ", ".join(["lol"] * width) + "]"]
    for i in range(1, levels + 1):
        lines.append(f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * width) + "]")
    return "\n".join(lines) + "\n"


def _interpolation_bomb(levels: int = 10, width: int = 10) -> str:
    lines = ["a0: xxxxxxxxxx"]
    for i in range(1, levels + 1):
        lines.append(f"a{i}: " + ("${a" + str(i - 1) + "}") * width)
    return "\n".join(lines) + "\n"


def _merge_bomb(levels: int = 9) -> str:
    lines = ["m0: &m0 {a: 1, b: 2, c: 3}"]
    for i in range(1, levels + 1):
        refs = ", ".join([f"*m{i - 1}"] * 9)
        lines.append(f"m{i}: &m{i} {{<<: [{refs}], k{i}: 1}}")
    return "\n".join(lines) + "\n"


STAGE = "stages:\n  - stage_id: 0\n"

# name -> (file content, finding code)
HOSTILE_YAML: dict[str, tuple[bytes, str]] = {
    "control_character": (b"a: 1\x01\n", "E108"),
    "nul_byte": (b"a: 1\x00\n", "E108"),
    "not_utf8": (b"stages: \xe9\n", "E108"),
    "lone_surrogate_key": (b'"\\ud800": 1\n', "E108"),
    "deep_flow_nesting": (("a: " + "[" * 600 + "]" * 600 + "\n").encode(), "E109"),
    "deep_block_nesting": (
        ("".join("  " * i + f"k{i}:\n" for i in range(600)) + "  " * 600 + "x: 1\n").encode(),
        "E109",
    ),
    "self_alias": (b"a: &a [*a]\n", "E109"),
    "self_merge": (b"a: &a {<<: *a}\n", "E109"),
    "billion_laughs": (_laughs().encode(), "E109"),
    "merge_bomb": (_merge_bomb().encode(), "E109"),
    "bad_bool_tag": (b"a: !!bool maybe\n", "E103"),
    "bad_int_tag": (b"a: !!int abc\n", "E103"),
    "bad_float_tag": (b"a: !!float y\n", "E103"),
    "map_tag_on_scalar": (b"a: !!map x\n", "E103"),
    "timestamp_tag": (b"a: !!timestamp 2020-01-01\n", "E103"),
    "python_tag": (b"a: !!python/object/apply:os.system ['true']\n", "E103"),
    "five_thousand_digits": (("a: " + "1" * 5000 + "\n").encode(), "E114"),
    "int_beyond_64_bits": ((STAGE + "    kv_cache_memory_bytes: 1" + "0" * 400 + "\n").encode(), "E114"),
    "float_overflow": ((STAGE + "    gpu_memory_utilization: 1e400\n").encode(), "E114"),
    "interpolation_bomb": (_interpolation_bomb().encode(), "E106"),
    "interpolation_self": (b"a: ${a}\n", "E106"),
    "syntax_error": (b"a: [1, 2\n", "E101"),
    "top_level_list": (b"- 1\n", "E104"),
    "stage_id_list": (b"stages:\n  - stage_id: [1]\n", "E123"),
    "nan_where_a_bound_is": ((STAGE + "    gpu_memory_utilization: .nan\n").encode(), "E201"),
    "infinity_where_a_bound_is": ((STAGE + "    gpu_memory_utilization: .inf\n").encode(), "E201"),
}
