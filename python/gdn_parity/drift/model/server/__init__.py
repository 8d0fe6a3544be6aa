"""The server-faithful stack: a padded batch of requests through sglang's own backends and kernels."""
