"""Summaries of a measure over seeds, for the tables of the tools and the report."""

import numpy as np


def mean_error_cell(values: list, scale: float = 1.0, digits: int = 3) -> str:
  """'mean +- standard error' of `values` times `scale` (the value alone for one, '' for none)."""
  if not values:
    return ''
  values = scale * np.asarray(values, float)
  if len(values) == 1:
    return f'{values[0]:.{digits}f}'
  return f'{np.mean(values):.{digits}f} +- {np.std(values, ddof=1) / np.sqrt(len(values)):.{digits}f}'
