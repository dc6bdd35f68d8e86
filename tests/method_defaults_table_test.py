"""docs/running.md's table of method defaults is what `experiment.method_defaults_table` writes from the method modules'
`DEFAULTS`: a default changed, or a method added, without regenerating the table fails here."""

import os
import re

from absl.testing import absltest

from algorithms import registry as algorithms
from experiment import method_defaults_table
from experiment.setups import registry as setups

_PAGE = os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, 'docs', 'running.md')


class MethodDefaultsTableTest(absltest.TestCase):

  def test_the_table_is_what_the_modules_declare(self):
    with open(_PAGE) as f:
      page = f.read()
    self.assertEqual(page, method_defaults_table.regenerated(page), 'docs/running.md\'s table of method defaults is '
                     'stale: regenerate it with `python -m experiment.method_defaults_table docs/running.md`.')

  def test_every_method_is_in_one_row(self):
    rows = [line.split('|')[1] for line in method_defaults_table.table().splitlines()[3:-1]]
    listed = [name.strip() for row in rows for name in row.split(',')]
    self.assertCountEqual(listed, algorithms.ALGORITHMS)

  def test_every_value_of_every_setup_is_in_one_row_under_it_with_its_source(self):
    found, current = {}, None
    for row in method_defaults_table.setups_table().splitlines()[3:-1]:
      cells = [cell.strip().replace('\\|', '|') for cell in re.split(r'(?<!\\)\|', row.strip('|'))]
      if cells[0]:
        current = cells[0].strip('*')
      else:
        flag, value = cells[1].strip('`').split('=', 1)
        found[(current, flag.lstrip('-'))] = (value, cells[2])
    expected = {(name, flag): (','.join(value.value) if isinstance(value.value, tuple) else
                               f'{value.value:g}' if isinstance(value.value, float) else str(value.value), value.source)
                for name, declared in setups.SETUPS.items() for flag, value in declared.flags.items()}
    self.assertEqual(found, expected)

  def test_every_setting_of_every_method_is_in_its_methods_rows_with_its_source(self):
    found, current = {}, None
    for row in method_defaults_table.settings_table().splitlines()[3:-1]:
      cells = [cell.strip().replace('\\|', '|') for cell in re.split(r'(?<!\\)\|', row.strip('|'))]
      if cells[0]:
        current = cells[0].strip('*').split(', ')[0]
      else:
        found[(current, cells[1].strip('`').split('=', 1)[0].lstrip('-'))] = cells[2]
    expected = {(name, flag): source for name in algorithms.ALGORITHMS
                for flag, source in algorithms.setting_sources(name).items()
                if algorithms.METHODS[name].module.NAME == name}
    self.assertEqual(found, expected)
    self.assertIn(('fedtem', 'statistics_decay'), found)
    self.assertStartsWith(found[('fedtem', 'statistics_decay')], 'departure: ')

  def test_a_page_without_the_region_is_refused(self):
    with self.assertRaisesRegex(ValueError, 'no region'):
      method_defaults_table.regenerated('# A page\n')


if __name__ == '__main__':
  absltest.main()
