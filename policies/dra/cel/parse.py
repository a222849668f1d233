"""CEL text to :mod:`policies.dra.cel.ast`, using cel-python's grammar with lark.

``cel.lark`` is cel-python's LALR grammar (a transcription of cel-spec's CEL.g4; vendored from
cel-python 0.5.0 with its licence header), parsed by lark with the options cel-python's
``celparser.CELParser`` uses; cel-python itself is not imported (its package pulls its whole
evaluator and pendulum, for a grammar file).  This module turns its concrete syntax tree into the compact tree of
:mod:`.ast` without recursion (the grammar is left-recursive, so a 3,000-term ``||`` chain is
3,000 levels deep), expands the macros the way cel-go's parser does (parser/macro.go) and
decodes literals with CEL's escape rules.

cel-go also limits nesting: more than 250 nested ``expr`` rules is the syntax error
``expression recursion limit exceeded: 250`` (parser/parser.go, ``maxRecursionDepth``).
Kubernetes does not change that default.  The lark tree has one ``expr`` node per
parenthesised expression, call argument, list or map element, index and ternary branch, as
CEL.g4 has, so counting them gives the same depth.
"""

from __future__ import annotations

import importlib.util
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING

from policies import patterns
from policies.dra.cel import ast


def _lazy(name: str) -> ModuleType:
    """``name`` imported when first used (importlib.util.LazyLoader): every gpuguard process imports
    this module, and only those that parse a CEL expression need lark (about 25 ms to import)."""
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.find_spec(name)
    assert spec is not None and spec.loader is not None
    spec.loader = importlib.util.LazyLoader(spec.loader)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


if TYPE_CHECKING:
    import lark
else:
    lark = _lazy("lark")

MAX_RECURSION_DEPTH = 250  # cel-go parser default, unchanged by Kubernetes
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
UINT64_MAX = 2**64 - 1

# Syntax cel-go accepts but cel-python's grammar does not: optional field selection and index
# (x.?y, x[?k], {?k: v}, [?e]), backquoted field names (a.`b-c`) and trailing commas.  A
# syntax error near one of these is not a verdict, only an unknown.
_GRAMMAR_GAPS = patterns.compile(r"\.\s*\?|\[\s*\?|\{\s*\?|,\s*\?|`|,\s*[\]\)\}]")

QUANTIFIERS = frozenset({"all", "exists", "exists_one"})
TWO_VARIABLE_MACROS = frozenset(
    {"transformList", "transformMap", "transformMapEntry", "existsOne", "sortBy", "optMap", "optFlatMap"}
)


class CelSyntaxError(Exception):
    """A syntax error, with the cel-go style detail and the 0-based character offset."""

    def __init__(self, detail: str, offset: int, grammar_gap: bool = False) -> None:
        super().__init__(detail)
        self.detail = detail
        self.offset = offset
        self.grammar_gap = grammar_gap  # cel-go may accept this text (see _GRAMMAR_GAPS)


@dataclass(frozen=True, slots=True)
class Parsed:
    root: ast.Expr
    max_expr_depth: int  # nested ``expr`` rules, cel-go's recursion measure


if TYPE_CHECKING:
    Tree = lark.Tree[lark.Token]

GRAMMAR = Path(__file__).with_name("cel.lark")
_parser: lark.Lark | None = None


def _literal_or_identifier(token: lark.Token) -> lark.Token:
    """The grammar's IDENT also matches ``true``/``false``: those are BOOL_LIT (as cel-python's
    ``CELParser.ambiguous_literals`` resolves it)."""
    if token.value in ("true", "false"):
        return lark.Token("BOOL_LIT", token.value)
    return token


def _cel_parser() -> lark.Lark:
    """The LALR parser over ``cel.lark``, built on first use, with cel-python's options."""
    global _parser
    if _parser is None:
        _parser = lark.Lark(
            GRAMMAR.read_text(encoding="utf-8"),
            parser="lalr",
            start="expr",
            g_regex_flags=re.M,
            lexer_callbacks={"IDENT": _literal_or_identifier},
            propagate_positions=True,
            maybe_placeholders=False,
            priority="invert",
        )
    return _parser


