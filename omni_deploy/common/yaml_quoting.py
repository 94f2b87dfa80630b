"""Which strings a YAML writer must quote so that no reader takes them for another type.

PyYAML's resolver quotes what PyYAML itself would reinterpret, but kubectl (go-yaml, YAML 1.1)
and other readers know more: `y`, `n`, `Y`, `N` as booleans, `0o17` and `0b101` as integers,
`1:20` as a sexagesimal number, `=` as a value key, `<<` as a merge key. A string we write is
quoted when any of YAML 1.1, YAML 1.2 or go-yaml would read it as anything but that string.
Standard library only (both the k8s writer and the deploy-file renderer register it).
"""

from __future__ import annotations

import re

_BOOL = r"y|Y|yes|Yes|YES|n|N|no|No|NO|true|True|TRUE|false|False|FALSE|on|On|ON|off|Off|OFF"
_NULL = r"~|null|Null|NULL"
_INT = r"[-+]?(?:0b[01_]+|0o?[0-7_]+|0x[0-9a-fA-F_]+|[0-9][0-9_]*|[1-9][0-9_]*(?::[0-5]?[0-9])+)"
_FLOAT = (
    r"[-+]?(?:[0-9][0-9_]*)?\.[0-9_]*(?:[eE][-+]?[0-9]+)?|[-+]?[0-9][0-9_]*(?:\.[0-9_]*)?[eE][-+]?[0-9]+"
    r"|[-+]?[0-9][0-9_]*(?::[0-5]?[0-9])+\.[0-9_]*|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN)"
)
_TIMESTAMP = r"[0-9]{4}-[0-9]{1,2}-[0-9]{1,2}(?:[Tt \t].*)?"
_REINTERPRETED = re.compile(rf"(?:{_BOOL}|{_NULL}|{_INT}|{_FLOAT}|{_TIMESTAMP}|=|<<)")


def reinterpreted(value: str) -> bool:
    """Whether a plain (unquoted) `value` would be read back as something other than this string."""
    return value == "" or value != value.strip() or bool(_REINTERPRETED.fullmatch(value))
