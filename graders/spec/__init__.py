"""Stage 0, the lab spec: `lab.toml` read into checked, frozen dataclasses.

`load_lab(folder)` and `load_builtin_lab(id)` are the entry points; a malformed spec raises
`LabSpecError` naming the file and the field.
"""

from graders.spec.dtypes import FLOAT_DTYPES
from graders.spec.loader import builtin_labs_dir, list_builtin_labs, load_builtin_lab, load_lab
from graders.spec.model import (
    BUILTIN_ORACLES,
    BUILTIN_REFERENCES,
    CaseSpec,
    DeclareSpec,
    InitSpec,
    LabSpec,
    LabSpecError,
    LaunchSpec,
    LimitsSpec,
    LiteralInput,
    ParamSpec,
    ProfileSpec,
    PythonOracleSpec,
    ReferenceSpec,
    ScoringSpec,
    TimingSpec,
    ToleranceSpec,
)

__all__ = [
    "BUILTIN_ORACLES",
    "BUILTIN_REFERENCES",
    "FLOAT_DTYPES",
    "CaseSpec",
    "DeclareSpec",
    "InitSpec",
    "LabSpec",
    "LabSpecError",
    "LaunchSpec",
    "LimitsSpec",
    "LiteralInput",
    "ParamSpec",
    "ProfileSpec",
    "PythonOracleSpec",
    "ReferenceSpec",
    "ScoringSpec",
    "TimingSpec",
    "ToleranceSpec",
    "builtin_labs_dir",
    "list_builtin_labs",
    "load_builtin_lab",
    "load_lab",
]
