"""The registered models and their hyperparameters as the model files declare them, read from the source
(Python's `ast`, nothing executed) so that the command line checks names and `--set` values before a
backend loads: a mistake is one line in a fraction of a second, not after TensorFlow's start-up.

A model declares, in its file under zoo/models/: `@register("name", ...)` on its class; its
hyperparameters as the arguments of its `__init__` (or, for a variant, its parent's, with the class
attribute `defaults`); the names its rule must not leave empty in the class attribute `required`
(zoo.hyperparameters). These are the declarations the models run with: `zoo/declarations_test.py`
checks, for every registered model, that what is read here equals what the imported class says.
"""

import ast
import functools
from pathlib import Path

FOLDER = Path(__file__).resolve().parent / "models"


@functools.lru_cache(maxsize=None)
def models():
    """{registered name: {"class": class name, "hyperparameters": [names, in order], "required": (names)}}."""
    classes, registered = {}, {}
    for path in sorted(FOLDER.glob("*.py")):
        if path.name.endswith(("_test.py", "_presets.py")):
            continue
        for node in ast.parse(path.read_text()).body:
            if not isinstance(node, ast.ClassDef):
                continue
            classes[node.name] = node
            for decorator in node.decorator_list:
                if (isinstance(decorator, ast.Call) and getattr(decorator.func, "id", None) == "register"
                        and decorator.args and isinstance(decorator.args[0], ast.Constant)):
                    registered[decorator.args[0].value] = node.name
    return {name: dict(_declared(cls, classes), **{"class": cls}) for name, cls in registered.items()}


def _declared(name, classes):
    """{"hyperparameters", "required"} of class `name`: its own `__init__`'s arguments, or its parent's."""
    node = classes[name]
    attributes = {target.id: statement.value for statement in node.body if isinstance(statement, ast.Assign)
                  for target in statement.targets if isinstance(target, ast.Name)}
    init = next((s for s in node.body if isinstance(s, ast.FunctionDef) and s.name == "__init__"), None)
    parent = next((base.id for base in node.bases if isinstance(base, ast.Name) and base.id in classes), None)
    declared = _declared(parent, classes) if parent else {"hyperparameters": [], "required": ()}
    if init is not None:
        arguments = init.args
        names = [a.arg for a in arguments.posonlyargs + arguments.args + arguments.kwonlyargs][1:]  # (not self)
        declared = dict(declared, hyperparameters=names)
    if "required" in attributes:
        declared = dict(declared, required=tuple(ast.literal_eval(attributes["required"])))
    return declared
