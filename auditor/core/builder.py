"""Building frozen slots dataclasses by the million, in half the time of their ``__init__``."""

from __future__ import annotations

from typing import Any


def builder(cls: type) -> Any:
    """A constructor of the frozen slots dataclass ``cls`` taking its fields in order (the
    defaulted ones may be left out): the same object as ``cls(...)`` in half the time. A frozen
    dataclass's ``__init__`` sets each field through ``object.__setattr__``; this one calls the
    slots' own setters. For the detector, which builds half a million findings at ten million
    events; a test pins it to ``cls``.
    """
    import dataclasses

    fields = dataclasses.fields(cls)
    if any(f.init is False or f.kw_only for f in fields) or hasattr(cls, "__post_init__"):
        raise TypeError(f"{cls.__name__}: builder() takes dataclasses that __init__ only assigns")
    scope: dict[str, Any] = {"_new": object.__new__, "_cls": cls, "_unset": object()}
    params, body = [], []
    for f in fields:
        scope[f"_set_{f.name}"] = cls.__dict__[f.name].__set__
        if f.default_factory is not dataclasses.MISSING:
            scope[f"_factory_{f.name}"] = f.default_factory
            params.append(f"{f.name}=_unset")
            body.append(f"    _set_{f.name}(self, _factory_{f.name}() if {f.name} is _unset else {f.name})\n")
            continue
        if f.default is dataclasses.MISSING:
            params.append(f.name)
        else:
            scope[f"_default_{f.name}"] = f.default
            params.append(f"{f.name}=_default_{f.name}")
        body.append(f"    _set_{f.name}(self, {f.name})\n")
    code = f"def build({', '.join(params)}):\n    self = _new(_cls)\n{''.join(body)}    return self\n"
    exec(compile(code, f"<builder of {cls.__name__}>", "exec"), scope)  # noqa: S102 - our own fields' names
    return scope["build"]
