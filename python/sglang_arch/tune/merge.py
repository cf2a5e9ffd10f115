"""An override file ``tune ... --out`` updates: one tier's measured fields set, the rest kept.

The file at ``--out`` may be the one in use (``SGLANG_ARCH_CONFIG``), holding other tiers,
other fields of the measured tier (a hand-written tier, the fusion world sizes ``tune
fusion`` wrote, the symm-mem sizes ``tune collectives`` wrote) and the user's comments.
An update sets the fields it measured in the measured tier's entry and adds its source
line; everything else stays as written:

* JSON: the document is read as it is (its key order, the ``architectures`` wrapper or
  not) and written back with the entry updated (JSON has no comments to keep).
* TOML: the lines of the fields set are replaced (or added at the end of the tier's
  table, or a new table at the end), every other line kept byte for byte, comments
  included.  The result is parsed again and must equal the document meant; where the
  file is laid out otherwise (dotted keys, a sub-table for a field) a file without
  comments is written whole from its data, and one with comments is refused, naming
  the layout accepted, rather than dropping them.
"""

from __future__ import annotations

import json
import re
from typing import Any, Dict, List, Optional, Tuple

from ..arch.validate import MAX_FILE_BYTES, MAX_ITEMS, read_regular_file, shown
from ..files import ANY


class Existing:
    """The override file at ``--out`` as read (under the folder's lock): its text and its
    raw document (None: no file there)."""

    def __init__(self, path: str, text: Optional[str], where: str = "--out") -> None:
        self.path = path
        self.text = text
        self.toml = path.lower().endswith(".toml")
        self.doc: Dict[str, Any] = {}
        self.expect: Any = text  # what the write checks is still there before it replaces the file
        if text is not None:
            self.doc = _parse(path, text, where)

    @property
    def wrapped(self) -> bool:
        """Entries under ``architectures`` (the form tune writes), or capability keys at the top."""
        return self.text is None or "architectures" in self.doc

    def entries(self) -> Dict[str, Any]:
        entries = self.doc.get("architectures", {}) if self.wrapped else self.doc
        return entries if isinstance(entries, dict) else {}

    def key_for(self, tier: str) -> Optional[str]:
        """The key of the file's entry for ``tier`` (any spelling of the capability)."""
        from .fusion import _same_capability

        return next((k for k in self.entries() if _same_capability(str(k), tier)), None)


def read_existing(path: str, where: str) -> Existing:
    """The file at ``path`` (a regular file, UTF-8, in the override schema's shape), or an
    empty ``Existing`` where there is none.  ValueError naming ``where`` otherwise."""
    import os

    if not os.path.lexists(path):
        return Existing(path, None)
    if os.path.islink(path):  # replaced by a new file, its target left alone (files.check_writes): not read
        existing = Existing(path, None)
        existing.expect = ANY
        return existing
    try:
        text = read_regular_file(path, MAX_FILE_BYTES).decode("utf-8")  # as SGLANG_ARCH_CONFIG reads it
    except (OSError, ValueError) as exc:
        raise ValueError(f"{where}: cannot read the override file there ({getattr(exc, 'strerror', None) or exc}); "
                         f"accepted: a UTF-8 override file (its entries are kept), or a new file") from None
    return Existing(path, text, where)


def _parse(path: str, text: str, where: str) -> Dict[str, Any]:
    from ..arch import registry

    try:
        parsed = (registry._parse_toml if path.lower().endswith(".toml") else registry._parse_json)(where, text)
    except ValueError as exc:
        raise ValueError(f"{exc}; nothing was written; accepted: an override file at --out (its other entries are "
                         f"kept), or a new file") from None
    accepted = "nothing was written; accepted: an override file at --out (its other entries are kept), or a new file"
    if not isinstance(parsed, dict):
        raise ValueError(f"{where}: expected a table of capability -> fields at the top level; {accepted}")
    entries = parsed.get("architectures", parsed)
    if not isinstance(entries, dict):
        raise ValueError(f"{where}: field 'architectures': expected a table of capability -> fields, got "
                         f"{type(entries).__name__}; {accepted}")
    for key, entry in entries.items():
        if not isinstance(entry, dict):
            raise ValueError(f"{where}: entry {shown(key)}: expected a table of fields, got {type(entry).__name__}; "
                             f"{accepted}")
    return parsed


