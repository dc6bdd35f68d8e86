"""Datasets prepared by `tensorflow-datasets`, read offline from `--tfds_data_dir`.

TFDS's prepared layout (what `tfds build <name> --data_dir=D` or `tfds.builder(name).download_and_prepare()` writes
on a machine with network): `D/<name>/<version>/` with `dataset_info.json`, `features.json` and TFRecord shards
`<name>-<split>.tfrecord-NNNNN-of-MMMMM`. `load` reads a split through `tfds.builder(name, data_dir=D)` and never
downloads; a dataset that is not prepared there stops the run with one line naming the directory and the flag.
Used for MNIST and Fashion-MNIST (seeds 000, 001, 004) and as an alternative source of CIFAR-10.
"""

import os
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


def load(name: str, data_dir: Optional[str], task_name: str) -> dict[str, tuple[np.ndarray, np.ndarray]]:
  """split -> (images [N, H, W, C] uint8, labels [N] int64) of every split of prepared dataset `name`."""
  builder = require(name, data_dir, task_name)
  arrays = {}
  for split in builder.info.splits:
    data = tfds.as_numpy(builder.as_dataset(split=split, batch_size=-1, shuffle_files=False))
    arrays[split] = (np.asarray(data['image'], np.uint8), np.asarray(data['label'], np.int64))
  return arrays
