"""Tests the run directory: configuration record, refusal to mix runs, atomic checkpoints, metrics truncation,
TensorBoard events."""

import asyncio
import collections
import gc
import json
import os
import sys

from absl.testing import absltest
import numpy as np
import tensorflow as tf
import tensorflow_federated as tff

from experiment.core import run_directory
from utils import execution_context

_CONFIG = {'algorithm': 'vanilla', 'client_learning_rate': 0.05, 'seed': 0}
_DEFAULTS = {'algorithm': 'vanilla', 'client_learning_rate': None, 'seed': 0, 'scenario': 'first'}


def _open_event_loops() -> set[int]:
  return {id(value) for value in gc.get_objects()
          if isinstance(value, asyncio.AbstractEventLoop) and not value.is_closed()}


class ConfigurationTest(absltest.TestCase):

  def setUp(self):
    super().setUp()
    self.dir = os.path.join(self.create_tempdir().full_path, 'run')

  def test_names_that_leave_the_root_are_refused(self):
    for name in ('../../etc', '..', '.', 'a/b', '', '/abs'):
      with self.assertRaisesRegex(run_directory.RunDirectoryError, 'single directory name'):
        run_directory.validate_name(name)
    run_directory.validate_name('synthetic_vanilla_p1_s0')

  def _complete_a_round(self):
    with open(os.path.join(self.dir, run_directory.METRICS), 'w') as f:
      f.write('round,loss\r\n1,0.5\r\n')

  def test_same_configuration_resumes_and_another_is_refused_naming_the_flags(self):
    run_directory.check_compatible(self.dir, _CONFIG, _DEFAULTS)  # Nothing there yet.
    run_directory.prepare(self.dir, _CONFIG, overwrite=False)
    self._complete_a_round()
    run_directory.check_compatible(self.dir, dict(_CONFIG), _DEFAULTS)
    changed = dict(_CONFIG, algorithm='fedtem', client_learning_rate=0.5)
    with self.assertRaises(run_directory.RunDirectoryError) as raised:
      run_directory.check_compatible(self.dir, changed, _DEFAULTS)
    message = str(raised.exception)
    self.assertIn("algorithm: 'vanilla' -> 'fedtem'", message)
    self.assertIn('client_learning_rate: 0.05 -> 0.5', message)
    self.assertNotIn('seed', message)
    self.assertNotIn('\n', message)

  def test_flag_missing_from_an_older_record_matches_only_at_its_default(self):
    run_directory.prepare(self.dir, _CONFIG, overwrite=False)
    self._complete_a_round()
    run_directory.check_compatible(self.dir, dict(_CONFIG, scenario='first'), _DEFAULTS)
    with self.assertRaisesRegex(run_directory.RunDirectoryError,
                                "scenario: not recorded, so the default 'first' -> 'second'"):
      run_directory.check_compatible(self.dir, dict(_CONFIG, scenario='second'), _DEFAULTS)

  def test_an_attempt_that_completed_no_round_is_replaced(self):
    run_directory.prepare(self.dir, _CONFIG, overwrite=False)
    with open(os.path.join(self.dir, run_directory.METRICS), 'w') as f:
      f.write('round\r\n')  # The header a release manager writes before the first row.
    changed = dict(_CONFIG, client_learning_rate=0.5)
    run_directory.check_compatible(self.dir, changed, _DEFAULTS)
    run_directory.prepare(self.dir, changed, overwrite=False)
    self.assertCountEqual(os.listdir(self.dir), ['config.json'])
    with open(os.path.join(self.dir, run_directory.CONFIG)) as f:
      self.assertEqual(json.load(f), changed)
    self._complete_a_round()  # With a round done, the same change is refused.
    with self.assertRaisesRegex(run_directory.RunDirectoryError, 'client_learning_rate: 0.5 -> 0.05'):
      run_directory.check_compatible(self.dir, _CONFIG, _DEFAULTS)

  def test_outputs_without_a_record_are_refused(self):
    os.makedirs(self.dir)
    with open(os.path.join(self.dir, run_directory.METRICS), 'w') as f:
      f.write('round\n1\n')
    with self.assertRaisesRegex(run_directory.RunDirectoryError, 'without a config.json'):
      run_directory.check_compatible(self.dir, _CONFIG, _DEFAULTS)

  def test_overwrite_deletes_the_run_outputs_only(self):
    run_directory.prepare(self.dir, _CONFIG, overwrite=False)
    for name in (run_directory.METRICS, 'summary.json', 'notes.txt'):
      with open(os.path.join(self.dir, name), 'w') as f:
        f.write('x')
    os.makedirs(os.path.join(self.dir, run_directory.CHECKPOINTS, 'program_state_8'))
    changed = dict(_CONFIG, seed=1)
    run_directory.prepare(self.dir, changed, overwrite=True)
    self.assertCountEqual(os.listdir(self.dir), ['config.json', 'notes.txt'])
    with open(os.path.join(self.dir, run_directory.CONFIG)) as f:
      self.assertEqual(json.load(f), changed)

  def test_unwritable_directory_is_one_line(self):
    blocker = self.create_tempfile().full_path
    with self.assertRaisesRegex(run_directory.RunDirectoryError, 'cannot write the run directory .*Not a directory'):
      run_directory.prepare(os.path.join(blocker, 'run'), _CONFIG, overwrite=False)