def updated_document(existing: Existing, tier: str, fields: Dict[str, Any], source: str) -> Dict[str, Any]:
    """The raw document with ``fields`` set in the tier's entry and ``source`` added to its
    sources (the last MAX_ITEMS kept); every other key as it was."""
    doc = json.loads(json.dumps(existing.doc)) if existing.text is not None else {}
    if existing.wrapped:
        entries = doc.setdefault("architectures", {})
    else:
        entries = doc
    key = existing.key_for(tier) or tier
    entry = entries.setdefault(key, {})
    entry.update(fields)
    sources = entry.get("sources", [])
    sources = [s for s in (sources if isinstance(sources, list) else [sources]) if s != source]  # one text: kept
    entry["sources"] = (sources + [source])[-MAX_ITEMS:]
    return doc


def updated_text(existing: Existing, tier: str, fields: Dict[str, Any], source: str, command: str,
                 where: str) -> str:
    """The file's new text: ``updated_document`` written keeping every other line."""
    doc = updated_document(existing, tier, fields, source)
    key = existing.key_for(tier) or tier
    entry = (doc["architectures"] if existing.wrapped else doc)[key]
    if not existing.toml:
        return json.dumps(doc, indent=2) + "\n"
    from .collectives import override_text

    if existing.text is None:
        return override_text(existing.path, {key: entry}, command=command)
    changed = {name: entry[name] for name in list(fields) + ["sources"]}
    spliced = _splice_toml(existing.text, key, changed, existing.wrapped)
    if spliced is not None and _same(spliced, doc):
        return spliced
    if "#" not in existing.text:  # nothing but data to keep: the whole file from its data
        entries = doc["architectures"] if existing.wrapped else doc
        return override_text(existing.path, entries, command=command)
    table = f'[architectures."{key}"]' if existing.wrapped else f'["{key}"]'
    raise ValueError(f"{where}: cannot set {', '.join(fields)} of {key} and keep the file's comments: its entry is "
                     f"not laid out as a {table} table with one line per field; nothing was written; accepted: that "
                     f"layout, a file without comments (written whole from its data), or another --out file")


def _same(text: str, doc: Dict[str, Any]) -> bool:
    try:
        import tomllib

        return tomllib.loads(text) == doc
    except (ValueError, RecursionError):
        return False


_KEY = r'(?:"(?P<dq>[^"\\]*)"|\'(?P<sq>[^\']*)\'|(?P<bare>[A-Za-z0-9_-]+))'


def _header(line: str, wrapped: bool) -> Optional[str]:
    """The capability key a table header line opens (None: not such a header)."""
    prefix = r"architectures\s*\.\s*" if wrapped else ""
    found = re.match(rf"^\s*\[\s*{prefix}{_KEY}\s*\]\s*(#.*)?$", line)
    if not found:
        return None
    return next(v for v in (found.group("dq"), found.group("sq"), found.group("bare")) if v is not None)


def _value_end(lines: List[str], start: int, name: str) -> Optional[int]:
    """The line after the value of the ``name = ...`` line at ``start`` (a value may run over
    several lines: an array)."""
    import tomllib

    text = ""
    for end in range(start, min(len(lines), start + 10_000)):
        text += lines[end]
        try:
            tomllib.loads(text)
            return end + 1
        except tomllib.TOMLDecodeError:
            continue
    return None


def _trailing_comment(lines: List[str]) -> str:
    """The comment that ends a field's last line (``# PCIe box only``), or ""."""
    import tomllib

    last = lines[-1]
    whole = tomllib.loads("".join(lines))
    for i, ch in enumerate(last):
        if ch != "#":
            continue
        try:
            if tomllib.loads("".join(lines[:-1]) + last[:i] + "\n") == whole:
                return last[i:].rstrip("\r\n")
        except tomllib.TOMLDecodeError:
            continue
    return ""


