"""A manifest file's documents: plain data for the engine and positions for findings.

``yamlstream`` parses one document at a time with libyaml, checking size, depth, aliases and
duplicate keys while it parses; ``parse_text`` collects every document of a (small) text at once,
for callers that want them all.  Lines are 1-based; positions are absolute within the file.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from gpuguard.sources.layout import Segment
from gpuguard.sources.yamlpos import Positions
from gpuguard.sources.yamlsafe import InputError
from gpuguard.sources.yamlstream import (
    EXPANSION_FACTOR,
    MAX_DEPTH,
    MAX_OBJECT_CHARS,
    MIN_EXPANSION_BUDGET,
    ListEnd,
    Unit,
    stream,
)

__all__ = [
    "EXPANSION_FACTOR",
    "MAX_DEPTH",
    "MAX_OBJECT_CHARS",
    "MIN_EXPANSION_BUDGET",
    "Document",
    "ParsedFile",
    "Segment",
    "parse_text",
]


@dataclass(slots=True)
class Document:
    index: int
    data: Any
    positions: Positions
    segment: Segment
    source: str | None  # Helm `# Source:` template heading the document
    line: int  # 1-based line of its first node


@dataclass(slots=True)
class ParsedFile:
    text: str
    documents: list[Document] = field(default_factory=list)
    errors: list[InputError] = field(default_factory=list)


def parse_text(text: str, file: str) -> ParsedFile:
    """Every document of ``text`` (Lists whole), and the input errors of those refused."""
    parsed = ParsedFile(text)
    for item in stream(text, file, stream_lists=False):
        if isinstance(item, InputError):
            parsed.errors.append(item)
        elif isinstance(item, Unit):
            parsed.documents.append(
                Document(item.doc_index, item.data, item.positions, item.segment, item.source, item.line)
            )
        else:  # pragma: no cover - stream_lists=False never streams a List
            assert isinstance(item, ListEnd)
    return parsed
