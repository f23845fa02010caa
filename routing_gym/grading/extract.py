"""Answer extraction shared by the graders: JSON ``answer`` fields, boxed answers, phrases."""

from __future__ import annotations

import ast
import json
import operator
import re
from decimal import Decimal, InvalidOperation

# A quoted "answer" key (JSON or a Python-style dict); prose "Answer: B" is left to the phrase rules.
_ANSWER_KEY = re.compile(r"[\"'](?:final_answer|final answer|answer)[\"']\s*:\s*", re.IGNORECASE)


def lenient_json_unescape(raw: str) -> str:
    """Undo JSON string escaping without eating LaTeX.

    Models write ``"answer": "\\frac{1}{2}"`` both properly escaped (``\\\\frac``) and not
    (``\\frac``). ``json.loads`` would turn the unescaped ``\\f`` into a form feed and ``\\t`` of
    ``\\times`` into a tab, so only ``\\\\``, ``\\"`` and ``\\/`` are decoded here.
    """
    return re.sub(r'\\([\\"/])', r"\1", raw)


def _read_string(text: str, start: int, quote: str) -> str | None:
    """The raw content of a quoted string starting just after ``quote`` at ``start``."""
    i = start
    while i < len(text):
        ch = text[i]
        if ch == "\\":
            i += 2
            continue
        if ch == quote:
            return text[start:i]
        i += 1
    return None  # unterminated (e.g. output cut at max_tokens)


def _read_bare(text: str, start: int) -> str:
    """A bare (unquoted) JSON value: up to a comma, closing brace or end of line."""
    m = re.match(r"[^,}\n]*", text[start:])
    return m.group(0).strip() if m else ""


def json_answer_fields(text: str) -> list[str]:
    """Every value of an ``"answer"`` key in ``text``, in order, leniently decoded.

    Works on malformed JSON (unescaped LaTeX, missing closing brace, trailing commas), which is
    what models emit, by scanning for the key instead of parsing whole objects.
    """
    values: list[str] = []
    for m in _ANSWER_KEY.finditer(text):
        pos = m.end()
        if pos >= len(text):
            continue
        if text[pos] in "\"'":
            raw = _read_string(text, pos + 1, text[pos])
            if raw is None:
                continue
            values.append(lenient_json_unescape(raw).strip())
        elif text[pos] in "[{":
            # A structured answer: keep its text (e.g. a list of numbers) up to the matching close.
            close = {"[": "]", "{": "}"}[text[pos]]
            end = text.find(close, pos)
            if end > pos:
                values.append(text[pos : end + 1])
        else:
            bare = _read_bare(text, pos)
            if bare:
                values.append(bare)
    return values


def _is_placeholder(value: str) -> bool:
    # the prompt's template ("answer": "___") echoed back by the model
    return not value.strip() or re.fullmatch(r"[_.\s]+|<[^>]*>|\.\.\.", value.strip()) is not None


def json_answer(text: str, last: bool = False) -> str | None:
    """The ``answer`` field of the first (``last=True``: the last) JSON object in ``text``
    that has a real one.

    Objects are taken in order, as in ZeroEval's own parser. An object that ``json.loads``
    rejects (unescaped LaTeX such as ``\\sqrt`` is invalid JSON) is read with the lenient
    key scanner instead of being skipped, and template placeholders (``"___"``) are ignored,
    so a model that echoes the prompt's template later is judged on its real answer. Falls
    back to any ``"answer":`` key outside balanced braces (e.g. a generation cut off before
    its closing brace).
    """
    answers = _span_answers(text)
    if answers:
        return answers[-1] if last else answers[0]
    fields = [value for value in json_answer_fields(text) if not _is_placeholder(value)]
    if fields:
        return fields[-1] if last else fields[0]
    return None


def _span_answers(text: str) -> list[str]:
    """The real ``answer`` value of each balanced JSON object in ``text``, in order."""
    answers: list[str] = []
    for span, obj in _json_spans(text):
        value: str | None = None
        if isinstance(obj, dict):
            for key in ("answer", "final_answer", "Answer"):
                if key in obj and not isinstance(obj[key], (dict, list)) and obj[key] is not None:
                    raw = obj[key]
                    # json.loads decoded escapes; recover LaTeX control words it ate ("\frac" -> "\f"+"rac")
                    value = _restore_latex_controls(raw).strip() if isinstance(raw, str) else str(raw)
                    break
        else:
            fields = json_answer_fields(span)
            value = fields[0] if fields else None
        if value is not None and not _is_placeholder(value):
            answers.append(value)
    return answers


def _restore_latex_controls(value: str) -> str:
    # "\frac" -> form feed + "rac", "\times" -> tab + "imes", "\neq" -> newline + "eq", ...
    return (
        value.replace("\f", "\\f")
        .replace("\t", "\\t")
        .replace("\b", "\\b")
        .replace("\r", "\\r")
        .replace("\n", "\\n")
        if re.search(r"[\f\t\b\r\n][a-zA-Z]", value)
        else value
    )