class MetricsTest(absltest.TestCase):

  def test_truncation_keeps_complete_rows_up_to_the_round(self):
    output_dir = self.create_tempdir().full_path
    path = os.path.join(output_dir, run_directory.METRICS)
    with open(path, 'w') as f:
      f.write('round,loss,test_accuracy\n1,0.5,\n2,0.4,0.7\n3,0.3,\n4,0.2,0.8\n5,0.1')  # Row 5 cut short.
    run_directory.truncate_metrics(output_dir, last_round=4)
    with open(path) as f:
      self.assertEqual(f.read().splitlines(), ['round,loss,test_accuracy', '1,0.5,', '2,0.4,0.7', '3,0.3,',
                                               '4,0.2,0.8'])
    run_directory.truncate_metrics(output_dir, last_round=2)
    with open(path) as f:
      self.assertEqual(f.read().splitlines(), ['round,loss,test_accuracy', '1,0.5,', '2,0.4,0.7'])

  def test_a_file_that_cannot_be_resumed_is_refused_and_left_as_it_is(self):
    output_dir = self.create_tempdir().full_path
    path = os.path.join(output_dir, run_directory.METRICS)
    with self.assertRaisesRegex(run_directory.RunDirectoryError, r'metrics.csv is missing, but the run resumes '
                                r'after round 2'):
      run_directory.truncate_metrics(output_dir, last_round=2)
    run_directory.truncate_metrics(output_dir, last_round=0)  # Nothing to keep: a fresh start.
    for text, reason in (('Round,loss\n1,0.5\n', 'has no "round" column'),
                         ('round,loss\n1,0.5\n2,x\n', "line 3 holds 'x', not a number"),
                         ('round,loss\n1,0.5\n2\n', 'line 3 has 1 cells for 2 columns'),
                         ('round,loss\n1,0.5\n3,0.4\n', r'holds rounds 1-3 \(2 rows\), not 1, 2, 3'),
                         ('round,loss\n1,0.5\ninf,0.4\n', "line 3 has round 'inf', not a whole number >= 1"),
                         ('round,loss\n1,0.5\n,0.4\n', "line 3 has round '', not a whole number >= 1"),
                         ('round,loss\n1,0.5\n', r'holds rounds 1-1 \(1 rows\), but the run resumes after round 2')):
      with open(path, 'w') as f:
        f.write(text)
      with self.assertRaisesRegex(run_directory.RunDirectoryError, reason):
        run_directory.truncate_metrics(output_dir, last_round=2)
      with open(path) as f:
        self.assertEqual(f.read(), text)

  def test_truncation_of_a_row_cut_inside_its_round_number(self):
    output_dir = self.create_tempdir().full_path
    path = os.path.join(output_dir, run_directory.METRICS)
    with open(path, 'w') as f:
      f.write('round,loss\n1,0.5\n2,0.4\n1')  # Row 3 cut after its first digit would read as round 1.
    run_directory.truncate_metrics(output_dir, last_round=2)
    with open(path) as f:
      self.assertEqual(f.read().splitlines(), ['round,loss', '1,0.5', '2,0.4'])


  def test_release_appends_the_rows_tffs_manager_writes_without_rewriting_the_file(self):
    # The same releases through TFF's own manager (the reference: its rows, a new column, a key released again) and
    # through the suite's, which must leave the same bytes while appending in place after the first release (which
    # writes the header's columns); TFF 0.87's replaces the file at every release (the control). A hard link to the
    # file before each release tells: after an append it is the same file, after a replacement the link holds the
    # old one.
    releases = [(collections.OrderedDict(loss=0.5, acc=0.1), 1), (collections.OrderedDict(loss=0.4, acc=0.2), 2),
                (collections.OrderedDict(loss=0.3, acc=0.3), 3), (collections.OrderedDict(loss=0.2, acc=0.4), 4)]
    later = [(collections.OrderedDict(loss=0.1, acc=0.5, test=0.9), 5),  # A new column: the file is rewritten.
             (collections.OrderedDict(loss=0.7, acc=0.6), 3),  # An earlier key: rows 3-5 go first.
             (collections.OrderedDict(loss=0.6, acc=0.7), 4)]
    texts, replaced = {}, {}
    for name, manager_class in (('tff', tff.program.CSVFileReleaseManager),
                                ('suite', run_directory.MetricsReleaseManager)):
      path = os.path.join(self.create_tempdir().full_path, run_directory.METRICS)
      link = path + '.link'
      manager = manager_class(path, key_fieldname='round')
      replaced[name] = 0
      for value, key in releases:
        os.link(path, link)
        asyncio.run(manager.release(value, key=key))
        replaced[name] += not os.path.samefile(path, link)
        os.remove(link)
      for value, key in later:
        asyncio.run(manager.release(value, key=key))
      with open(path) as f:
        texts[name] = f.read()
    self.assertEqual(texts['suite'], texts['tff'])
    self.assertEqual(texts['suite'].splitlines()[0], 'round,acc,loss,test')
    self.assertEqual([line.split(',')[0] for line in texts['suite'].splitlines()[1:]], ['1', '2', '3', '4'])
    self.assertEqual(replaced, {'tff': 4, 'suite': 1})

  def test_a_resumed_run_appends_after_the_truncated_rows(self):
    output_dir = self.create_tempdir().full_path
    path = os.path.join(output_dir, run_directory.METRICS)
    manager = run_directory.MetricsReleaseManager(path, key_fieldname='round')
    for key in range(1, 6):
      asyncio.run(manager.release(collections.OrderedDict(loss=float(key)), key=key))
    run_directory.truncate_metrics(output_dir, last_round=3)
    resumed = run_directory.MetricsReleaseManager(path, key_fieldname='round')
    asyncio.run(resumed.release(collections.OrderedDict(loss=9.0), key=4))
    with open(path) as f:
      self.assertEqual(f.read().splitlines(), ['round,loss', '1,1.0', '2,2.0', '3,3.0', '4,9.0'])

