"""Find and load the gpuguard config: ``--config FILE``, else ``.gpuguard.yaml`` upward from cwd.

A problem in the file is an ``InputError`` at the file, line and column of the offending key.  The
config model (``gpuguard.sources.configmodel``, and pydantic with it) is imported only when there
is a config to read.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gpuguard.sources.yamlpos import Positions, locate_tokens, position, start_of
from gpuguard.sources.yamlsafe import InputError, load_all_positioned, read_text
from policies.config import Config

if TYPE_CHECKING:
    from gpuguard.sources.configmodel import Problem

CONFIG_NAME = ".gpuguard.yaml"


class ConfigFileError(InputError):
    """The problems of a config file, each an InputError at its key, in the order of the file; the
    first is this error's own file, line, column and message."""

    def __init__(self, errors: Sequence[InputError]) -> None:
        first = errors[0]
        super().__init__(first.file, first.line, first.message, first.column)
        self.errors = tuple(errors)


def find_config(start: Path) -> Path | None:
    for directory in (start, *start.parents):
        candidate = directory / CONFIG_NAME
        if candidate.is_file():
            return candidate
    return None


def read_document(path: Path) -> tuple[Any, Positions | None]:
    """The config document of a file (None when it holds none) and where its parts are written."""
    name = str(path)
    docs = [(data, where) for data, where in load_all_positioned(read_text(path), name) if data is not None]
    if len(docs) > 1:
        line, column = position(start_of(docs[1][1]))
        raise InputError(name, line, "config must be a single YAML document", column)
    return docs[0] if docs else (None, None)


def problem_errors(file: str, problems: Sequence[Problem], positions: Positions | None) -> list[InputError]:
    """Each problem as an InputError at the key it names (its nearest existing ancestor for a
    missing key), in the order of the file."""
    errors = []
    for problem in problems:
        line, column = locate_tokens(positions, [str(s) for s in problem.path]) if positions is not None else (1, 1)
        errors.append(InputError(file, line, f"config error: {problem}", column))
    return sorted(errors, key=lambda e: (e.line, e.column or 0))


def read_config(path: Path) -> tuple[Config, Any]:
    """The Config of a file and the document it was read from; ConfigFileError for problems."""
    from gpuguard.sources.configmodel import ConfigProblems, load_config

    raw, positions = read_document(path)
    try:
        config = load_config(raw)
    except ConfigProblems as exc:
        raise ConfigFileError(problem_errors(str(path), exc.problems, positions)) from None
    ca = config.registry.ca
    if ca and not Path(ca).is_absolute():  # relative to the config file, wherever gpuguard runs
        registry = dataclasses.replace(config.registry, ca=str(path.parent / ca))
        config = dataclasses.replace(config, registry=registry)
    return config, raw


def load_config_file(explicit: str | None, cwd: Path | None = None) -> tuple[Config, Path | None]:
    """Return the config and the file it came from; raise InputError naming file, line and key."""
    path = Path(explicit) if explicit else find_config((cwd or Path.cwd()).resolve())
    if path is None:
        return Config(), None
    config, _ = read_config(path)
    return config, path
