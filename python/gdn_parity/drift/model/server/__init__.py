"""The server-faithful stack: a padded batch through sglang's own backends and kernels."""
