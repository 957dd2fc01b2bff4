"""The exception for mistakes a user can fix: the CLI prints it as one line, exit code 2."""


class UserError(Exception):
    """A problem the user caused and can fix (bad file, bad value); its message says what to do."""
