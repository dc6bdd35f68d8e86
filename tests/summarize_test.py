"""Tests the run summary table on hand-made run directories."""

import csv
import json
import os

from absl.testing import absltest

from experiment import summarize


def _write_run(root, name, seed, accuracies, algorithm='vanilla'):
  run = os.path.join(root, name)
  os.makedirs(run)
  flags = {'task': 'synthetic', 'algorithm': algorithm, 'shift_fn': 'linear', 'shift_p': 4.0, 'period': None,
           'prior': 'linear', 'num_branches': 2, 'seed': seed}
  with open(os.path.join(run, 'summary.json'), 'w') as f:
    json.dump({'flags': flags, 'resolved_hyperparameters': {'period': 4}}, f)
  with open(os.path.join(run, 'metrics.csv'), 'w', newline='') as f:
    writer = csv.DictWriter(f, ['round', 'test_accuracy', 'test_day_accuracy', 'test_night_accuracy'])
    writer.writeheader()
    for round_num, accuracy in enumerate(accuracies, start=1):
      writer.writerow({'round': round_num, 'test_accuracy': accuracy, 'test_day_accuracy': accuracy,
                       'test_night_accuracy': accuracy})


class SummarizeTest(absltest.TestCase):

  def test_mean_and_standard_error_over_seeds_of_last_period_means(self):
    root = self.create_tempdir().full_path
    # Period 4: the last-period mean uses rounds 3-6 of 6: (0.5 + 0.5 + 0.7 + 0.7) / 4 = 0.6, and 0.8.
    _write_run(root, 'a', 0, [0.1, 0.1, 0.5, 0.5, 0.7, 0.7])
    _write_run(root, 'b', 1, [0.2, 0.2, 0.8, 0.8, 0.8, 0.8])
    _write_run(root, 'c', 0, [0.3, 0.3, 0.3, 0.3, 0.3, 0.3], algorithm='nds')
    lines = summarize.table(root).splitlines()
    self.assertLen(lines, 4)
    nds, vanilla = lines[2], lines[3]
    self.assertIn('| nds | none | - | 4 | - | 2 | 1 | 0.300 |', nds)
    # mean 0.7, standard error std([0.6, 0.8], ddof=1) / sqrt(2) = 0.1.
    self.assertIn('| vanilla | linear | 4.0 | 4 | - | 2 | 2 | 0.700 +- 0.100 |', vanilla)


if __name__ == '__main__':
  absltest.main()
