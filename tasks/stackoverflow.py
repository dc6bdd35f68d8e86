"""Stack Overflow next-word prediction with a question (day) mode and an answer (night) mode (Section 4).

Data, read offline from `--cache_dir`:
- TFF's Stack Overflow (`tff.simulation.datasets.stackoverflow.load_data(cache_dir)`, the file
  `<cache_dir>/stackoverflow.sqlite`, splits `train` and `test`); elements carry `tokens` (space-separated words)
  and `type` ('question' or 'answer').
- the vocabulary: the 10,000 most frequent words of TFF's word counts, `<cache_dir>/datasets/
  stackoverflow.word_count` (what `stackoverflow.load_word_counts(cache_dir)` extracts from
  `stackoverflow.word_count.tar.bz2`; if only the archive is there, TFF's loader extracts it).

Populations: the same users, split by example type: day = each user's questions, night = each user's answers; a
user with none of a type is not a client of that mode. Counting them needs one scan of the training split's
`type` features (`tff_files.mode_counts`, cached next to the file after the first run: the full file has 135M
examples, so the first run spends minutes there).

Test set (documented choice): the whole test split has 16M examples, too many to evaluate every few rounds on a
CPU. The per-mode test sets are the first `TEST_EXAMPLES_PER_MODE` = 10,000 questions and 10,000 answers of the
test split in TFF's client order (held in memory).

Preprocessing (TFF's word-prediction baseline and the public code): ids 0 = padding, 1..V = the vocabulary,
V + 1 = out of vocabulary, V + 2 = beginning, V + 3 = end of sentence (V_ext = V + 4 = 10,004). A sentence is split
on spaces and truncated to L = 20 words, then [BOS] + words + [EOS], truncated to L + 1 and padded; x = the first L
ids, y = the next L. The loss ignores padding; the accuracy also ignores the special tokens (out of vocabulary,
beginning, end), as the paper reports it. At most 512 training examples per client and round (Table 2:
`max_elements_per_client` defaults to 512).
"""

import collections
import os

import tensorflow as tf
import tensorflow_federated as tff

from models import stackoverflow_lstm
from periodic_shift import scenarios
from tasks import task as task_lib
from tasks import tff_files
from utils import settings as settings_lib

FILENAME = 'stackoverflow.sqlite'
WORD_COUNT_FILE = os.path.join('datasets', 'stackoverflow.word_count')
WORD_COUNT_ARCHIVE = os.path.join('datasets', 'stackoverflow.word_count.tar.bz2')
VOCAB_SIZE = 10_000
SEQUENCE_LENGTH = 20
TEST_EXAMPLES_PER_MODE = 10_000
MODE_TYPES = ('question', 'answer')

OOV_ID = VOCAB_SIZE + 1
BOS_ID = VOCAB_SIZE + 2
EOS_ID = VOCAB_SIZE + 3
EXTENDED_VOCAB_SIZE = VOCAB_SIZE + 4

# Table 2; T = 256 as for most of the paper's results (Section 4).
DEFAULTS = {
    'server_learning_rate': 0.01,
    'server_adam_epsilon': 1e-5,
    'client_learning_rate': 10**-0.5,
    'clients_per_round': 50,
    'client_batch_size': 16,
    'total_rounds': 2048,
    'period': 256,
    'max_elements_per_client': 512,
}

NAME = 'stackoverflow'
_TEXT_ONLY = ('its inputs are word sequences and its modes questions and answers, for which the other scenarios\' '
              'transforms and mixtures are not defined')
RAW_INPUT_SPACE = False
READS_FILES = True
UNSUPPORTED = {name: _TEXT_ONLY for name in scenarios.SCENARIOS if name != 'periodic'}
Settings = settings_lib.NoSettings


def load_vocabulary(cache_dir: str) -> list[str]:
  """The VOCAB_SIZE most frequent words (the word-count file lists words by decreasing count)."""
  path = os.path.join(cache_dir, WORD_COUNT_FILE)
  if not os.path.exists(path):
    if os.path.exists(os.path.join(cache_dir, WORD_COUNT_ARCHIVE)):
      return list(tff.simulation.datasets.stackoverflow.load_word_counts(cache_dir, VOCAB_SIZE))
    tff_files.require(cache_dir, WORD_COUNT_FILE, 'stackoverflow')
  words = []
  with open(path) as f:
    for line in f:
      words.append(line.split()[0])
      if len(words) == VOCAB_SIZE:
        break
  return words


