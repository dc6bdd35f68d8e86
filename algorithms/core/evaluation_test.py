"""Tests centralized evaluation against numpy: per-domain and union test sets, and clients' held-out data."""

import collections
import gc

import numpy as np
import tensorflow as tf
import tensorflow_federated as tff
from tensorflow.python.eager import context

from algorithms.core import evaluation
from algorithms.core import objectives
from tasks import gaussian_mixture
from tests import softmax_regression_reference as reference


def _batches(x, y, mode, batch_size, client=0):
  return tf.data.Dataset.from_tensor_slices(collections.OrderedDict(
      x=x, y=y, mode=np.full(len(y), mode, np.int32), client=np.full(len(y), client, np.int32))).batch(batch_size)


def _numpy_client_em(log_terms, clients, num_clients, steps):
  """EM for each client's mixture weights alone, written from the FedGMM paper's (E) and (M), one client at a time."""
  fitted = np.full((num_clients, log_terms.shape[1]), 1.0 / log_terms.shape[1])
  for c in range(num_clients):
    terms = log_terms[clients == c]
    for _ in range(steps if len(terms) else 0):
      joint = np.log(fitted[c]) + terms
      q = np.exp(joint - joint.max(axis=1, keepdims=True))
      fitted[c] = (q / q.sum(axis=1, keepdims=True)).mean(axis=0)
  return np.log(fitted)


