"""The results pages and their data are current: every page is what its data make (`python -m experiment.results
--check`), so a hand edit of a generated number, or a data or claim file changed without regenerating the page, fails
here; and every data row, and every table a program printed, ran the code its method or program has in this tree
(`python -m experiment.results --stale`), so a change to either, or to anything it imports, fails here until what it
may move is run again."""

import os

from absl.testing import absltest

from experiment.reporting import results_data
from experiment.reporting import results_outputs
from experiment.reporting import results_pages
from experiment.reporting import staleness

_REPOSITORY = os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir)


class ResultsCheckTest(absltest.TestCase):

  def test_every_page_is_what_its_data_make(self):
    self.assertNotEmpty(results_pages.pages(_REPOSITORY))
    self.assertEqual(results_pages.stale_pages(_REPOSITORY), [],
                     'regenerate the pages with `python -m experiment.results`.')

  def test_every_data_row_ran_the_code_its_method_has_now(self):
    code_now = staleness.tree_method_code(_REPOSITORY)
    grids = results_data.grid_names(_REPOSITORY)
    self.assertNotEmpty(grids)
    for grid in grids:
      rows = results_data.read(results_data.path(_REPOSITORY, grid))
      stale = staleness.stale_rows(rows, code_now)
      self.assertEqual([row['run'] for row in stale], [],
                       f'grid {grid}: these runs ran other code of their method; `python -m experiment.results '
                       '--stale` gives the commands that rerun them.')

  def test_every_printed_table_is_produced_by_the_code_of_its_program_now(self):
    self.assertNotEmpty(results_outputs.declared(_REPOSITORY))
    self.assertEqual(results_outputs.stale(_REPOSITORY), [],
                     'produce them again with `python -m experiment.results --produce=NAME`.')


if __name__ == '__main__':
  absltest.main()
