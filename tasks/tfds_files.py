"""Datasets prepared by `tensorflow-datasets`, read offline from `--tfds_data_dir`.

TFDS's prepared layout (what `tfds build <name> --data_dir=D` or `tfds.builder(name).download_and_prepare()` writes
on a machine with network): `D/<name>/<version>/` with `dataset_info.json`, `features.json` and TFRecord shards
`<name>-<split>.tfrecord-NNNNN-of-MMMMM`. `load` reads a split through `tfds.builder(name, data_dir=D)` and never
downloads; a dataset that is not prepared there stops the run with one line naming the directory and the flag.
Used for MNIST and Fashion-MNIST (seeds 000, 001, 004) and as an alternative source of CIFAR-10.
"""

import os
import re
from typing import Optional

import numpy as np
import tensorflow as tf
import tensorflow_datasets as tfds

TFDS_DATA_DIR_FLAG = '--tfds_data_dir'


def require(name: str, data_dir: Optional[str], task_name: str) -> tfds.core.DatasetBuilder:
  """The builder of prepared dataset `name` in `data_dir`; FileNotFoundError with a one-line message otherwise."""
  if not data_dir:
    raise FileNotFoundError(f'task {task_name} reads {name} with tensorflow-datasets from a prepared directory: set '
                            f'{TFDS_DATA_DIR_FLAG} (this machine cannot download it).')
  builder = tfds.builder(name, data_dir=data_dir)
  if not tf.io.gfile.exists(os.path.join(builder.data_dir, 'dataset_info.json')):
    raise FileNotFoundError(f'task {task_name} needs {name} prepared by tensorflow-datasets in {builder.data_dir}, '
                            f'which does not exist; run `tfds build {name} --data_dir=DIR` where there is network, '
                            f'copy DIR here and set {TFDS_DATA_DIR_FLAG}=DIR.')
  return builder


class DamagedFileError(ValueError):
  """A prepared dataset whose files cannot be read; the message is one line naming the directory."""


def load(name: str, data_dir: Optional[str], task_name: str) -> dict[str, tuple[np.ndarray, np.ndarray]]:
  """split -> (images [N, H, W, C] uint8, labels [N] int64) of every split of prepared dataset `name`; a missing
  dataset is FileNotFoundError and files that do not read (a corrupt or truncated record file, a damaged
  dataset_info.json) DamagedFileError, each one line."""
  builder = require(name, data_dir, task_name)
  arrays = {}
  try:
    for split in builder.info.splits:
      data = tfds.as_numpy(builder.as_dataset(split=split, batch_size=-1, shuffle_files=False))
      arrays[split] = (np.asarray(data['image'], np.uint8), np.asarray(data['label'], np.int64))
  except (tf.errors.OpError, ValueError, KeyError, OSError) as error:
    reason = getattr(error, 'message', None) or str(error) or type(error).__name__
    reason = re.sub(r'\{\{[^}]*\}\}\s*', '', reason).splitlines()[0][:200]  # Without TF's function-node prefix.
    raise DamagedFileError(f'task {task_name} cannot read {name} prepared by tensorflow-datasets in '
                           f'{builder.data_dir} ({reason}); prepare it again.') from None
  return arrays
