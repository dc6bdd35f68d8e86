"""Names of metrics.csv columns that the evaluation writes and the report reads (no TensorFlow import, so the
report's binaries, which read results while runs go on, stay light)."""

# `train_routing_count_<mode>_<branch>`: a round's clients by true mode and trained branch (`routing`).
ROUTING_COUNT_PREFIX = 'train_routing_count_'
# `routing_count_<domain>_<branch>`: an evaluation's test examples by true domain and the branch they were routed to.
TEST_ROUTING_COUNT_PREFIX = 'routing_count_'
# `mixed_q<q>_{accuracy,loss}`: test batches with a share q of mode 1 (`evaluation.mixed_name`).
MIXED_PREFIX = 'mixed_q'