def _splice_toml(text: str, key: str, fields: Dict[str, Any], wrapped: bool) -> Optional[str]:
    """``text`` with each of ``fields`` set in the table of ``key``, every other line kept;
    None where the layout is not one this reads (the caller checks the result anyway)."""
    from .collectives import _toml_value, toml_string

    lines = text.splitlines(keepends=True)
    eol = "\r\n" if lines and lines[0].endswith("\r\n") else "\n"  # the file's own line ending
    if lines and not lines[-1].endswith("\n"):
        lines[-1] += eol
    starts = [i for i, line in enumerate(lines) if _header(line, wrapped) == key]
    if len(starts) > 1:
        return None
    new_lines = {name: f"{name} = {_toml_value(value)}{eol}" for name, value in fields.items()}
    if not starts:
        table = f"[architectures.{toml_string(key)}]{eol}" if wrapped else f"[{toml_string(key)}]{eol}"
        tail = [] if not lines or lines[-1].strip() == "" else [eol]
        return "".join(lines + tail + [table] + list(new_lines.values()))
    begin = starts[0] + 1
    end = next((i for i in range(begin, len(lines)) if lines[i].lstrip().startswith("[")), len(lines))
    body = lines[begin:end]
    out: List[str] = []
    i, done = 0, set()
    while i < len(body):
        found = re.match(r'^\s*(?:"([A-Za-z0-9_]+)"|\'([A-Za-z0-9_]+)\'|([A-Za-z0-9_]+))\s*=', body[i])
        name = found and next(v for v in found.groups() if v is not None)
        if name in new_lines:
            stop = _value_end(body, i, name)
            if stop is None:
                return None
            comment = _trailing_comment(body[i:stop])
            out.append(new_lines[name] if not comment else new_lines[name].replace(eol, f"  {comment}{eol}", 1))
            done.add(name)
            i = stop
            continue
        out.append(body[i])
        i += 1
    missing = [new_lines[n] for n in new_lines if n not in done]
    if missing:  # after the table's last line that is not blank
        last = len(out)
        while last and not out[last - 1].strip():
            last -= 1
        out[last:last] = missing
    return "".join(lines[:begin] + out + lines[end:])


def sizes_field(existing: Existing, tier: str, name: str, computed: Dict[str, Any],
                tuned: Dict[int, Optional[int]]) -> Dict[str, Any]:
    """The tier's sizes field ``name`` (``symm_mem_two_shot``) to write: the file's own (where it
    has one: its other world sizes as written) with the measured world sizes set, else ``computed``."""
    from .collectives import symm_size_text

    key = existing.key_for(tier)
    current = existing.entries().get(key, {}).get(name) if key is not None else None
    if not isinstance(current, dict):
        return computed
    sizes = dict(current)
    for ws, size in tuned.items():
        sizes.pop(str(ws), None)
        if size is not None:
            sizes[str(ws)] = symm_size_text(size)
    return dict(sorted(sizes.items(), key=lambda kv: _ws_order(kv[0])))


def _ws_order(key: str) -> Tuple[int, str]:
    return (int(key), key) if key.isdigit() else (1 << 30, key)


def effective_profile(existing: Existing, tier: str, where: str, table_profile: Any) -> Any:
    """The tier's profile as the registry reads the file at ``--out`` (its own values, what it
    ``inherits``, the table under it), or ``table_profile`` where there is no file.  A file
    the registry refuses is refused here, naming why (nothing written)."""
    if existing.text is None:
        return table_profile
    from ..arch import registry

    entries = existing.entries()
    try:
        return registry.build_registry({str(k): v for k, v in entries.items()},
                                       override_source=existing.path).profile(tier)
    except ValueError as exc:
        raise ValueError(f"{where}: the override file there is refused by the registry ({exc}); nothing was "
                         f"written; accepted: an override file SGLANG_ARCH_CONFIG reads, or another --out file") from None