def parse(text: str) -> Parsed:
    """Parse ``text``; raises :class:`CelSyntaxError` for text cel-go would reject too."""
    parser = _cel_parser()
    try:
        tree = parser.parse(text)
    except lark.exceptions.LarkError as exc:  # UnexpectedToken/Characters carry line and column
        offset = _offset_of(text, getattr(exc, "line", None), getattr(exc, "column", None))
        raise CelSyntaxError(_syntax_detail(text, offset), offset, bool(_GRAMMAR_GAPS.search(text))) from None
    depth = _expr_depth(tree)
    if depth > MAX_RECURSION_DEPTH:
        raise CelSyntaxError(f"expression recursion limit exceeded: {MAX_RECURSION_DEPTH}", 0)
    return Parsed(_Builder(text).build(tree), depth)


def _offset_of(text: str, line: int | None, column: int | None) -> int:
    if not line or not column or line < 1:
        return len(text)
    lines = text.split("\n")
    before = sum(len(x) + 1 for x in lines[: line - 1])
    return min(before + column - 1, len(text))


def _syntax_detail(text: str, offset: int) -> str:
    if offset >= len(text.rstrip()):
        return "Syntax error: unexpected end of input"
    return f"Syntax error: unexpected {text[offset]!r}"


def _expr_depth(tree: Tree) -> int:
    best = 0
    stack: list[tuple[Tree, int]] = [(tree, 0)]
    while stack:
        node, d = stack.pop()
        if node.data == "expr":
            d += 1
            best = max(best, d)
        stack.extend((c, d) for c in node.children if isinstance(c, lark.Tree))
    return best


# ---------------------------------------------------------------------------------------------
# literals


_SIMPLE_ESCAPES = {
    "a": "\a",
    "b": "\b",
    "f": "\f",
    "n": "\n",
    "r": "\r",
    "t": "\t",
    "v": "\v",
    "\\": "\\",
    "'": "'",
    '"': '"',
    "`": "`",
    "?": "?",
}


def _unquote(body: str, as_bytes: bool) -> list[int]:
    """Code points (or byte values) of a cooked CEL string body; ValueError on a bad escape."""
    out: list[int] = []
    i = 0
    while i < len(body):
        ch = body[i]
        if ch != "\\":
            if as_bytes:
                out.extend(ch.encode("utf-8"))
            else:
                out.append(ord(ch))
            i += 1
            continue
        if i + 1 >= len(body):
            raise ValueError("unterminated escape sequence")
        esc = body[i + 1]
        if esc in _SIMPLE_ESCAPES:
            out.append(ord(_SIMPLE_ESCAPES[esc]))
            i += 2
        elif esc in "01234567":
            digits = body[i + 1 : i + 4]
            if len(digits) != 3 or any(c not in "01234567" for c in digits) or digits[0] > "3":
                raise ValueError(f"invalid octal escape \\{digits}")
            out.append(int(digits, 8))
            i += 4
        elif esc in "xX":
            out.append(_hex(body, i + 2, 2))
            i += 4
        elif esc in "uU":
            if as_bytes:
                raise ValueError(f"\\{esc} escapes are not allowed in bytes literals")
            width = 4 if esc == "u" else 8
            code = _hex(body, i + 2, width)
            if 0xD800 <= code <= 0xDFFF or code > 0x10FFFF:
                raise ValueError(f"invalid unicode code point \\{esc}{body[i + 2 : i + 2 + width]}")
            out.append(code)
            i += 2 + width
        else:
            raise ValueError(f"invalid escape sequence \\{esc}")
    return out


def _hex(body: str, start: int, width: int) -> int:
    digits = body[start : start + width]
    if len(digits) != width or any(c not in "0123456789abcdefABCDEF" for c in digits):
        raise ValueError(f"invalid hex escape {digits!r}")
    return int(digits, 16)


def _string_body(text: str) -> tuple[str, bool]:
    """Strip prefix and quotes: (body, raw)."""
    raw = text[:1] in "rR"
    if raw:
        text = text[1:]
    quote = 3 if text[:3] in ('"""', "'''") else 1
    return text[quote:-quote], raw


def decode_string(token_text: str) -> str:
    body, raw = _string_body(token_text)
    if raw:
        return body
    return "".join(chr(c) for c in _unquote(body, as_bytes=False))


def decode_bytes(token_text: str) -> bytes:
    body, raw = _string_body(token_text[1:])
    if raw:
        return body.encode("utf-8")
    return bytes(_unquote(body, as_bytes=True))