class TensorBoardTest(absltest.TestCase):

  def _events(self, manager, directory: str) -> list[tuple]:
    """(step, tag, value, serialized metadata) of every summary written to `directory`, sorted."""
    manager._summary_writer.flush()  # pylint: disable=protected-access
    events = []
    for name in os.listdir(directory):
      for event in tf.compat.v1.train.summary_iterator(os.path.join(directory, name)):
        for value in event.summary.value:
          events.append((event.step, value.tag, tf.make_ndarray(value.tensor).tolist(),
                         value.metadata.SerializeToString()))
    return sorted(events, key=repr)

  def test_release_writes_the_events_tffs_manager_writes(self):
    # TFF's own manager is the reference: floats, numpy numbers, ints and booleans as scalars, an array as a
    # histogram, a string left out, nested groups as tags, two steps.
    releases = [({'train': {'loss': 0.5, 'accuracy': np.float32(0.25)}, 'run': {'clients': 10, 'flag': True},
                  'method': {'histogram': np.arange(6, dtype=np.float32), 'name': 'text'}}, 1),
                ({'train': {'loss': 0.125}, 'test': {'accuracy': np.float64(0.75)}}, 2)]
    events = {}
    for name, manager_class in (('tff', tff.program.TensorBoardReleaseManager),
                                ('suite', run_directory.TensorBoardReleaseManager)):
      directory = self.create_tempdir().full_path
      manager = manager_class(directory)
      for value, key in releases:
        asyncio.run(manager.release(value, key=key))
      events[name] = self._events(manager, directory)
    self.assertLen(events['tff'], 7)
    self.assertEqual(events['suite'], events['tff'])

  def test_releases_keep_no_memory_per_scalar(self):
    # Python's allocated blocks after releases of 400 scalars: TF 2.14 on Python 3.11 keeps 16 bytes of every eager
    # tensor, so TFF's manager (the control) keeps thousands of blocks per release; the suite's a handful, traced
    # once. The rows' keys change between releases, as a run's do on evaluation rounds.
    def rows(count):
      return [({'routing': {f'count_{index}': float(index + key) for index in range(400 + key % 2)}}, key)
              for key in range(1, count + 1)]

    kept = {}
    for name, manager_class in (('tff', tff.program.TensorBoardReleaseManager),
                                ('suite', run_directory.TensorBoardReleaseManager)):
      manager = manager_class(self.create_tempdir().full_path)
      for value, key in rows(3):  # Tracing and first-use allocations.
        asyncio.run(manager.release(value, key=key))
      gc.collect()
      before = sys.getallocatedblocks()
      for value, key in rows(10):
        asyncio.run(manager.release(value, key=key + 3))
      gc.collect()
      kept[name] = (sys.getallocatedblocks() - before) / 10
    self.assertGreater(kept['tff'], 1000, kept)
    self.assertLess(kept['suite'], 50, kept)


