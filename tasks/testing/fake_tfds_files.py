"""Writes small datasets in tensorflow-datasets' prepared layout, for tests (see `tasks.tfds_files`).

The files are written by TFDS itself, through a builder that subclasses the real one (same name, version and
features, hence the same `dataset_info.json`, `features.json` and TFRecord shards) and takes its examples from
arrays instead of the network.
"""

import numpy as np
import tensorflow_datasets as tfds

_BUILDERS = {
    'mnist': tfds.image_classification.MNIST,
    'fashion_mnist': tfds.image_classification.FashionMNIST,
    'cifar10': tfds.image_classification.Cifar10,
}


def write(name: str, data_dir: str, splits: dict[str, tuple[np.ndarray, np.ndarray]]) -> None:
  """Prepares dataset `name` in `data_dir` with split -> (images [N, H, W, C] uint8, labels [N])."""

  class Fake(_BUILDERS[name], skip_registration=True):  # pylint: disable=missing-class-docstring

    def _split_generators(self, dl_manager):
      del dl_manager  # Unused: nothing is downloaded.
      return {split: self._examples(split, *arrays) for split, arrays in splits.items()}

    def _examples(self, split, images, labels):
      for i, (image, label) in enumerate(zip(images, labels)):
        example = {'image': image, 'label': int(label)}
        if name == 'cifar10':
          example['id'] = f'{split}_{i:05d}'
        yield i, example

  Fake.name = name
  tfds.disable_progress_bar()
  Fake(data_dir=data_dir).download_and_prepare(
      download_config=tfds.download.DownloadConfig(try_download_gcs=False))


def random_images(shape, num_examples: int, num_classes: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
  """(images [N, *shape] uint8, labels [N] int64) drawn uniformly."""
  rng = np.random.default_rng(seed)
  return (rng.integers(0, 256, size=(num_examples, *shape), dtype=np.uint8),
          rng.integers(0, num_classes, size=num_examples).astype(np.int64))
