"""Read a cubin's kernels and their parameter sizes from its ELF tables (stdlib `struct` only).

Kernels are the FUNC symbols flagged STO_CUDA_ENTRY in `.symtab`; each kernel's parameters
are the EIATTR_KPARAM_INFO records of its `.nv.info.<name>` section. Reading the machine code's
own tables is more robust than guessing from the source: macros, templates and `extern "C"`
blocks all end up here as the loader will see them.
"""

from __future__ import annotations

import re
import struct
from dataclasses import dataclass

_STT_OBJECT = 1
_STT_FUNC = 2
_STO_CUDA_ENTRY = 0x10
_EIATTR_KPARAM_INFO = 0x17
_EIFMT_NVAL, _EIFMT_BVAL, _EIFMT_HVAL, _EIFMT_SVAL = 1, 2, 3, 4


class CubinError(ValueError):
    """The bytes are not a cubin this reader understands."""


@dataclass(frozen=True)
class KernelParam:
    ordinal: int
    offset: int
    size: int


@dataclass(frozen=True)
class _Section:
    name: str
    type: int
    offset: int
    size: int
    link: int
    entsize: int


def _sections(data: bytes) -> list[_Section]:
    if len(data) < 64 or data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
        raise CubinError("not a 64-bit little-endian ELF file")
    (shoff,) = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)
    if shentsize < 64 or shoff + shnum * shentsize > len(data) or shstrndx >= shnum:
        raise CubinError("the section table is out of range")
    raw = []
    for i in range(shnum):
        name, typ, _flags, _addr, off, size, link, _info, _align, entsize = struct.unpack_from(
            "<IIQQQQIIQQ", data, shoff + i * shentsize
        )
        if off + size > len(data) and typ != 8:  # SHT_NOBITS occupies no file space
            raise CubinError(f"section {i} is out of range")
        raw.append((name, typ, off, size, link, entsize))
    strtab = raw[shstrndx]
    names = data[strtab[2] : strtab[2] + strtab[3]]
    return [
        _Section(_cstr(names, n), typ, off, size, link, entsize)
        for n, typ, off, size, link, entsize in raw
    ]


def _cstr(table: bytes, offset: int) -> str:
    end = table.find(b"\x00", offset)
    return table[offset : end if end >= 0 else len(table)].decode("utf-8", "replace")


@dataclass(frozen=True)
class _Symbol:
    name: str
    type: int
    other: int
    section: int
    size: int
    value: int = 0  # st_value: for a variable, its offset in its section


def _symbols(cubin: bytes, sections: list[_Section]) -> list[_Symbol]:
    symtab = next((s for s in sections if s.type == 2), None)  # SHT_SYMTAB
    if symtab is None or symtab.link >= len(sections):
        return []
    strtab = sections[symtab.link]
    names = cubin[strtab.offset : strtab.offset + strtab.size]
    entsize = symtab.entsize or 24
    if entsize < 24:
        raise CubinError("the symbol table's entries are too small")
    found = []
    for pos in range(symtab.offset, symtab.offset + symtab.size - entsize + 1, entsize):
        st_name, st_info, st_other, shndx, value, size = struct.unpack_from("<IBBHQQ", cubin, pos)
        found.append(
            _Symbol(_cstr(names, st_name), st_info & 0xF, st_other, shndx, size, value=value)
        )
    return found


def kernel_names(cubin: bytes) -> list[str]:
    """The kernel (entry) symbols of a cubin, mangled names as they are, in table order."""
    return [
        s.name
        for s in _symbols(cubin, _sections(cubin))
        if s.type == _STT_FUNC and s.other & _STO_CUDA_ENTRY
    ]


@dataclass(frozen=True)
class GlobalVariable:
    name: str  # the symbol, mangled where C++ mangled it
    size: int  # bytes


def global_variables(cubin: bytes) -> tuple[list[GlobalVariable], int]:
    """The module's variables in device memory (`__device__` and `__managed__`, also
    function-local `static __device__`), largest first, and the bytes loading it takes.

    They live in `.nv.global` (uninitialised: no bytes in the file, only a size) and
    `.nv.global.init`. The sizes come from the symbol table, whose sizes are 64-bit: past
    4 GiB the section's own size and the symbols' offsets wrap around (a 256 GiB array and a
    1 GiB one both start at the same offset in a "1 GiB" section), so the total is the larger
    of the symbols' sum and the sections' sizes.
    """
    sections = _sections(cubin)
    device = {i for i, s in enumerate(sections) if s.name.startswith(".nv.global")}
    found = [
        GlobalVariable(s.name, s.size)
        for s in _symbols(cubin, sections)
        if s.type == _STT_OBJECT and s.section in device
    ]
    total = max(sum(v.size for v in found), sum(sections[i].size for i in device))
    return sorted(found, key=lambda v: -v.size), total