def _literal(token: lark.Token) -> tuple[object, str]:
    kind, text = token.type, str(token)
    if kind == "INT_LIT":
        value = int(text, 0) if "x" not in text.lower() else int(text, 16)
        if not INT64_MIN <= value <= INT64_MAX:
            raise ValueError(f"invalid int literal {text}")
        return value, "int"
    if kind == "UINT_LIT":
        digits = text[:-1]
        value = int(digits, 16) if "x" in digits.lower() else int(digits, 10)
        if not 0 <= value <= UINT64_MAX:
            raise ValueError(f"invalid uint literal {text}")
        return value, "uint"
    if kind == "FLOAT_LIT":
        return float(text), "double"
    if kind in ("STRING_LIT", "MLSTRING_LIT"):
        return decode_string(text), "string"
    if kind == "BYTES_LIT":
        return decode_bytes(text), "bytes"
    if kind == "BOOL_LIT":
        return text == "true", "bool"
    if kind == "NULL_LIT":
        return None, "null"
    raise ValueError(f"unsupported literal {text!r}")


# ---------------------------------------------------------------------------------------------
# tree building


_BINARY = {
    "relation_lt": "_<_",
    "relation_le": "_<=_",
    "relation_gt": "_>_",
    "relation_ge": "_>=_",
    "relation_eq": "_==_",
    "relation_ne": "_!=_",
    "relation_in": "@in",
    "addition_add": "_+_",
    "addition_sub": "_-_",
    "multiplication_mul": "_*_",
    "multiplication_div": "_/_",
    "multiplication_mod": "_%_",
}

if TYPE_CHECKING:
    Built = ast.Expr | list[ast.Expr] | lark.Token | tuple[str, ...] | None


