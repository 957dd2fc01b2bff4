"""Reading a small file a user named (a config, a pose head) without trusting what it is.

`--config /dev/zero` never ends and a FIFO blocks its reader forever: only a regular file of a
bounded size is read, and anything else is a one-line `UserError` before a byte is read.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from edge_hf.core.errors import UserError

_KINDS = (
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


def read_small_file(path: Path, max_bytes: int, where: str, noun: str) -> bytes:
    """The bytes of `path` if it is a regular file of at most `max_bytes`, else a UserError
    `where: ...` naming `noun` ("a config"); errors opening it are OSError, as from open()."""
    # O_NONBLOCK: opening a FIFO nobody writes to returns at once (it is then refused below).
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    with os.fdopen(fd, "rb") as fh:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            kind = next((name for test, name in _KINDS if test(st.st_mode)), "not a file")
            raise UserError(
                f"{where}: {kind}, not a regular file; {noun} must be a regular file of at most "
                f"{max_bytes} bytes"
            )
        data = b"" if st.st_size > max_bytes else fh.read(max_bytes + 1)  # bounded if it grows
    size = max(st.st_size, len(data))
    if size > max_bytes:
        raise UserError(f"{where}: {size} bytes; {noun} is at most {max_bytes}")
    return data