class EvaluatorTest(tf.test.TestCase):

  def test_accuracies_match_numpy(self):
    for inference_groups in (1, 3):
      with self.subTest(inference_groups=inference_groups):
        self._check_accuracies_match_numpy(inference_groups)

  def _check_accuracies_match_numpy(self, inference_groups):
    rng = np.random.default_rng(0)
    model = gaussian_mixture.create_model(dim=3, num_branches=2)
    weights = [rng.normal(size=w.shape).astype(np.float32) for w in model.get_weights()]
    model.set_weights(weights)
    kernels, biases = weights[0::2], weights[1::2]

    def predictions(x):  # Vanilla's objective averages the branches' logits.
      return np.mean([x @ k + b for k, b in zip(kernels, biases)], axis=0).argmax(axis=-1)

    data = [(rng.normal(size=(n, 3)).astype(np.float32), rng.integers(0, 2, n).astype(np.int32)) for n in (37, 50)]
    clients = [(rng.normal(size=(n, 3)).astype(np.float32), rng.integers(0, 2, n).astype(np.int32))
               for n in (5, 11, 2)]
    held_out = _batches(*clients[0], 0, 4)
    for index, client in enumerate(clients[1:]):
      held_out = held_out.concatenate(_batches(*client, 0, 4, index + 1))
    evaluator = evaluation.Evaluator(
        gaussian_mixture.create_model(dim=3, num_branches=2),
        {'a': _batches(*data[0], 0, 8), 'b': _batches(*data[1], 1, 8)},
        {'personalized': evaluation.HeldOutData(held_out, held_out, 3)},
        mixed_datasets={evaluation.mixed_name(0.25): _batches(data[1][0][:20], data[1][1][:20], 0, 8)},
        inference_groups=inference_groups)
    metrics = evaluator.evaluate(tff.learning.models.ModelWeights.from_model(model),
                                 objectives.averaged_branches)
    correct = [np.sum(predictions(x) == y) for x, y in data]
    self.assertAllClose(metrics['test_a_accuracy'], correct[0] / 37)
    self.assertAllClose(metrics['test_b_accuracy'], correct[1] / 50)
    self.assertAllClose(metrics['test_accuracy'], sum(correct) / 87)  # The union, not the mean of the two.
    x, y = data[1]  # Mixed batches are scored apart, never pooled into the union above.
    self.assertAllClose(metrics['mixed_q0.25_accuracy'], np.mean(predictions(x[:20]) == y[:20]))
    client_correct = sum(np.sum(predictions(x) == y) for x, y in clients)
    self.assertAllClose(metrics['personalized_accuracy'], client_correct / 18)  # Example-weighted over clients.

  def test_larger_inference_batches_keep_the_test_batches_objectives_see(self):
    # An objective whose loss sum is its batch's size squared and a per-example value of its batch's size: both
    # tell which examples the objective saw together.
    def batch_size_objective(outputs, batch):
      size = tf.cast(tf.shape(batch['y'])[0], tf.float32)
      del outputs  # Unused.
      return objectives.BatchResult(loss=size, loss_sum=size * size, num_correct=tf.constant(0.0),
                                    num_examples=size, num_predictions=size)

    rng = np.random.default_rng(1)
    x, y = rng.normal(size=(37, 3)).astype(np.float32), rng.integers(0, 2, 37).astype(np.int32)
    clients = [(rng.normal(size=(n, 3)).astype(np.float32), rng.integers(0, 2, n).astype(np.int32)) for n in (5, 2)]
    held_out = _batches(*clients[0], 0, 4).concatenate(_batches(*clients[1], 0, 4, 1))  # Batches of 4, 1 and 2.
    model = gaussian_mixture.create_model(dim=3, num_branches=2)
    weights = tff.learning.models.ModelWeights.from_model(model)
    for inference_groups in (1, 2, 4, 10):
      with self.subTest(inference_groups=inference_groups):
        evaluator = evaluation.Evaluator(model, {'a': _batches(x, y, 0, 8)},
                                         {'personalized': evaluation.HeldOutData(held_out, held_out, 2)},
                                         inference_groups=inference_groups)
        metrics = evaluator.evaluate(weights, batch_size_objective)
        self.assertAllClose(metrics['test_loss'], (4 * 8**2 + 5**2) / 37)  # Batches of 8, 8, 8, 8 and 5.
        self.assertAllClose(metrics['personalized_loss'], (4**2 + 1**2 + 2**2) / 7)
        sizes, clients_seen = evaluator.collect_personalization(
            weights, 'personalized', lambda outputs, batch: (tf.fill(tf.shape(batch['y']), tf.shape(batch['y'])[0]),),
            (tf.int32,))
        self.assertAllEqual(sizes, [4] * 4 + [1] + [2] * 2)
        self.assertAllEqual(clients_seen, [0] * 5 + [1] * 2)

  def test_client_weights_match_numpy_em(self):
    rng = np.random.default_rng(1)
    log_terms = rng.normal(0.0, 2.0, size=(60, 4)).astype(np.float32)
    clients = rng.integers(0, 5, 60).astype(np.int32)
    clients[clients == 3] = 4  # Client 3 has no examples: it keeps uniform weights.
    fitted = evaluation.fit_client_log_weights(tf.constant(log_terms), tf.constant(clients), 5, steps=7)
    self.assertAllClose(fitted, _numpy_client_em(log_terms, clients, 5, 7), atol=1e-5)
    self.assertAllClose(fitted[3], np.log(np.full(4, 0.25)))

  def test_personalized_objective_gets_each_clients_fitted_weights(self):
    # Two "branches" whose log-likelihood terms are x[:, 0] and x[:, 1]; the objective predicts class 1 where the
    # example's client favours branch 1: the accuracy shows which rows it was handed.
    rng = np.random.default_rng(2)
    x = rng.normal(size=(30, 3)).astype(np.float32)
    x[:15, 0] += 3.0  # Client 0's personalization data favour entry 0, client 1's entry 1.
    x[15:, 1] += 3.0
    own = _batches(x[:15], np.zeros(15, np.int32), 0, 4, 0).concatenate(
        _batches(x[15:], np.zeros(15, np.int32), 0, 4, 1))
    test = _batches(x[:6], np.zeros(6, np.int32), 0, 4, 0).concatenate(
        _batches(x[:4], np.ones(4, np.int32), 0, 4, 1))
    evaluator = evaluation.Evaluator(gaussian_mixture.create_model(dim=3, num_branches=2), {},
                                     {'unseen': evaluation.HeldOutData(test, own, 2)})
    log_terms = lambda outputs, batch: batch['x'][:, :2]

    def objective(outputs, batch, client_log_weights=None):
      favoured = tf.argmax(tf.gather(client_log_weights, batch['client']), axis=-1)
      return objectives.classification_result(tf.one_hot(favoured, 2), batch)

    model = gaussian_mixture.create_model(dim=3, num_branches=2)
    metrics = evaluator.evaluate(tff.learning.models.ModelWeights.from_model(model), objective,
                                 personalization=evaluation.Personalization(log_terms, em_steps=5))
    self.assertAllClose(metrics['unseen_accuracy'], 1.0)

  def test_local_tuning_matches_numpy_sgd_client_by_client(self):
    # The FedGMM paper's FedAvg+ (tuning from the evaluated weights) and Local (from given initial weights): each client
    # trains on its own personalization batches for 2 epochs and is tested on its own test batches.
    rng = np.random.default_rng(3)
    model = gaussian_mixture.create_model(dim=3, num_branches=1)
    evaluated = [rng.normal(size=w.shape).astype(np.float32) for w in model.get_weights()]
    initial = [rng.normal(size=w.shape).astype(np.float32) for w in model.get_weights()]
    own = [(rng.normal(size=(n, 3)).astype(np.float32), rng.integers(0, 2, n).astype(np.int32)) for n in (7, 4)]
    tests = [(rng.normal(size=(n, 3)).astype(np.float32), rng.integers(0, 2, n).astype(np.int32)) for n in (9, 6)]
    client_data = lambda c: (_batches(*tests[c], 0, 4, c), _batches(*own[c], 0, 3, c))
    union = (np.concatenate([x for x, _ in tests]), np.concatenate([y for _, y in tests]))
    held_out = evaluation.HeldOutData(None, None, 2, client_data, ('c0', 'c1'))
    evaluator = evaluation.Evaluator(gaussian_mixture.create_model(dim=3, num_branches=1),
                                     {'a': _batches(*union, 0, 8)}, {'personalized': held_out})
    as_weights = lambda w: tff.learning.models.ModelWeights(trainable=w, non_trainable=[])
    tuning = evaluation.LocalTuning(objectives.averaged_branches, epochs=2, learning_rate=0.5)
    for start, client_weights in ((evaluated, None), (initial, lambda _: as_weights(initial))):
      metrics = evaluator.evaluate(as_weights(evaluated), objectives.averaged_branches, local_tuning=tuning,
                                   client_weights=client_weights)
      correct, loss = 0, 0.0
      for (x, y), test in zip(own, tests):
        batches = [(x[i:i + 3], y[i:i + 3]) for i in range(0, len(y), 3)] * 2
        z = reference.logits(reference.sgd(start, batches, learning_rate=0.5), test[0])
        correct += np.sum(z.argmax(axis=-1) == test[1])
        log_p = z - np.log(np.sum(np.exp(z), axis=1, keepdims=True))
        loss -= np.sum(log_p[np.arange(len(test[1])), test[1]])
      self.assertAllClose(metrics['personalized_accuracy'], correct / 15)
      self.assertAllClose(metrics['personalized_loss'], loss / 15, atol=1e-5)
      # The centralized test uses the evaluated weights.
      untuned = np.mean(reference.logits(evaluated, union[0]).argmax(axis=-1) == union[1])
      self.assertAllClose(metrics['test_accuracy'], untuned)

  def test_client_weights_test_each_client_on_its_own_model(self):
    # FedRep's client accuracy: client i (id 'c<i>') is tested with its own weights, looked up by id; the server
    # view tests every client with the evaluated weights.
    rng = np.random.default_rng(5)
    shapes = [w.shape for w in gaussian_mixture.create_model(dim=3, num_branches=1).get_weights()]
    own = {f'c{c}': [rng.normal(size=s).astype(np.float32) for s in shapes] for c in range(2)}
    evaluated = [rng.normal(size=s).astype(np.float32) for s in shapes]
    tests = [(rng.normal(size=(n, 3)).astype(np.float32), rng.integers(0, 2, n).astype(np.int32)) for n in (9, 6)]
    client_data = lambda c: (_batches(*tests[c], 0, 4, c), None)
    together = _batches(*tests[0], 0, 4, 0).concatenate(_batches(*tests[1], 0, 4, 1))
    evaluator = evaluation.Evaluator(gaussian_mixture.create_model(dim=3, num_branches=1), {},
                                     {'target': evaluation.HeldOutData(together, None, 2, client_data, ('c0', 'c1'))})
    as_weights = lambda w: tff.learning.models.ModelWeights(trainable=w, non_trainable=[])
    metrics = evaluator.evaluate_personal(as_weights(evaluated), objectives.averaged_branches,
                                          client_weights=lambda client_id: as_weights(own[client_id]))
    correct = lambda weights, x, y: np.sum(reference.logits(weights, x).argmax(axis=-1) == y)
    self.assertAllClose(metrics['target_accuracy'],
                        sum(correct(own[f'c{c}'], *tests[c]) for c in range(2)) / 15)
    self.assertAllClose(metrics['target_server_accuracy'], sum(correct(evaluated, *t) for t in tests) / 15)

  def test_repeated_evaluations_trace_nothing_new(self):
    # Every evaluation of a long run passes the same functions; a closure made anew per call would retrace and
    # leave its graph in the eager context for good (FedGMM's driver grew by 6 functions an evaluation).
    rng = np.random.default_rng(7)
    x = rng.normal(size=(12, 3)).astype(np.float32)
    y = rng.integers(0, 2, 12).astype(np.int32)
    own = _batches(x[:6], y[:6], 0, 4, 0).concatenate(_batches(x[6:], y[6:], 0, 4, 1))
    client_data = lambda c: (_batches(x[6 * c:6 * c + 6], y[6 * c:6 * c + 6], 0, 4, c),
                             _batches(x[6 * c:6 * c + 6], y[6 * c:6 * c + 6], 0, 3, c))
    held_out = evaluation.HeldOutData(own, own, 2, client_data, ('c0', 'c1'))
    model = gaussian_mixture.create_model(dim=3, num_branches=2)
    evaluator = evaluation.Evaluator(model, {'a': _batches(x, y, 0, 5)}, {'unseen': held_out},
                                     novelty_dataset=_batches(x[:5] + 4.0, y[:5], 0, 5))
    weights = tff.learning.models.ModelWeights.from_model(model)
    personalization = evaluation.Personalization(lambda outputs, batch: batch['x'][:, :2], em_steps=2)
    tuning = evaluation.LocalTuning(objectives.averaged_branches, epochs=1, learning_rate=0.1)
    per_example = lambda outputs, batch: (batch['x'], batch['y'])

    def objective(outputs, batch, client_log_weights=None):
      del client_log_weights  # Unused.
      return objectives.averaged_branches(outputs, batch)

    def evaluate_all():
      evaluator.evaluate(weights, objective, personalization=personalization)
      evaluator.evaluate(weights, objectives.averaged_branches, local_tuning=tuning)
      evaluator.collect_personalization(weights, 'unseen', per_example, (tf.float32, tf.int32))
      gc.collect()
      return set(context.context().list_function_names())

    first = evaluate_all()
    self.assertNotEmpty(first)
    for _ in range(3):
      self.assertEqual(evaluate_all(), first)
    # The check can fail: a new closure per call leaves a new function behind.
    evaluator.collect_personalization(weights, 'unseen', lambda outputs, batch: (batch['x'],), (tf.float32,))
    self.assertLess(len(first), len(context.context().list_function_names()))


if __name__ == '__main__':
  tf.test.main()