class CheckpointsTest(absltest.TestCase):

  def _state(self, value):
    return collections.OrderedDict(weights=[np.full([3], value, np.float32)], round_num=np.int64(value))

  def test_saves_atomically_keeps_three_and_loads_the_newest(self):
    output_dir = self.create_tempdir().full_path
    checkpoints = run_directory.Checkpoints(output_dir)
    # What a save killed half-way leaves: a partial directory under .staging, never seen as a checkpoint.
    os.makedirs(os.path.join(output_dir, run_directory.CHECKPOINTS, '.staging', 'program_state_99'))
    for round_num in (2, 4, 6, 8):
      checkpoints.save(self._state(round_num), round_num)
    self.assertEqual(checkpoints.rounds(), [4, 6, 8])
    state, round_num, unloadable = run_directory.Checkpoints(output_dir).load_latest(self._state(0))
    self.assertEqual((round_num, unloadable), (8, ()))
    np.testing.assert_array_equal(state['weights'][0], np.full([3], 8.0))

  def test_leaves_no_event_loop_open(self):
    # An open loop prints a ResourceWarning whenever the collector gets to it: once inside the one-line error of a
    # later run in the same process.
    before = _open_event_loops()
    checkpoints = run_directory.Checkpoints(self.create_tempdir().full_path)
    checkpoints.save(self._state(1), 1)
    checkpoints.load_latest(self._state(0))
    self.assertEqual(_open_event_loops() - before, set())

  def test_no_checkpoint_is_a_fresh_start(self):
    state, round_num, _ = run_directory.Checkpoints(self.create_tempdir().full_path).load_latest(self._state(0))
    self.assertIsNone(state)
    self.assertEqual(round_num, 0)

  def test_a_checkpoint_of_another_structure_is_an_error_not_a_fresh_start(self):
    output_dir = self.create_tempdir().full_path
    run_directory.Checkpoints(output_dir).save(self._state(8), 8)
    other = collections.OrderedDict(mixture=np.zeros([2], np.float32))
    with self.assertRaisesRegex(run_directory.RunDirectoryError, 'no checkpoint .* loads .*round 8'):
      run_directory.Checkpoints(output_dir).load_latest(other)

  def _damaged_newest(self, damage):
    output_dir = self.create_tempdir().full_path
    checkpoints = run_directory.Checkpoints(output_dir)
    for round_num in (4, 6, 8):
      checkpoints.save(self._state(round_num), round_num)
    index = os.path.join(checkpoints.path(8), 'variables', 'variables.index')
    with open(index, 'r+b') as f:
      damage(f)
    return output_dir

  def test_a_damaged_newest_checkpoint_falls_back_to_the_newest_that_loads(self):
    truncate = lambda f: f.truncate(7)
    garble = lambda f: f.write(b'\xff' * 64)
    for damage in (truncate, garble):
      output_dir = self._damaged_newest(damage)
      checkpoints = run_directory.Checkpoints(output_dir)
      state, round_num, unloadable = checkpoints.load_latest(self._state(0))
      self.assertEqual(round_num, 6)
      np.testing.assert_array_equal(state['weights'][0], np.full([3], 6.0))
      self.assertEqual([r for r, _ in unloadable], [8])
      # Moved aside: out of the saved rounds, so the next save and resume do not meet it again.
      self.assertEqual(checkpoints.rounds(), [4, 6])
      self.assertTrue(os.path.isdir(os.path.join(output_dir, run_directory.CHECKPOINTS, 'unloadable',
                                                 'program_state_8')))
      checkpoints.save(self._state(7), 7)
      self.assertEqual(run_directory.Checkpoints(output_dir).load_latest(self._state(0))[1:], (7, ()))

  def test_when_no_checkpoint_loads_the_run_is_refused_and_nothing_moves(self):
    output_dir = self.create_tempdir().full_path
    checkpoints = run_directory.Checkpoints(output_dir)
    for round_num in (4, 6):
      checkpoints.save(self._state(round_num), round_num)
      with open(os.path.join(checkpoints.path(round_num), 'variables', 'variables.index'), 'r+b') as f:
        f.truncate(3)
    with self.assertRaisesRegex(run_directory.RunDirectoryError, 'no checkpoint .* loads .*round 6'):
      checkpoints.load_latest(self._state(0))
    self.assertEqual(checkpoints.rounds(), [4, 6])


if __name__ == '__main__':
  execution_context.install()
  absltest.main()
