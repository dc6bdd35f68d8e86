"""Fashion-MNIST (Xiao, Rasul and Vollgraf, 2017, "Fashion-MNIST: a Novel Image Dataset for Benchmarking Machine
Learning Algorithms") as Debian's `dataset-fashion-mnist` installs it: the four gzipped IDX files of its 60,000
training and 10,000 test images (28 x 28, uint8) and their labels (0-9) under `/usr/share/datasets/fashion-mnist/`,
or in the directory `--fashion_mnist_dir` names. `tools/bootstrap.sh` installs the package.

An IDX file is a big-endian header (two zero bytes, the element type 0x08 = unsigned byte, the number of dimensions)
followed by one uint32 per dimension and the elements in row-major order. `load` checks every header against
the file it is (dimensions, count, image size), the data's length against the header, and the labels' range, so a
missing file is a FileNotFoundError and a damaged one (truncated, not gzip, another layout) a DamagedFileError,
each one line naming the file and how to get a good one.
"""

import functools
import gzip
import os
import zlib
from typing import Optional

import numpy as np

DEBIAN_DIR = '/usr/share/datasets/fashion-mnist'
PACKAGE = 'dataset-fashion-mnist'
DIR_FLAG = '--fashion_mnist_dir'
IMAGE_SHAPE = (28, 28)
NUM_CLASSES = 10
# split -> (images file, labels file). Debian's hold 60,000 and 10,000 examples; a validation split written in the
# same layout (benchmarks/validation_files.py) holds fewer.
FILES = {'train': ('train-images-idx3-ubyte.gz', 'train-labels-idx1-ubyte.gz'),
         'test': ('t10k-images-idx3-ubyte.gz', 't10k-labels-idx1-ubyte.gz')}
_UNSIGNED_BYTE = 0x08


class DamagedFileError(ValueError):
  """An IDX file that does not read as the Fashion-MNIST file it is named for; the message is one line."""


def _damaged(path: str, why: str) -> DamagedFileError:
  return DamagedFileError(f'Fashion-MNIST file {path} is damaged ({why}); reinstall it with `apt-get install '
                          f'--reinstall {PACKAGE}` or set {DIR_FLAG} to a directory of good copies.')


def read_idx(path: str, shape: tuple[Optional[int], ...]) -> np.ndarray:
  """The uint8 array of gzipped IDX file `path`, which must have `shape` (None: any size in that dimension);
  DamagedFileError otherwise."""
  try:
    with gzip.open(path, 'rb') as f:
      data = f.read()
  except (OSError, EOFError, zlib.error) as error:
    raise _damaged(path, f'{type(error).__name__}: {str(error).splitlines()[0] if str(error) else "unreadable"}'
                   ) from None
  header = 4 + 4 * len(shape)
  if len(data) < 4 or data[:3] != bytes([0, 0, _UNSIGNED_BYTE]) or data[3] != len(shape):
    raise _damaged(path, f'not an IDX file of unsigned bytes in {len(shape)} dimensions')
  found = tuple(int(size) for size in np.frombuffer(data, '>u4', count=len(shape), offset=4)) if (
      len(data) >= header) else ()
  if len(found) != len(shape) or any(size is not None and size != seen for size, seen in zip(shape, found)):
    raise _damaged(path, f'its header says shape {found}, not {tuple("n" if size is None else size for size in shape)}')
  if len(data) != header + int(np.prod(found)):
    raise _damaged(path, f'{len(data) - header} bytes of data, not {int(np.prod(found))}')
  return np.frombuffer(data, np.uint8, offset=header).reshape(found)


def directory_of(directory: Optional[str]) -> str:
  return directory or DEBIAN_DIR


@functools.lru_cache(maxsize=2)
def load(directory: Optional[str] = None) -> dict[str, tuple[np.ndarray, np.ndarray]]:
  """split ('train', 'test') -> (images [N, 28, 28] uint8, labels [N] int64), read from `directory` (default:
  Debian's); FileNotFoundError (one line) for a missing file, DamagedFileError for a damaged one."""
  directory = directory_of(directory)
  splits = {}
  for split, (images_file, labels_file) in FILES.items():
    paths = [os.path.join(directory, name) for name in (images_file, labels_file)]
    for path in paths:
      if not os.path.isfile(path):
        raise FileNotFoundError(f'Fashion-MNIST file {path} is missing: install Debian\'s {PACKAGE} (`apt-get install '
                                f'{PACKAGE}`, which `bash tools/bootstrap.sh` runs) or set {DIR_FLAG} to a directory '
                                'holding its four IDX files.')
    images = read_idx(paths[0], (None, *IMAGE_SHAPE))
    labels = read_idx(paths[1], (len(images),))
    if labels.max() >= NUM_CLASSES:
      raise _damaged(paths[1], f'label {labels.max()} outside 0-{NUM_CLASSES - 1}')
    labels = labels.astype(np.int64)
    labels.setflags(write=False)  # Shared by every caller of the cache, as the images are.
    splits[split] = (images, labels)
  return splits
