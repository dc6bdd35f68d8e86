"""Strict JSON: non-finite numbers round-trip through strings every parser reads."""

import io
import json
import math

from absl.testing import absltest

from utils import strict_json


def _reject(constant):
  raise ValueError(f'not JSON: {constant}')


class StrictJsonTest(absltest.TestCase):

  def test_non_finite_floats_are_strings_in_the_file_and_floats_when_read(self):
    value = {'privacy': {'epsilon': math.inf}, 'lows': [-math.inf, 1.5], 'missing': math.nan, 'name': 'run', 'n': 3}
    buffer = io.StringIO()
    strict_json.dump(value, buffer, sort_keys=True)
    text = buffer.getvalue()
    self.assertEqual(json.loads(text, parse_constant=_reject),  # What a strict parser sees.
                     {'privacy': {'epsilon': 'inf'}, 'lows': ['-inf', 1.5], 'missing': 'nan', 'name': 'run', 'n': 3})
    read = strict_json.load(io.StringIO(text))
    self.assertEqual(read['privacy']['epsilon'], math.inf)
    self.assertEqual(read['lows'], [-math.inf, 1.5])
    self.assertTrue(math.isnan(read['missing']))
    self.assertEqual((read['name'], read['n']), ('run', 3))

  def test_a_file_with_python_constants_still_reads(self):
    self.assertEqual(strict_json.load(io.StringIO('{"epsilon": Infinity}')), {'epsilon': math.inf})


if __name__ == '__main__':
  absltest.main()
