"""Readable labels and units of the report's columns (the metrics.csv and summary.json names stay the CSV's keys).

A column is a *share* (an accuracy, rate or drop in accuracy: a fraction, or percent with `--percent`), an *index*
(ARI, a correlation: no unit, never scaled), a count of *rounds* or a privacy *epsilon*. The label names the
averaging window: the last evaluation, the mean over the last period, or the mean over a run's windows.
"""

import re

SHARE, INDEX, ROUNDS, EPSILON = 'share', 'index', 'rounds', 'epsilon'

_LABELS = {
    'test_accuracy_last_period_mean': ('test accuracy, mean over the last period', SHARE),
    'test_accuracy': ('test accuracy, last evaluation', SHARE),
    'train_accuracy': ('training accuracy, last round', SHARE),
    'train_accuracy_last_10_rounds_mean': ('training accuracy, mean over the last 10 rounds', SHARE),
    'test_mixture_accuracy': ('accuracy on the round\'s domain mixture, last evaluation', SHARE),
    'personalized_accuracy': ('personalized accuracy on clients\' own test splits', SHARE),
    'personalized_server_accuracy': ('global model on clients\' own test splits', SHARE),
    'unseen_accuracy': ('accuracy on unseen clients', SHARE),
    'target_accuracy': ('target accuracy, client view', SHARE),
    'target_server_accuracy': ('target accuracy, server view (global model)', SHARE),
    'routing_accuracy': ('test routing accuracy', SHARE),
    'routing_accuracy_matched': ('test routing accuracy, modes matched to branches at each evaluation', SHARE),
    'routing_accuracy_run_matched': ('test routing accuracy, modes matched to branches over the run', SHARE),
    'test_mixture_accuracy_mean': ('mixture accuracy, mean over evaluations', SHARE),
    'test_mixture_accuracy_std_last_cycles': ('mixture accuracy, std over the last two cycles', SHARE),
    'balanced_mix_accuracy': ('accuracy on an equal mix of the bases, last evaluation', SHARE),
    'share_correlation': ('correlation of the learned share with the imposed one', INDEX),
    'share_correlation_floor': ('that correlation\'s noise floor', INDEX),
    'routing_ari': ('test routing ARI', INDEX),
    'routing_ari_last_period_mean': ('test routing ARI, mean over the last period', INDEX),
    'train_routing_accuracy_run_matched': ('training routing accuracy, modes matched to branches over the run',
                                           SHARE),
    'novelty_auroc': ('novelty detection AUROC', SHARE),
    'novelty_average_precision': ('novelty detection average precision', SHARE),
    'novelty_max_f1': ('novelty detection max F1', SHARE),
    'window_drop': ('accuracy drop at a shift, mean over windows', SHARE),
    'window_recovery_rounds': ('rounds to 95% recovery, mean over windows', ROUNDS),
    'window_max_accuracy': ('max accuracy in a window, mean over windows', SHARE),
    'regime_ari': ('ARI of the assignment against the true regimes', INDEX),
    'detection_rate': ('shift detection rate', SHARE),
    'false_alarm_rate': ('false alarm rate', SHARE),
    'forgetting': ('forgetting of recurring concepts', SHARE),
    'dp_epsilon': ('privacy epsilon at delta 1e-5', EPSILON),
}
_WINDOW_FIELDS = {'drop': ('accuracy drop at the shift', SHARE), 'recovery_rounds': ('rounds to 95% recovery', ROUNDS),
                  'max_accuracy': ('max accuracy', SHARE)}


def _describe(column: str) -> tuple[str, str]:
  """(label without unit, kind) of `column`."""
  if column in _LABELS:
    return _LABELS[column]
  mixed = re.fullmatch(r'mixed_q([\d.]+)_accuracy(_last_period_mean)?', column)
  if mixed:
    window = 'mean over the last period' if mixed.group(2) else 'last evaluation'
    return f'batches of both modes, share {mixed.group(1)} of mode 1 (day), {window}', SHARE
  window = re.fullmatch(r'window_(\d+)_(drop|recovery_rounds|max_accuracy)', column)
  if window:
    label, kind = _WINDOW_FIELDS[window.group(2)]
    return f'window {window.group(1)}: {label}', kind
  domain = re.fullmatch(r'test_(.+)_accuracy', column)
  if domain:
    return f'accuracy on {domain.group(1)}, last evaluation', SHARE
  return column.replace('_', ' '), SHARE if column.endswith(('accuracy', 'rate', 'drop')) else INDEX


def window_field_label(field: str, percent: bool) -> str:
  """The label of a per-window measure (`drop`, `recovery_rounds`, `max_accuracy`) with its unit."""
  return label(f'window_1_{field}', percent).split(': ', 1)[1]


def curve_label(column: str) -> str:
  """`column`'s label over rounds: without its averaging window (every evaluation is drawn)."""
  return _describe(column)[0].split(', last evaluation')[0]


def is_share(column: str) -> bool:
  """Whether `column` is a share, which `--percent` shows in percent."""
  return _describe(column)[1] == SHARE


def label(column: str, percent: bool) -> str:
  """`column`'s header: its label and unit, e.g. 'test accuracy, mean over the last period (%)'."""
  text, kind = _describe(column)
  unit = {SHARE: '%' if percent else 'fraction', ROUNDS: 'rounds'}.get(kind)
  return f'{text} ({unit})' if unit else text