def _json_spans(text: str, limit: int = 16):
    """Up to ``limit`` balanced top-level ``{...}`` spans of ``text`` that mention "answer",
    each with its ``json.loads`` value (``None`` when it is not valid JSON)."""
    depth, start, found = 0, None, 0
    in_str, esc = False, False
    for i, ch in enumerate(text):
        if in_str:
            if esc:
                esc = False
            elif ch == "\\":
                esc = True
            elif ch == '"':
                in_str = False
            continue
        if ch == '"' and depth > 0:
            in_str = True
        elif ch == "{":
            if depth == 0:
                start = i
            depth += 1
        elif ch == "}" and depth > 0:
            depth -= 1
            if depth == 0 and start is not None:
                span = text[start : i + 1]
                if "answer" not in span.lower():  # LaTeX groups like {1}{2} in prose
                    continue
                try:
                    obj = json.loads(span, strict=False)
                except (json.JSONDecodeError, RecursionError):
                    obj = None
                yield span, obj
                found += 1
                if found >= limit:
                    return


def last_boxed(text: str) -> str | None:
    """Content of the last ``\\boxed{...}`` (or ``\\fbox{...}``), braces balanced."""
    idx = max(text.rfind("\\boxed"), text.rfind("\\fbox"))
    if idx < 0:
        return None
    brace = text.find("{", idx)
    if brace < 0:
        # "\boxed 5" form
        m = re.match(r"\\boxed\s+([^\s$]+)", text[idx:])
        return m.group(1) if m else None
    depth = 0
    for i in range(brace, len(text)):
        if text[i] == "{":
            depth += 1
        elif text[i] == "}":
            depth -= 1
            if depth == 0:
                return text[brace + 1 : i].strip()
    return None


_ANSWER_IS = re.compile(
    r"(?:the\s+)?(?:final\s+)?answer\s*(?:is|=|:)[ \t]*[:\-]?[ \t]*(?:\n\s*)?"
    r"(\\\[.*?\\\]|\$\$.*?\$\$|[^\n]+)",  # a display-math block may follow on the next lines
    re.IGNORECASE | re.DOTALL,
)


def answer_is_phrase(text: str) -> str | None:
    """What follows the last "the answer is" / "Answer:" (the rest of its line, or the display
    block on the next line), without a trailing period."""
    matches = list(_ANSWER_IS.finditer(text))
    if not matches:
        return None
    value = matches[-1].group(1).strip()
    value = re.sub(r"[\s.]+$", "", value)
    return value or None


_NUMBER = re.compile(r"(?<![\w.])-?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?:\s*/\s*\d+)?|(?<![\w.])-?\.\d+")


def numbers_in(text: str) -> list[str]:
    """Number literals in ``text`` (thousands separators and simple fractions kept whole)."""
    cleaned = text.replace("\u2212", "-").replace("\\!", "").replace("{,}", ",")
    cleaned = re.sub(r"\\(?:frac|dfrac|tfrac)\{(-?\d+)\}\{(\d+)\}", r"\1/\2", cleaned)
    # "\$18", "$18", "-$8": drop the currency sign, keep the sign of the number
    cleaned = re.sub(r"(?<=-)\s*\\?[$€£¥]\s*", "", cleaned)
    cleaned = re.sub(r"\\?[$€£¥]\s*", " ", cleaned)
    return [m.group(0) for m in _NUMBER.finditer(cleaned)]


def parse_number(literal: str) -> Decimal | None:
    """``"1,234.50"`` -> 1234.50, ``"7/2"`` -> 3.5, ``"-.5"`` -> -0.5; ``None`` if not a number."""
    s = literal.replace(",", "").replace(" ", "")
    try:
        if "/" in s:
            num, den = s.split("/", 1)
            d = Decimal(den)
            return Decimal(num) / d if d != 0 else None
        return Decimal(s)
    except (InvalidOperation, ValueError):
        return None


def numbers_equal(a: Decimal, b: Decimal, rel: float = 1e-6) -> bool:
    return abs(a - b) <= Decimal(str(rel)) * max(Decimal(1), abs(b))


_ARITH_OPS = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
}


def eval_arithmetic(expr: str) -> Decimal | None:
    """Value of a plain arithmetic expression (numbers, + - * / and parentheses), else ``None``.

    Models sometimes answer ``"((300 * 4) + (120 * 6)) / 12"`` instead of the number; this reads
    it with ``ast`` (no ``eval``) and refuses anything else, including huge exponents.
    """
    s = expr.replace("\u00d7", "*").replace("\u00f7", "/").replace("\\times", "*").replace("\\div", "/")
    s = re.sub(r"\\?[$€£¥]", "", s).replace(",", "").strip()
    if not re.fullmatch(r"[\d\s.+\-*/()]+", s) or not re.search(r"\d\s*[-+*/]\s*[\d(]", s) or len(s) > 200:
        return None
    try:
        tree = ast.parse(s, mode="eval")
    except SyntaxError:
        return None

    def walk(node: ast.AST) -> Decimal:
        if isinstance(node, ast.Expression):
            return walk(node.body)
        if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)):
            return Decimal(str(node.value))
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
            v = walk(node.operand)
            return -v if isinstance(node.op, ast.USub) else v
        if isinstance(node, ast.BinOp) and type(node.op) in _ARITH_OPS:
            return _ARITH_OPS[type(node.op)](walk(node.left), walk(node.right))
        raise ValueError("not arithmetic")

    try:
        return walk(tree)
    except (ValueError, ArithmeticError):
        return None
