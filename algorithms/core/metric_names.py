"""Names of metrics.csv columns that the evaluation writes and the report reads (no TensorFlow import, so the
report's binaries, which read results while runs go on, stay light)."""

# `train_routing_count_<mode>_<branch>`: a round's clients by true mode and trained branch (`routing`).
ROUTING_COUNT_PREFIX = 'train_routing_count_'
# `routing_count_<domain>_<branch>`: an evaluation's test examples by true domain and the branch they were routed to.
TEST_ROUTING_COUNT_PREFIX = 'routing_count_'
# The test routing scores of an evaluation, averaged over the last period like the test metrics.
TEST_ROUTING_SCORES = ('routing_accuracy', 'routing_accuracy_matched', 'routing_ari')
# `mixed_q<q>_{accuracy,loss}`: test batches with a share q of mode 1 (`evaluation.mixed_name`).
MIXED_PREFIX = 'mixed_q'

# TensorBoard's groups (`tensorboard_tag`): columns by name, then by their first matching prefix.
_GROUP_OF_COLUMN = {'round_seconds': 'run', 'nonfinite_clients': 'run'}
_GROUP_OF_PREFIX = (('train_routing_', 'routing'), ('routing_', 'routing'), (MIXED_PREFIX, 'test'), ('train_', 'train'),
                    ('test_', 'test'), ('target_', 'held_out'), ('personalized_', 'held_out'), ('unseen_', 'held_out'),
                    ('validation_', 'held_out'))


def tensorboard_tag(column: str, shift_columns=frozenset()) -> str:
  """`<group>/<column>` for a metrics.csv column: shift for `shift_columns` (the scenario's truth, its
  `round_metrics`), train, test (with the mixed batches), held_out (clients' own test splits and targets), routing,
  run (time, left-out clients), and method for the method's own statistics (learned shares and priors, detection
  counts, ...)."""
  if column in shift_columns:
    return f'shift/{column}'
  group = _GROUP_OF_COLUMN.get(column) or next(
      (group for prefix, group in _GROUP_OF_PREFIX if column.startswith(prefix)), 'method')
  return f'{group}/{column}'