class _Builder:
    def __init__(self, text: str) -> None:
        self.text = text
        self.next_id = 0

    def _id(self) -> int:
        self.next_id += 1
        return self.next_id

    def build(self, tree: Tree) -> ast.Expr:
        done: dict[int, Built] = {}
        stack: list[tuple[Tree, bool]] = [(tree, False)]
        while stack:
            node, expanded = stack.pop()
            if not expanded:
                stack.append((node, True))
                stack.extend((c, False) for c in node.children if isinstance(c, lark.Tree))
                continue
            kids: list[Built] = [done.pop(id(c)) if isinstance(c, lark.Tree) else c for c in node.children]
            done[id(node)] = self._node(node, kids)
        result = done[id(tree)]
        assert isinstance(result, ast.Expr)
        return result

    def _offset(self, node: Tree | lark.Token) -> int:
        if isinstance(node, lark.Token):
            return node.start_pos or 0
        meta = node.meta
        return 0 if meta.empty else (meta.start_pos or 0)

    def _skip(self, pos: int) -> int:
        """The next position that is not whitespace or a // comment."""
        while pos < len(self.text):
            if self.text[pos].isspace():
                pos += 1
            elif self.text.startswith("//", pos):
                end = self.text.find("\n", pos)
                pos = len(self.text) if end == -1 else end
            else:
                break
        return pos

    def _after(self, node: Tree | lark.Token | None, fallback: int) -> int:
        """cel-go locates operators, '(' and '[' at their own token: the first one after ``node``."""
        end = node.end_pos if isinstance(node, lark.Token) else getattr(getattr(node, "meta", None), "end_pos", None)
        if isinstance(node, lark.Tree) and node.meta.empty:
            end = None
        return self._skip(end) if isinstance(end, int) else fallback

    def _operator_offset(self, op_tree: Tree) -> int:
        left = op_tree.children[0] if op_tree.children else None
        return self._after(left if isinstance(left, lark.Tree | lark.Token) else None, self._offset(op_tree))

    def _dot_before(self, name: lark.Token) -> int:
        """A selection is located at its '.' (cel-go ``VisitSelect``)."""
        pos = self._offset(name) - 1
        while pos > 0 and self.text[pos] != ".":
            pos -= 1
        return max(pos, 0)

    def _error(self, node: Tree | lark.Token, message: str) -> CelSyntaxError:
        return CelSyntaxError(message, self._offset(node))

    def _node(self, node: Tree, kids: list[Built]) -> Built:
        handler = _HANDLERS.get(str(node.data))
        if handler is None:
            raise self._error(node, f"Syntax error: unexpected construct {node.data}")
        return handler(self, node, kids)

    # --- handlers -----------------------------------------------------------------------

    def _pass(self, node: Tree, kids: list[Built]) -> Built:
        return kids[0] if kids else None

    def _expr(self, node: Tree, kids: list[Built]) -> Built:
        if len(kids) == 1:
            return kids[0]
        cond, yes, no = (self._expect(node, k) for k in kids)
        return ast.Call(self._id(), self._offset(node), "_?_:_", [cond, yes, no])

    def _binary(self, node: Tree, kids: list[Built]) -> Built:
        if len(kids) == 1:
            return kids[0]
        op_tree = node.children[0]
        assert isinstance(op_tree, lark.Tree)
        left = self._expect(node, kids[0])
        right = self._expect(node, kids[1])
        return ast.Call(self._id(), self._operator_offset(op_tree), _BINARY[str(op_tree.data)], [left, right])

    def _operator_operand(self, node: Tree, kids: list[Built]) -> Built:
        # relation_lt etc.: the operator wraps its left operand.
        return kids[0]

    def _unary(self, node: Tree, kids: list[Built]) -> Built:
        if len(kids) == 1:
            return kids[0]
        op_tree = node.children[0]
        assert isinstance(op_tree, lark.Tree)
        operand = self._expect(node, kids[1])
        op = "!_" if op_tree.data == "unary_not" else "-_"
        # cel-go's parser drops an even number of repeated ! or - (VisitLogicalNot/VisitNegate).
        if isinstance(operand, ast.Call) and operand.function == op and operand.target is None:
            return operand.args[0]
        if op == "-_" and isinstance(operand, ast.Literal) and operand.kind in ("int", "double"):
            value = operand.value
            assert isinstance(value, int | float)
            negated = -value
            if operand.kind == "int" and not INT64_MIN <= negated <= INT64_MAX:
                raise self._error(node, f"Syntax error: invalid int literal -{value}")
            return ast.Literal(self._id(), self._offset(node), negated, operand.kind)
        return ast.Call(self._id(), self._offset(node), op, [operand])

    def _marker(self, node: Tree, kids: list[Built]) -> Built:
        return None  # unary_not / unary_neg carry no operand

    def _member_dot(self, node: Tree, kids: list[Built]) -> Built:
        operand = self._expect(node, kids[0])
        name = kids[1]
        assert isinstance(name, lark.Token)
        return ast.Select(self._id(), self._dot_before(name), operand, str(name))

    def _member_dot_arg(self, node: Tree, kids: list[Built]) -> Built:
        target = self._expect(node, kids[0])
        name_token = kids[1]
        assert isinstance(name_token, lark.Token)
        args = self._args(kids[2] if len(kids) > 2 else None)
        return self._member_call(name_token, target, args)

    def _member_call(self, name_token: lark.Token, target: ast.Expr, args: list[ast.Expr]) -> ast.Expr:
        name, offset = str(name_token), self._after(name_token, self._offset(name_token))
        if name == "bind" and isinstance(target, ast.Ident) and target.name == "cel" and len(args) == 3:
            var = args[0]
            if not isinstance(var, ast.Ident):
                raise CelSyntaxError("cel.bind() variable names must be simple identifiers", var.offset)
            return ast.Bind(self._id(), offset, var.name, args[1], args[2])
        if name in QUANTIFIERS and len(args) == 2:
            var = args[0]
            if not isinstance(var, ast.Ident):
                raise CelSyntaxError("argument must be a simple name", var.offset)
            return ast.Comprehension(self._id(), offset, name, target, var.name, args[1])
        if name in ("map", "filter") and len(args) in (2, 3) and not (name == "filter" and len(args) == 3):
            var = args[0]
            if not isinstance(var, ast.Ident):
                raise CelSyntaxError("argument is not an identifier", var.offset)
            if name == "filter":
                return ast.Comprehension(self._id(), offset, "filter", target, var.name, args[1])
            predicate = args[1] if len(args) == 3 else None
            return ast.Comprehension(self._id(), offset, "map", target, var.name, predicate, args[-1])
        if (name in QUANTIFIERS and len(args) == 3) or name in TWO_VARIABLE_MACROS:
            return ast.Unsupported(self._id(), offset, f"the {name}() macro", [target, *args])
        return ast.Call(self._id(), offset, name, args, target)

    def _member_index(self, node: Tree, kids: list[Built]) -> Built:
        operand, index = self._expect(node, kids[0]), self._expect(node, kids[1])
        left = node.children[0]
        offset = self._after(left if isinstance(left, lark.Tree | lark.Token) else None, self._offset(node))
        return ast.Call(self._id(), offset, "_[_]", [operand, index])

    def _member_object(self, node: Tree, kids: list[Built]) -> Built:
        return ast.Unsupported(self._id(), self._offset(node), "message construction")

    def _literal_node(self, node: Tree, kids: list[Built]) -> Built:
        token = kids[0]
        assert isinstance(token, lark.Token)
        try:
            value, kind = _literal(token)
        except ValueError as exc:
            raise self._error(token, f"Syntax error: {exc}") from None
        return ast.Literal(self._id(), self._offset(token), value, kind)

    def _ident(self, node: Tree, kids: list[Built]) -> Built:
        token = kids[0]
        assert isinstance(token, lark.Token)
        return ast.Ident(self._id(), self._offset(token), str(token))

    def _ident_arg(self, node: Tree, kids: list[Built]) -> Built:
        token = kids[0]
        assert isinstance(token, lark.Token)
        args = self._args(kids[1] if len(kids) > 1 else None)
        name, offset = str(token), self._after(token, self._offset(token))
        if name == "has" and len(args) == 1:
            arg = args[0]
            if not isinstance(arg, ast.Select) or arg.test_only:
                raise CelSyntaxError("invalid argument to has() macro", arg.offset)
            return ast.Select(self._id(), offset, arg.operand, arg.field, test_only=True)
        return ast.Call(self._id(), offset, name, args)

    def _list(self, node: Tree, kids: list[Built]) -> Built:
        return ast.CreateList(self._id(), self._offset(node), self._args(kids[0] if kids else None))

    def _map(self, node: Tree, kids: list[Built]) -> Built:
        items = self._args(kids[0] if kids else None)
        entries = [(items[i], items[i + 1]) for i in range(0, len(items) - 1, 2)]
        return ast.CreateMap(self._id(), self._offset(node), entries)

    def _exprlist(self, node: Tree, kids: list[Built]) -> Built:
        return [self._expect(node, k) for k in kids]

    def _fieldinits(self, node: Tree, kids: list[Built]) -> Built:
        return None  # only reachable under member_object, which is unsupported

    # --- helpers -------------------------------------------------------------------------

    def _args(self, built: Built) -> list[ast.Expr]:
        if built is None:
            return []
        assert isinstance(built, list)
        return built

    def _expect(self, node: Tree, built: Built) -> ast.Expr:
        if not isinstance(built, ast.Expr):
            raise self._error(node, f"Syntax error: unexpected construct {node.data}")
        return built


