"""JSON that every parser reads: non-finite numbers written as the strings "inf", "-inf" and "nan".

Python's `json` writes `Infinity` and `NaN`, which are not JSON (RFC 8259): `jq`, JavaScript's `JSON.parse` and
strict parsers reject the file, others read 1.8e308. A run's summary holds such values (a privacy epsilon with no
noise is infinite), so its files are written with `dump` (`allow_nan=False` after the non-finite floats became
those strings) and read with `load`, which turns the three strings back into floats, and still reads a file an older
version wrote with `Infinity`.
"""

import json
import math
from typing import IO

_NON_FINITE = {'inf': math.inf, '-inf': -math.inf, 'nan': math.nan}


def _encoded(value):
  if isinstance(value, float) and not math.isfinite(value):
    return 'nan' if math.isnan(value) else ('inf' if value > 0 else '-inf')
  if isinstance(value, dict):
    return {key: _encoded(item) for key, item in value.items()}
  if isinstance(value, (list, tuple)):
    return [_encoded(item) for item in value]
  return value


def _decoded(value):
  if isinstance(value, str):
    return _NON_FINITE.get(value, value)
  if isinstance(value, dict):
    return {key: _decoded(item) for key, item in value.items()}
  if isinstance(value, list):
    return [_decoded(item) for item in value]
  return value


def dump(value, f: IO[str], **kwargs) -> None:
  """`json.dump` of `value` with its non-finite floats as "inf", "-inf" or "nan"; nothing else changes."""
  json.dump(_encoded(value), f, allow_nan=False, **kwargs)


def load(f: IO[str]):
  """`json.load`, with the strings "inf", "-inf" and "nan" read as floats."""
  return _decoded(json.load(f))
