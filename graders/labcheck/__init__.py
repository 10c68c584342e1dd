"""Checking a lab folder before students meet it (`kernelgrader lab check FOLDER`).

Stage-neutral: it reads the spec, compiles through the compile stage and, on a GPU, grades
through the run stage, as a submission would be. `check_lab` is the entry point.
"""

from graders.labcheck.check import check_lab
from graders.labcheck.report import CheckItem, LabCheckReport

__all__ = ["CheckItem", "LabCheckReport", "check_lab"]
