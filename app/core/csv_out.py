"""Writing CSV that a spreadsheet opens as data: the one writer for every CSV the service makes
(the gradebook in both layouts, the submissions zip's manifest, the CLI's invite links).

A spreadsheet runs a cell that starts with `=`, `+`, `-` or `@` as a formula (and one that
starts with a tab or a carriage return after trimming it), so such a cell is written with a
leading `'`, which spreadsheets read as "text". Names come from people and from LMSs, whose users
edit them: every cell is escaped, not only the ones a reviewer thought of.
"""

from __future__ import annotations

import csv
from collections.abc import Iterable
from typing import IO

FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def safe_cell(value: object) -> str:
    """The cell's text, with a leading `'` where a spreadsheet would start a formula."""
    text = "" if value is None else str(value)
    return "'" + text if text.startswith(FORMULA_STARTS) else text


class SafeCsvWriter:
    """csv.writer with every cell passed through `safe_cell` (lines end in a bare newline)."""

    def __init__(self, out: IO[str]) -> None:
        self._writer = csv.writer(out, lineterminator="\n")
        # csv quotes a cell that holds the line ending, "\n", but not a lone "\r", which
        # readers take as a line's end: a row with one is written with every cell quoted.
        self._quoting = csv.writer(out, lineterminator="\n", quoting=csv.QUOTE_ALL)

    def writerow(self, row: Iterable[object]) -> None:
        # safe_cell, inlined: a gradebook writes tens of thousands of cells.
        cells = [
            "'" + text if text.startswith(FORMULA_STARTS) else text
            for text in (
                cell if type(cell) is str else "" if cell is None else str(cell) for cell in row
            )
        ]
        writer = self._quoting if any("\r" in cell for cell in cells) else self._writer
        writer.writerow(cells)
