"""Complete-linkage agglomerative clustering in TF, for server steps that group clients or models.

CFL (Sattler et al. 2020) bipartitions a cluster's clients by complete linkage of the distances -cosine(updates)
down to two groups; FedDrift (Jothimurugesan et al. 2023, a baseline of the ShiftEx paper) merges its models by complete
linkage of its cluster distances until the closest groups are farther apart than delta'. Both are
`complete_linkage`: start from singletons, repeatedly join the two groups with the smallest linkage

  d(A, B) = max_{a in A, b in B} d(a, b)

and stop when `min_groups` remain or the smallest linkage exceeds `max_distance` (scipy's
`linkage(method='complete')` followed by `fcluster(criterion='maxclust')` or `fcluster(criterion='distance')`;
complete-linkage heights never decrease, so the two stops agree with scipy's cuts).
"""

import numpy as np
import tensorflow as tf


def complete_linkage(distance: tf.Tensor, members: tf.Tensor, min_groups: int = 1,
                     max_distance: float = np.inf) -> tf.Tensor:
  """Groups of the `members` (bool [m]) of symmetric distances [m, m].

  Returns int32 [m]: each member's group, named by its lowest member index; -1 for non-members. Merging stops when
  `min_groups` groups remain or no two groups are within `max_distance` (linkage <= max_distance merges).
  """
  m = tf.shape(distance)[0]
  infinity = tf.constant(np.inf, tf.float32)
  both = members[:, tf.newaxis] & members[tf.newaxis, :]
  linkage = tf.where(both & ~tf.eye(m, dtype=tf.bool), tf.cast(distance, tf.float32), infinity)
  label = tf.range(m)
  active = members

  def mergeable(linkage, label, active):
    closest = tf.reduce_min(linkage)
    return ((tf.reduce_sum(tf.cast(active, tf.int32)) > min_groups) & (closest <= max_distance)
            & (closest < infinity))

  def merge(linkage, label, active):
    flat = tf.argmin(tf.reshape(linkage, [-1]), output_type=tf.int32)
    i, j = tf.minimum(flat // m, flat % m), tf.maximum(flat // m, flat % m)
    joined = tf.maximum(linkage[i], linkage[j])  # Complete linkage: the largest distance between the groups.
    linkage = tf.tensor_scatter_nd_update(linkage, [[i]], joined[tf.newaxis])
    linkage = tf.tensor_scatter_nd_update(tf.transpose(linkage), [[i]], joined[tf.newaxis])
    linkage = tf.tensor_scatter_nd_update(linkage, [[i, i]], [infinity])
    linkage = tf.tensor_scatter_nd_update(linkage, [[j]], tf.fill([1, m], infinity))
    linkage = tf.transpose(tf.tensor_scatter_nd_update(tf.transpose(linkage), [[j]], tf.fill([1, m], infinity)))
    label = tf.where(tf.equal(label, j), i, label)
    active = tf.tensor_scatter_nd_update(active, [[j]], [False])
    return linkage, label, active

  _, label, _ = tf.while_loop(mergeable, merge, (linkage, label, active))
  return tf.where(members, label, -1)