def initial_values(cubin: bytes, prefix: str, *, max_size: int = 64) -> dict[str, bytes]:
    """The initial bytes of the module's global variables whose names start with `prefix` (at
    most `max_size` bytes each): read from `.nv.global.init`, zeros for `.nv.global` (which
    holds no bytes in the file). A variable whose bytes lie outside its section is left out."""
    sections = _sections(cubin)
    found: dict[str, bytes] = {}
    for symbol in _symbols(cubin, sections):
        if symbol.type != _STT_OBJECT or not symbol.name.startswith(prefix):
            continue
        if not 0 < symbol.section < len(sections) or symbol.size > max_size:
            continue
        section = sections[symbol.section]
        if not section.name.startswith(".nv.global") or symbol.value + symbol.size > section.size:
            continue
        if section.type == 8:  # SHT_NOBITS: zero-initialised
            found[symbol.name] = bytes(symbol.size)
        else:
            start = section.offset + symbol.value
            found[symbol.name] = cubin[start : start + symbol.size]
    return found


def info_records(data: bytes) -> list[tuple[int, bytes]] | None:
    """The (attribute, value) records of one `.nv.info` section, in order; None for a record
    cut short or in a format this reader does not know, so callers skip rather than guess.

    Every record starts with its format and attribute bytes and takes at least four: a value
    of two bytes or less sits in the rest of those four, even for a record with no value at all
    (NVRTC 13's sm_80 and sm_86 cubins carry one, EIATTR 0x35, before the parameters)."""
    records = []
    pos = 0
    while pos + 2 <= len(data):
        fmt, attr = data[pos], data[pos + 1]
        if pos + 4 > len(data):
            return None
        if fmt == _EIFMT_SVAL:
            (size,) = struct.unpack_from("<H", data, pos + 2)
            if pos + 4 + size > len(data):
                return None
            records.append((attr, data[pos + 4 : pos + 4 + size]))
            pos += 4 + size
        elif fmt in (_EIFMT_HVAL, _EIFMT_BVAL):
            records.append((attr, data[pos + 2 : pos + 4]))
            pos += 4
        elif fmt == _EIFMT_NVAL:
            records.append((attr, b""))
            pos += 4
        else:
            return None
    return records


def info_sections(cubin: bytes) -> dict[str, bytes]:
    """Each function's `.nv.info.<function>` section's bytes, by function name."""
    prefix = ".nv.info."
    return {
        s.name[len(prefix) :]: cubin[s.offset : s.offset + s.size]
        for s in _sections(cubin)
        if s.name.startswith(prefix)
    }


def kernel_params(cubin: bytes, kernel: str) -> list[KernelParam] | None:
    """The kernel's parameters in order (ordinal, offset, size); None where the table is absent
    or in a layout this reader does not know, so callers skip the check rather than guess."""
    data = info_sections(cubin).get(kernel)
    records = None if data is None else info_records(data)
    if records is None:
        return None
    params = []
    for attr, value in records:
        if attr == _EIATTR_KPARAM_INFO and len(value) >= 12:
            _index, ordinal, offset, flags = struct.unpack_from("<IHHI", value)
            params.append(KernelParam(ordinal, offset, (flags >> 18) & 0x3FFF))
    return sorted(params, key=lambda p: p.ordinal)


def shared_section_size(cubin: bytes, kernel: str) -> int | None:
    """Bytes of the kernel's `.nv.shared.<kernel>` section; None when there is none.

    The section exists when the kernel reads or writes shared memory, static (`__shared__
    float t[16][16]`) or dynamic (`extern __shared__ float t[]`, size 0 below sm_90); an array
    it never uses is removed by the compiler, and text in `#if 0` never gets here. From sm_90 on
    the section also holds 1 KiB the system reserves, so the static size comes from ptxas.
    """
    section = next((s for s in _sections(cubin) if s.name == f".nv.shared.{kernel}"), None)
    return None if section is None else section.size


_MANGLED = re.compile(r"^_Z(?:N\d*)?(\d+)([A-Za-z_]\w*)")


def demangled_base(name: str) -> str:
    """The plain function name inside an Itanium-mangled name (`_Z6matmulPKfS0_Pfiii` ->
    `matmul`); the name itself when it is not mangled."""
    match = _MANGLED.match(name)
    if not match:
        return name
    length, rest = int(match.group(1)), match.group(2)
    return rest[:length] if len(rest) >= length else name
