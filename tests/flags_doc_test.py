"""docs/flags.md is what `flags_doc` writes from run_experiment's flag definitions, and that lists every flag of the
binary: a flag added, removed or reworded without regenerating the reference fails here."""

import os
import re

from absl import flags
from absl.testing import absltest

import flags_doc
import run_experiment

_REFERENCE = os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, 'docs', 'flags.md')


class FlagsDocTest(absltest.TestCase):

  def test_the_reference_is_what_the_binary_defines(self):
    with open(_REFERENCE) as f:
      self.assertEqual(f.read(), flags_doc.markdown(),
                       'docs/flags.md is stale: regenerate it with `python flags_doc.py docs/flags.md`.')

  def test_every_flag_of_the_binary_has_a_row(self):
    defined = {flag.name for flag in flags.FLAGS.flags_by_module_dict()[run_experiment.__name__]}
    listed = set(re.findall(r'^\| `--([a-z0-9_]+)`', flags_doc.markdown(), re.MULTILINE))
    self.assertEqual(listed, defined)
    self.assertGreater(len(defined), 100)


if __name__ == '__main__':
  absltest.main()
