"""Answers of the tests' own HTTP servers (fake API servers, token issuers, Prometheus)."""

from __future__ import annotations

import json
from http.server import BaseHTTPRequestHandler
from typing import Any


def reply(handler: BaseHTTPRequestHandler, status: int, data: bytes, content_type: str = "application/json") -> None:
    """Answer with ``data`` and its length."""
    handler.send_response(status)
    handler.send_header("Content-Type", content_type)
    handler.send_header("Content-Length", str(len(data)))
    handler.end_headers()
    handler.wfile.write(data)


def reply_json(handler: BaseHTTPRequestHandler, status: int, body: Any) -> None:
    reply(handler, status, json.dumps(body).encode())
