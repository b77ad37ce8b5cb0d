"""The API's JSON parser: standard JSON only, so no request body carries a number Python cannot
store or a nesting deep enough to exhaust the stack.

Python's json module reads NaN and Infinity (not JSON) and turns 1e400 into float("inf"); either
would reach a serializer or the database as a value no field expects.
"""

import codecs
import json
import math

from rest_framework.exceptions import ParseError
from rest_framework.parsers import JSONParser

MAX_DEPTH = 32


def _finite(text):
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"the number {text[:40]} is out of range")
    return value


def _constant(name):
    raise ValueError(f"{name} is not JSON")


def _depth(value):
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict | list):
            deepest = max(deepest, depth)
            if deepest > MAX_DEPTH:
                return deepest
            children = item.values() if isinstance(item, dict) else item
            stack.extend((child, depth + 1) for child in children)
    return deepest


class StrictJSONParser(JSONParser):
    def parse(self, stream, media_type=None, parser_context=None):
        encoding = (parser_context or {}).get("encoding", "utf-8")
        try:
            data = json.load(codecs.getreader(encoding)(stream), parse_float=_finite,
                             parse_constant=_constant)
        except RecursionError:
            raise ParseError(f"JSON parse error - nested deeper than {MAX_DEPTH} levels.") from None
        except ValueError as error:
            raise ParseError(f"JSON parse error - {error}") from None
        if _depth(data) > MAX_DEPTH:
            raise ParseError(f"JSON parse error - nested deeper than {MAX_DEPTH} levels.")
        return data
