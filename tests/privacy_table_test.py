"""docs/privacy.md is what `experiment.privacy_table` writes from the methods' declarations, and lists every method: a
declaration changed, or a method added, without regenerating the page fails here."""

import os

from absl.testing import absltest

from algorithms import registry as algorithms
from experiment import privacy_table

_PAGE = os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, 'docs', 'privacy.md')


class PrivacyTableTest(absltest.TestCase):

  def test_the_page_is_what_the_declarations_give(self):
    with open(_PAGE) as f:
      self.assertEqual(f.read(), privacy_table.markdown(), 'docs/privacy.md is stale: regenerate it with '
                       '`python -m experiment.privacy_table docs/privacy.md`.')

  def test_every_method_has_a_row(self):
    rows = [line.split('|')[1].strip() for line in privacy_table.markdown().splitlines() if line.startswith('| ')]
    self.assertEqual(rows[1:], sorted(algorithms.ALGORITHMS))


if __name__ == '__main__':
  absltest.main()
