"""The one exception type the CLI turns into a clear message and a non-zero exit."""


class GdnParityError(Exception):
    """A user-facing failure: the message says what is wrong and what to do."""
