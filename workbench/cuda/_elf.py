"""Read what the CPU engine needs from a compiled kernel module (an ELF64 shared object): its TLS segment, code
range and symbol table.

Static ``__shared__`` variables are ``static thread_local`` in the engine, so the module's TLS segment is the
static shared memory of its kernels: its size is poisoned at each block start, its symbols give each kernel's
static shared bytes (a function-local static of ``f`` is mangled ``_ZZ<f>E<name>``) and the variable an
access falls in.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from pathlib import Path

PT_LOAD, PT_TLS, PF_X = 1, 7, 1
SHT_SYMTAB = 2
STT_FUNC, STT_TLS = 2, 6


@dataclass
class Symbol:
    """One symbol of the module: its (mangled) name, value (TLS: offset in the segment) and size."""

    name: str
    value: int
    size: int


@dataclass
class ModuleImage:
    """What the engine uses of a module's ELF image."""

    tls_bytes: int = 0
    text: tuple[int, int] = (0, 0)  # [lo, hi) of the executable segment, relative to the load address
    tls: list[Symbol] = field(default_factory=list)
    funcs: dict[int, str] = field(default_factory=dict)  # value -> name

    def tls_symbol(self, name: str) -> Symbol | None:
        """Return the TLS symbol called ``name`` (exactly)."""
        return next((s for s in self.tls if s.name == name), None)

    def static_prefix(self, fn_offset: int) -> str | None:
        """Return the mangled prefix of the function-local statics of the function at ``fn_offset``."""
        name = self.funcs.get(fn_offset)
        if not name:
            return None
        return "_ZZ" + name[2:] + "E" if name.startswith("_Z") else f"_ZZ{len(name)}{name}E"


def is_internal_tls(name: str) -> bool:
    """Return whether a TLS symbol is not shared memory: the probe's anchor, the redzones, C++ guard variables."""
    return "wb_tls_anchor" in name or name.startswith(("wb_rz_", "_ZGV"))


def _read_symbols(data: bytes, shoff: int, shentsize: int, shnum: int) -> tuple[list[Symbol], dict[int, str]]:
    tls: list[Symbol] = []
    funcs: dict[int, str] = {}
    sections = [struct.unpack_from("<IIQQQQIIQQ", data, shoff + i * shentsize) for i in range(shnum)]
    for sh in sections:
        if sh[1] != SHT_SYMTAB:
            continue
        strtab = sections[sh[6]]
        str_off = strtab[4]
        for j in range(sh[5] // 24):
            st_name, st_info, _other, _shndx, st_value, st_size = struct.unpack_from("<IBBHQQ", data, sh[4] + j * 24)
            kind = st_info & 0xF
            if kind not in (STT_FUNC, STT_TLS):
                continue
            end = data.index(b"\0", str_off + st_name)
            name = data[str_off + st_name:end].decode(errors="replace")
            if kind == STT_TLS:
                tls.append(Symbol(name, st_value, st_size))
            elif st_value:
                funcs.setdefault(st_value, name)
    return tls, funcs


def read_module(path: str | Path) -> ModuleImage:
    """Return the TLS size, code range and TLS/function symbols of the ELF64 shared object at ``path``."""
    data = Path(path).read_bytes()
    img = ModuleImage()
    if data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
        return img  # not little-endian ELF64: no poisoning, limits from the source only
    phoff, shoff = struct.unpack_from("<QQ", data, 0x20)
    phentsize, phnum, shentsize, shnum = struct.unpack_from("<HHHH", data, 0x36)
    for i in range(phnum):
        p_type, p_flags, _off, p_vaddr, _paddr, _filesz, p_memsz, _align = struct.unpack_from(
            "<IIQQQQQQ", data, phoff + i * phentsize)
        if p_type == PT_TLS:
            img.tls_bytes = p_memsz
        elif p_type == PT_LOAD and p_flags & PF_X:
            img.text = (p_vaddr, p_vaddr + p_memsz)
    if shoff and shnum:
        img.tls, img.funcs = _read_symbols(data, shoff, shentsize, shnum)
    return img
