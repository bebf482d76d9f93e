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


class DivergedError(UserError):
    """A training loss that became NaN or infinite: the run stops before it saves those weights."""


class OutputError(UserError):
    """A file or directory that cannot be written: a bad path, no permission, a full disk."""


def write_errors():
    """What writing a file raises: Python's OSError, TensorFlow's errors for the same causes
    (ENOSPC is ResourceExhausted, a file in the way FailedPrecondition)."""
    import tensorflow as tf
    return (OSError, tf.errors.ResourceExhaustedError, tf.errors.FailedPreconditionError,
            tf.errors.PermissionDeniedError, tf.errors.NotFoundError)


def cannot_write(path, error, remedy):
    """The OutputError for `error` (one of write_errors()) raised while writing `path`."""
    import errno
    import tensorflow as tf
    if isinstance(error, tf.errors.ResourceExhaustedError) or \
            getattr(error, "errno", None) in (errno.ENOSPC, errno.EDQUOT):
        reason = "no space left on device"
    elif isinstance(error, OSError):
        reason = error.strerror or str(error)
    else:
        reason = str(getattr(error, "message", error)).strip().splitlines()[0]
    return OutputError(f"cannot write {path}: {reason}; {remedy}")