def _logical(op: str) -> Callable[[_Builder, Tree, list[Built]], Built]:
    def handler(self: _Builder, node: Tree, kids: list[Built]) -> Built:
        if len(kids) == 1:
            return kids[0]
        left, right = self._expect(node, kids[0]), self._expect(node, kids[1])
        if isinstance(left, ast.Call) and left.function == op and left.target is None:
            left.args.append(right)  # flatten the left-recursive chain
            return left
        return ast.Call(self._id(), self._operator_offset(node), op, [left, right])

    return handler


_HANDLERS: dict[str, Callable[[_Builder, Tree, list[Built]], Built]] = {
    "expr": _Builder._expr,
    "conditionalor": _logical("_||_"),
    "conditionaland": _logical("_&&_"),
    "relation": _Builder._binary,
    "addition": _Builder._binary,
    "multiplication": _Builder._binary,
    "unary": _Builder._unary,
    "unary_not": _Builder._marker,
    "unary_neg": _Builder._marker,
    "member": _Builder._pass,
    "member_dot": _Builder._member_dot,
    "member_dot_arg": _Builder._member_dot_arg,
    "member_index": _Builder._member_index,
    "member_object": _Builder._member_object,
    "primary": _Builder._pass,
    "paren_expr": _Builder._pass,
    "literal": _Builder._literal_node,
    "ident": _Builder._ident,
    "dot_ident": _Builder._ident,
    "ident_arg": _Builder._ident_arg,
    "dot_ident_arg": _Builder._ident_arg,
    "list_lit": _Builder._list,
    "map_lit": _Builder._map,
    "exprlist": _Builder._exprlist,
    "mapinits": _Builder._exprlist,
    "fieldinits": _Builder._fieldinits,
    **{op: _Builder._operator_operand for op in _BINARY},
}
