"""A weighted mean in which every tensor of the client value has its own client weight.

  mean_t = sum_i w_it v_it / sum_i w_it   (0 where no client weighs in),

for methods whose model holds parts trained on different amounts of each client's data: pFedEM's sub-model k
weighted by the client's partition size n_ik (Chen et al., the per-component reading of Eq. 5/6) while a shared
extractor is weighted by n_i. The client weight has the structure of the value with a float32 scalar per tensor.
Only sums leave the clients (`federated_sum` of w_it v_it and of w_it).
"""

import tensorflow as tf
import tensorflow_federated as tff


class PerTensorWeightedMeanFactory(tff.aggregators.WeightedAggregationFactory):
  """`create(value_type, weight_type)`: weight_type has value_type's structure with float32 scalars."""

  def create(self, value_type, weight_type) -> tff.templates.AggregationProcess:

    @tff.federated_computation
    def initialize():
      return tff.federated_value((), tff.SERVER)

    @tff.tensorflow.computation(value_type, weight_type)
    def weigh(value, weight):
      return tf.nest.map_structure(lambda v, w: v * tf.cast(w, v.dtype), value, weight)

    @tff.tensorflow.computation(value_type, weight_type)
    def divide(total, weight_total):
      return tf.nest.map_structure(lambda v, w: tf.math.divide_no_nan(v, tf.cast(w, v.dtype)), total, weight_total)

    @tff.federated_computation(initialize.type_signature.result, tff.FederatedType(value_type, tff.CLIENTS),
                               tff.FederatedType(weight_type, tff.CLIENTS))
    def next_fn(state, value, weight):
      total = tff.federated_sum(tff.federated_map(weigh, (value, weight)))
      mean = tff.federated_map(divide, (total, tff.federated_sum(weight)))
      return tff.templates.MeasuredProcessOutput(state, mean, tff.federated_value((), tff.SERVER))

    return tff.templates.AggregationProcess(initialize, next_fn)
