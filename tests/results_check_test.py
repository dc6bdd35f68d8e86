"""Every results page is what its data make (`python -m experiment.results --check`): a hand edit of a generated
number, or a data or claim file changed without regenerating the page, fails here."""

import os

from absl.testing import absltest

from experiment.reporting import results_pages

_REPOSITORY = os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir)


class ResultsCheckTest(absltest.TestCase):

  def test_every_page_is_what_its_data_make(self):
    self.assertNotEmpty(results_pages.pages(_REPOSITORY))
    self.assertEqual(results_pages.stale_pages(_REPOSITORY), [],
                     'regenerate the pages with `python -m experiment.results`.')


if __name__ == '__main__':
  absltest.main()
