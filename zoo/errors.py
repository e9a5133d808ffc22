"""The zoo's one error type: a one-line message in the user's terms."""


class ZooError(ValueError):
    """A problem with the user's input, schema, preset or arguments.

    The message is one line that names what is wrong (a file, a feature, an argument) and, where it
    helps, what is allowed. The command line prints it and exits with status 2.
    """