def _type_mode(serialized: tf.Tensor) -> tf.Tensor:
  """0 for a question, 1 for an answer, from serialized examples [N]."""
  types = tf.io.parse_example(serialized, {'type': tf.io.FixedLenFeature((), tf.string)})['type']
  return tf.cast(tf.equal(types, MODE_TYPES[1]), tf.int64)


def _mode_filter(mode: int):
  return lambda dataset: dataset.filter(lambda element: tf.equal(element['type'], MODE_TYPES[mode]))


def build_batch_fn(vocabulary: list[str]):
  """batch_fn: raw batches with `tokens` [B] -> x, y [B, L] int64 with per-token loss and accuracy masks."""
  vocabulary = list(vocabulary)  # Made a tensor in each graph that uses it (TFF's, the evaluation's).

  def batch_fn(batch: collections.OrderedDict) -> collections.OrderedDict:
    words_in_order = tf.constant(vocabulary)
    table = tf.lookup.StaticVocabularyTable(tf.lookup.KeyValueTensorInitializer(
        words_in_order, tf.range(tf.size(words_in_order, out_type=tf.int64))), 1)
    words = tf.strings.split(batch['tokens'])[:, :SEQUENCE_LENGTH]
    ids = tf.ragged.map_flat_values(table.lookup, words) + 1  # Words 1..V, out of vocabulary V + 1.
    ends = tf.ones_like(ids[:, :1])
    sequence = tf.concat([ends * BOS_ID, ids, ends * EOS_ID], axis=1)[:, :SEQUENCE_LENGTH + 1]
    sequence = sequence.to_tensor(0, shape=[None, SEQUENCE_LENGTH + 1])
    x, y = sequence[:, :-1], sequence[:, 1:]
    loss_mask = tf.not_equal(y, 0)
    accuracy_mask = loss_mask & (y < OOV_ID)  # Ids above V are the special tokens.
    return collections.OrderedDict(x=x, y=y, loss_mask=tf.cast(loss_mask, tf.float32),
                                   accuracy_mask=tf.cast(accuracy_mask, tf.float32))

  return batch_fn


def create_model(num_branches: int) -> tf.keras.Model:
  return stackoverflow_lstm.create_model(num_branches, EXTENDED_VOCAB_SIZE, SEQUENCE_LENGTH)


def create_task(cache_dir: str, seed: int = 0) -> task_lib.Task:
  """The Stack Overflow task (`seed` is unused: the populations are the users)."""
  del seed  # The populations are fixed by the file.
  cache_dir = cache_dir or tff_files.default_cache_dir()
  path = tff_files.require_database(cache_dir, FILENAME, 'stackoverflow')
  vocabulary = load_vocabulary(cache_dir)
  train, _, test = tff.simulation.datasets.stackoverflow.load_data(cache_dir=cache_dir)
  counts = tff_files.mode_counts(path, 'train', _type_mode, 2, cache_key='question_vs_answer')
  all_test = test.create_tf_dataset_from_all_clients()
  train_data, client_sizes, test_data, test_sizes = [], [], [], []
  for mode in range(2):
    train_data.append(tff_files.traced_client_data(train.preprocess(_mode_filter(mode))))
    client_sizes.append({client: c[mode] for client, c in counts.items() if c[mode] > 0})
    mode_test = _mode_filter(mode)(all_test).take(TEST_EXAMPLES_PER_MODE).cache()
    test_data.append(mode_test)
    test_sizes.append(int(mode_test.reduce(0, lambda count, _: count + 1)))  # Also fills the cache.
  return task_lib.Task(name='stackoverflow', train_data=train_data, client_sizes=client_sizes, test_data=test_data,
                       test_sizes=test_sizes, batch_fn=build_batch_fn(vocabulary), model_fn=create_model,
                       num_classes=EXTENDED_VOCAB_SIZE)


def create(settings: Settings, files: task_lib.DataFiles, seed: int) -> task_lib.Task:
  """The task for `--task=stackoverflow` (the contract: `tasks.task`)."""
  del settings  # It has none.
  return create_task(files.cache_dir, seed)
