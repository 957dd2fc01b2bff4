"""The exception for mistakes a user can fix: the CLI prints it as one line, exit code 2."""


class UserError(Exception):
    """A problem the user caused and can fix (bad file, bad value); its message says what to do."""


SHOWN_CHARS = 60


def shown(value: object, limit: int = SHOWN_CHARS) -> str:
    """A value as a one-line message shows it: its repr (control characters escaped), cut to
    `limit` characters with its length said, so a 70 000-character name is not a 70 000-character
    line."""
    text = repr(value)
    if len(text) <= limit:
        return text
    size = f"{len(value)} characters" if isinstance(value, (str, bytes)) else f"{len(text)} in all"
    return f"{text[:limit]}... ({size})"
