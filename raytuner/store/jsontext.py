"""Standard JSON (RFC 8259) in and out: strict reading of untrusted text, standard writing of anything stored.

Python's :mod:`json` reads and writes more than standard JSON: ``NaN`` and
``Infinity``, strings with lone surrogates (``"\\ud800"``, which no UTF-8
text can hold) and nesting as deep as the interpreter's stack. Other parsers
refuse them, and a lone surrogate stored once breaks every later reader that
encodes the text (a terminal, pandas, MongoDB). So:

- :func:`loads_strict` reads JSON a client sent: standard JSON, at most
  :data:`MAX_DEPTH` levels deep, every key and string valid Unicode; anything
  else is one :class:`~raytuner.errors.InvalidInputError` naming the field.
- :func:`dumps_standard` writes any value as standard JSON: NaN becomes
  ``null`` (GPTune's value of an output a run did not give, as in a failed
  record), an infinity the number ``1e999`` (standard syntax, read back as
  infinity by Python's and JavaScript's parsers; GPTune writes infinite
  output bounds in its surrogate-model records, which must stay infinite),
  and a lone surrogate U+FFFD, the Unicode replacement character.
  :func:`standard` makes the same replacements in a value, an infinity aside.
- :func:`loads_stored` reads JSON raytuner wrote (a store, a GPTune file):
  lenient as before, but lone surrogates that older versions stored come back
  as U+FFFD, so what was stored can always be shown and exported.

Example:
    >>> loads_strict('{"a": [1, 2.5, "b"]}', "options_json")
    {'a': [1, 2.5, 'b']}
    >>> loads_strict('{"a": NaN}', "options_json")
    Traceback (most recent call last):
    ...
    raytuner.errors.InvalidInputError: options_json: not standard JSON: NaN is not a JSON number (use null)
    >>> dumps_standard({"y": float("nan"), "b": [float("-inf")], "k\\ud800": 1})
    '{"y":null,"b":[-1e999],"k\\\\ufffd":1}'
"""

from __future__ import annotations

import json
import math
import re
import secrets
from typing import Any

from raytuner.errors import InvalidInputError

__all__ = ["MAX_DEPTH", "is_unicode", "loads_strict", "standard", "dumps_standard", "loads_stored"]

#: Deepest nesting of arrays and objects a client's JSON may hold. Every field of the protocol needs a few
#: levels (a problem space: 4); 64 leaves room for any real option or output and keeps a stored record
#: (a field sits about 4 levels down in it) well inside MongoDB's limit of 100 levels per document and
#: far from Python's recursion limit in the code that walks, copies and writes the value.
MAX_DEPTH = 64

_SURROGATE = re.compile("[\ud800-\udfff]")
#: A \\u escape of a surrogate in JSON text: the only way JSON text read from UTF-8 can give one.
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")
_SURROGATE_ESCAPE_BYTES = re.compile(rb"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")


class _NotStandard(ValueError):
    """What :func:`loads_strict`'s hooks raise for a number JSON has no place for."""


def _constant(name: str) -> Any:
    raise _NotStandard(f"{name} is not a JSON number (use null)")


def is_unicode(text: str) -> bool:
    """Whether ``text`` is Unicode text, i.e. holds no lone surrogate (so it can be written as UTF-8).

    Args:
        text: any text (a command-line argument with bytes that are not UTF-8 holds lone surrogates).

    >>> is_unicode("café"), is_unicode("caf\\udce9")
    (True, False)
    """
    return text.isascii() or _SURROGATE.search(text) is None


def _path(parts: tuple[Any, ...]) -> str:
    return "".join(f"[{p}]" if isinstance(p, int) else f"[{json.dumps(p)}]" for p in parts) or "the value"


def _check(value: Any, field: str) -> None:
    """Refuse ``value`` (read from JSON) when it is nested too deep or holds a lone surrogate."""
    stack: list[tuple[Any, tuple[Any, ...]]] = [(value, ())]
    while stack:
        item, where = stack.pop()
        if isinstance(item, str):
            if not is_unicode(item) and (found := _SURROGATE.search(item)):
                raise InvalidInputError(
                    field,
                    f"{_path(where)} holds a lone surrogate (U+{ord(found[0]):04X}): strings must be Unicode text",
                )
        elif isinstance(item, (dict, list)):
            if len(where) >= MAX_DEPTH:
                raise InvalidInputError(field, f"nested deeper than {MAX_DEPTH} levels of arrays and objects")
            if isinstance(item, dict):
                for key, inner in item.items():
                    if not is_unicode(key) and (found := _SURROGATE.search(key)):
                        raise InvalidInputError(
                            field,
                            f"key {_path(where + (key,))} holds a lone surrogate "
                            f"(U+{ord(found[0]):04X}): keys must be Unicode text",
                        )
                    stack.append((inner, where + (key,)))
            else:
                stack.extend((inner, where + (i,)) for i, inner in enumerate(item))


