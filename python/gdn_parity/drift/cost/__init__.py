"""What exactness costs: the median time of one decode step and one verify step per variant."""
