"""Attribution: which component's output first differs between Base decode and a verify run."""