def loads_strict(text: str, field: str, max_bytes: int | None = None) -> Any:
    """The value of the standard JSON ``text`` a client sent in ``field``; one :class:`InvalidInputError` if not.

    Refused: text that is not JSON, ``NaN``/``Infinity``, a lone surrogate in any key or string, nesting
    deeper than :data:`MAX_DEPTH`, and more than ``max_bytes`` bytes of UTF-8 (when given). A number beyond
    a double's range is standard JSON and reads as an infinity (as :func:`dumps_standard` writes one).

    Args:
        text: the JSON text.
        field: the field's name, for the error.
        max_bytes: the largest text allowed, in UTF-8 bytes (default: no limit here).

    >>> loads_strict("[" * 65 + "]" * 65, "tasks_json")
    Traceback (most recent call last):
    ...
    raytuner.errors.InvalidInputError: tasks_json: nested deeper than 64 levels of arrays and objects
    """
    if max_bytes is not None and len(text) > max_bytes // 4:  # 4 bytes per character at most
        size = len(text.encode("utf-8", "surrogatepass"))
        if size > max_bytes:
            raise InvalidInputError(field, f"{size} bytes; at most {max_bytes}")
    try:
        value = json.loads(text, parse_constant=_constant)
    except _NotStandard as exc:
        raise InvalidInputError(field, f"not standard JSON: {exc}") from None
    except json.JSONDecodeError as exc:
        raise InvalidInputError(field, f"not valid JSON: {exc}") from None
    except RecursionError:
        raise InvalidInputError(field, f"nested deeper than {MAX_DEPTH} levels of arrays and objects") from None
    except ValueError as exc:  # an integer of more digits than Python reads
        raise InvalidInputError(field, f"not usable JSON: {str(exc).splitlines()[0]}") from None
    _check(value, field)
    return value


def _text(value: str) -> str:
    """``value`` with each lone surrogate as U+FFFD (a pair of surrogates becomes the character it encodes)."""
    if is_unicode(value):
        return value
    return value.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")


def _replace(value: Any, numbers: bool, infinity: Any = None) -> Any:
    if isinstance(value, float):
        if math.isnan(value) and numbers:
            return None
        if math.isfinite(value) or not numbers or infinity is None:
            return value
        return infinity if value > 0 else "-" + infinity
    if isinstance(value, str):
        return _text(value)
    if isinstance(value, dict):
        return {_text(k) if isinstance(k, str) else k: _replace(v, numbers, infinity) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_replace(v, numbers, infinity) for v in value]
    return value


def standard(value: Any) -> Any:
    """``value`` with each NaN as ``None`` and each lone surrogate as U+FFFD (infinities kept).

    Containers are copied (tuples as lists); anything else is kept as it is.

    Args:
        value: JSON data.

    >>> standard({"y": float("nan"), "s": ["a\\udc80"]})
    {'y': None, 's': ['a\\ufffd']}
    """
    return _replace(value, numbers=True)


def dumps_standard(value: Any, **options: Any) -> str:
    """``json.dumps(value, **options)`` as standard JSON (see :func:`standard`); compact unless told otherwise.

    The value is copied only when it holds something to replace, so writing plain data costs what
    ``json.dumps`` does.

    Args:
        value: JSON data.
        **options: :func:`json.dumps`'s options (``indent``, ``sort_keys``, ``default``, ...).
    """
    options.setdefault("separators", (",", ":") if options.get("indent") is None else None)
    try:
        text = json.dumps(value, allow_nan=False, **options)
    except ValueError:  # a NaN or an infinity
        return _replaced(value, options)
    if _SURROGATE_ESCAPE.search(text) if options.get("ensure_ascii", True) else _SURROGATE.search(text):
        return _replaced(value, options)  # a surrogate (perhaps a pair): checked one by one
    return text


def _replaced(value: Any, options: dict[str, Any]) -> str:
    """:func:`dumps_standard`'s text of a value that holds something to replace."""
    mark = f"\0inf{secrets.token_hex(8)}\0"  # an infinity, until the text is written
    text = json.dumps(_replace(value, True, mark), allow_nan=False, **options)
    quoted = json.dumps(mark, ensure_ascii=options.get("ensure_ascii", True))
    return text.replace(quoted[:1] + "-" + quoted[1:], "-1e999").replace(quoted, "1e999")


def loads_stored(text: str | bytes) -> Any:
    """JSON text raytuner (or GPTune) wrote, read as :func:`json.loads` does, a lone surrogate as U+FFFD.

    Args:
        text: the JSON text.

    Raises:
        json.JSONDecodeError, UnicodeDecodeError, RecursionError: as :func:`json.loads`.
    """
    value = json.loads(text)
    if isinstance(text, (bytes, bytearray)):
        surrogates = _SURROGATE_ESCAPE_BYTES.search(text) is not None
    else:
        surrogates = _SURROGATE_ESCAPE.search(text) is not None or not is_unicode(text)
    if surrogates:
        return _replace(value, numbers=False)  # numbers as read: a NaN output makes a failed record
    return value
