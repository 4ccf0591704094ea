"""The arguments an environment's `load_environment` takes, read from its wheel without running
any of its code.

The wheel's `entry_points.txt` names the loader (`[prime.environments] name = module:function`,
else `module:load_environment` for the wheel's top-level module); the module's source is parsed
with `ast`, so nothing is imported or executed. Each parameter keeps its annotation and default
as written in the source, and its description from the function's docstring (Google, NumPy,
reST or Epydoc style, via docstring-parser) when documented there.

A wheel is anyone's upload, so the reading is bounded: the module source (1 MiB), the
parse (an expression too deep for the parser, e.g. 150,000 terms, is "no signature", not a
RecursionError), the arguments shown (64), each annotation and default (cut at 200
characters) and the docstring handed to docstring-parser (16 KiB). Whatever cannot be
read gives None; the caller caches that answer like any other.
"""

from __future__ import annotations

import ast
import configparser
import zipfile
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import IO

import docstring_parser

ENTRY_POINT_GROUP = "prime.environments"
MAX_SOURCE_BYTES = 1024 * 1024
MAX_ARGS = 64
MAX_TEXT = 200
MAX_DOCSTRING = 16 * 1024
# What parsing hostile source can raise besides a SyntaxError: too deep for the parser or the
# AST builder, too large for memory, a NUL byte.
_UNPARSEABLE = (SyntaxError, ValueError, RecursionError, MemoryError, OverflowError)


@dataclass(frozen=True)
class EnvArg:
    name: str
    annotation: str | None
    default: str | None  # source text; None when the argument is required
    description: str | None


@dataclass(frozen=True)
class EnvSignature:
    loader: str  # "module:function"
    summary: str | None
    args: list[EnvArg]


def _loader(archive: zipfile.ZipFile) -> tuple[str, str] | None:
    names = archive.namelist()
    entry_points = [
        n for n in names if n.count("/") == 1 and n.endswith(".dist-info/entry_points.txt")
    ]
    if entry_points:
        parser = configparser.ConfigParser(interpolation=None)
        try:
            parser.read_string(archive.read(entry_points[0]).decode("utf-8"))
        except (configparser.Error, UnicodeDecodeError):
            return None
        if parser.has_section(ENTRY_POINT_GROUP):
            for _name, target in parser.items(ENTRY_POINT_GROUP):
                module, _, function = target.strip().partition(":")
                if module and function:
                    return module.strip(), function.strip().split()[0]
    tops = {
        n.split("/", 1)[0]
        for n in names
        if "/" in n and not n.split("/", 1)[0].endswith((".dist-info", ".data"))
    }
    if len(tops) == 1:
        return tops.pop(), "load_environment"
    return None


def _module_source(archive: zipfile.ZipFile, module: str) -> str | None:
    base = PurePosixPath(*module.split("."))
    for candidate in (f"{base}.py", f"{base}/__init__.py"):
        try:
            info = archive.getinfo(candidate)
        except KeyError:
            continue
        if info.file_size > MAX_SOURCE_BYTES:
            return None
        try:
            return archive.read(info).decode("utf-8")
        except UnicodeDecodeError:
            return None
    return None


def _arg_list(
    function: ast.FunctionDef | ast.AsyncFunctionDef,
) -> list[tuple[ast.arg, ast.expr | None]]:
    args = function.args
    positional = args.posonlyargs + args.args
    defaults: list[ast.expr | None] = [None] * (len(positional) - len(args.defaults))
    defaults += list(args.defaults)
    pairs = list(zip(positional, defaults, strict=True))
    pairs += list(zip(args.kwonlyargs, args.kw_defaults, strict=True))
    return pairs


def read_env_signature(wheel: IO[bytes] | str) -> EnvSignature | None:
    """The loader's signature from a wheel (path or open file), or None when it cannot be found."""
    try:
        with zipfile.ZipFile(wheel) as archive:
            found = _loader(archive)
            if found is None:
                return None
            module, function_name = found
            source = _module_source(archive, module)
    except (zipfile.BadZipFile, OSError, ValueError):
        return None
    if source is None:
        return None
    try:
        tree = ast.parse(source)
    except _UNPARSEABLE:
        return None
    function = next(
        (
            node
            for node in tree.body
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
            and node.name == function_name
        ),
        None,
    )
    if function is None:
        return None
    parsed = _docstring(function)
    documented = {p.arg_name: p.description for p in parsed.params} if parsed else {}
    args = [
        EnvArg(
            name=arg.arg,
            annotation=_text(source, arg.annotation),
            default=_text(source, default),
            description=_cut(documented.get(arg.arg)),
        )
        for arg, default in _arg_list(function)[:MAX_ARGS]
        if arg.arg not in ("self", "cls")
    ]
    summary = _cut(parsed.short_description) if parsed else None
    return EnvSignature(loader=f"{module}:{function_name}", summary=summary, args=args)


def _cut(text: str | None, limit: int = MAX_TEXT) -> str | None:
    if not text:
        return None
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _text(source: str, node: ast.expr | None) -> str | None:
    """An annotation or default as source text, cut at MAX_TEXT: unparsed (normalised), or
    where that recursed too deep, the text as written."""
    if node is None:
        return None
    try:
        return _cut(ast.unparse(node))
    except _UNPARSEABLE:
        return _cut(ast.get_source_segment(source, node) or "…")


def _docstring(
    function: ast.FunctionDef | ast.AsyncFunctionDef,
) -> docstring_parser.Docstring | None:
    docstring = ast.get_docstring(function)
    if not docstring:
        return None
    try:
        return docstring_parser.parse(docstring[:MAX_DOCSTRING])
    except (docstring_parser.ParseError, *_UNPARSEABLE):
        return None
