"""`python -m zoo.serving '<json>'`: the TensorFlow half of `zoo.export` for a model trained under JAX
or torch. The JSON holds {"preset", "path", "signature", "options"}; an error is one line on stderr
(exit status 2); the export is written whole or not at all (zoo.export). Not a user command: `python -m zoo export` is."""

import json
import sys


def main(argv):
    from zoo.errors import ZooError
    from zoo.serving.export import export

    try:
        request = json.loads(argv[0])
        export(request["preset"], request["path"], signature=request["signature"], **request["options"])
    except ZooError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    except OSError as error:  # e.g. the base folder cannot be made
        print(f"error: {error.filename}: {error.strerror}" if error.filename else f"error: {error}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
