"""Errors a user can fix. The CLI prints them as one line and exits non-zero."""


class UserError(Exception):
    """Bad input, a missing file, an inconsistent setting: something the user can fix.

    The message must name the problem and, when possible, the remedy.
    """


class DataError(UserError):
    """Data that cannot be read or prepared (missing files, offline download, bad bytes)."""


class ConfigError(UserError):
    """Flags or settings that contradict each other or name unknown things."""


class CheckpointError(UserError):
    """A checkpoint that is missing, unreadable or does not match the model."""
