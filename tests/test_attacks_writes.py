"""Must-block: granted modules and classes are read-only; the host's objects stay unchanged."""
from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest

WRITES = [
    ("import math", "math.floor = lambda x: 42", lambda: math.floor),
    ("import math", "math.pi = 3", lambda: math.pi),
    ("import math", "math.pi += 1", lambda: math.pi),
    ("import math", "math.pi **= 2", lambda: math.pi),
    ("import math", "del math.pi", lambda: math.pi),
    ("import math", "setattr(math, 'floor', print)", lambda: math.floor),
    ("import math", "delattr(math, 'floor')", lambda: math.floor),
    ("import math", "math.new_name = 1", lambda: getattr(math, "new_name", None)),
    ("import math as m", "m.sqrt = abs", lambda: math.sqrt),
    ("from math import floor\nimport math", "math.floor = floor", lambda: math.floor),
    ("import numpy as np", "np.random.seed = print", lambda: np.random.seed),
    ("import numpy as np", "np.pi = 3", lambda: np.pi),
    ("import numpy as np", "np.ndarray.sum = lambda self: 0", lambda: np.ndarray.sum),
    ("import numpy as np", "np.ndarray.custom = 1", lambda: getattr(np.ndarray, "custom", None)),
    ("import pandas as pd", "del pd.DataFrame", lambda: pd.DataFrame),
    ("import pandas as pd", "pd.DataFrame = dict", lambda: pd.DataFrame),
    ("import pandas as pd", "pd.DataFrame.to_csv = lambda *a, **k: 'X'", lambda: pd.DataFrame.to_csv),
    ("import pandas as pd", "setattr(pd.DataFrame, 'to_csv', print)", lambda: pd.DataFrame.to_csv),
    ("import pandas as pd", "del pd.DataFrame.to_csv", lambda: pd.DataFrame.to_csv),
    ("import pandas as pd", "pd.read_csv.__defaults__ = (1,)", lambda: pd.read_csv.__defaults__),
    ("import pandas as pd", "pd.read_csv.__kwdefaults__ = {}", lambda: pd.read_csv.__kwdefaults__),
    ("import pandas as pd", "pd.read_csv.__code__ = (lambda: 0).__code__", lambda: pd.read_csv.__code__),
    ("import pandas as pd", "pd.read_csv.__name__ = 'x'", lambda: pd.read_csv.__name__),
    ("import pandas as pd", "pd.read_csv.__doc__ = 'x'", lambda: pd.read_csv.__doc__),
    ("import pandas as pd", "pd.read_csv.extra = 1", lambda: getattr(pd.read_csv, "extra", None)),
    ("import json", "json.dumps.__kwdefaults__ = {}", lambda: json.dumps.__kwdefaults__),
    ("import json", "json.JSONEncoder.default = lambda self, o: 'X'", lambda: json.JSONEncoder.default),
    ("import json", "json.decoder.JSONDecoder.decode = print", lambda: json.decoder.JSONDecoder.decode),
    ("", "int.__repr__ = lambda self: 'X'", lambda: int.__repr__),
    ("", "str.upper = str.lower", lambda: str.upper),
    ("", "object.x = 1", lambda: getattr(object, "x", None)),
    ("", "len.__name__ = 'x'", lambda: len.__name__),
    ("", "print.__name__ = 'x'", lambda: None),
    ("import math", "object.__setattr__(math, 'pi', 3)", lambda: math.pi),
    ("import math", "type(math).__setattr__(math, 'pi', 3)", lambda: math.pi),
    ("import math", "super(type(math), math).__setattr__('pi', 3)", lambda: math.pi),
    ("import math", "math.__dict__['pi'] = 3", lambda: math.pi),
    ("import math", "vars(math)['pi'] = 3", lambda: math.pi),
    ("import math", "math.__class__ = type(math)", lambda: type(math).__name__),
    ("import pandas as pd", "pd.DataFrame.__init__.__defaults__ = None", lambda: pd.DataFrame.__init__.__defaults__),
    ("import pandas as pd\ndf = pd.DataFrame()", "df.__class__ = dict", lambda: pd.DataFrame().__class__),
    ("import collections", "collections.OrderedDict.__getitem__ = dict.__getitem__",
     lambda: collections_getitem()),
    ("import numpy as np", "np.random.RandomState.seed = print", lambda: np.random.RandomState.seed),
]


def collections_getitem():
    import collections
    return collections.OrderedDict.__getitem__


@pytest.mark.parametrize("setup,attack,probe", WRITES, ids=[w[1][:50] for w in WRITES])
def test_write_to_granted_module_or_class_is_refused(sandbox, setup, attack, probe):
    before = probe()
    assert sandbox.run(setup).ok
    r = sandbox.run(f"print('start')\n{attack}\nprint('after')")
    assert not r.ok, r
    assert "after" not in r.stdout
    assert r.denied("attribute", line=2) or r.denied("builtin", line=2) or r.denied("name", line=2) \
        or r.error_name in ("TypeError", "AttributeError"), r
    assert probe() is before or probe() == before, "host object changed"


def test_write_through_super_setattr_in_sandbox_subclass_of_library_class(sandbox):
    r = sandbox.run("import pandas as pd\n"
                    "class D(pd.DataFrame):\n"
                    "    def poke(self):\n"
                    "        super().__setattr__('_mgr', None)\n"
                    "D({'a': [1]}).poke()\n")
    assert not r.ok and r.denied("attribute"), r


def test_sandbox_own_objects_stay_writable(run):
    r = run("class K:\n    pass\nk = K()\nk.a = 1\nk._p = 2\nK.c = 3\nsetattr(k, 'b', 4)\ndelattr(k, 'b')\n"
            "def f():\n    pass\nf.tag = 1\nf.__doc__ = 'doc'\nprint(k.a, k._p, K.c, f.tag, f.__doc__)")
    assert r.ok and r.stdout == "1 2 3 1 doc\n", r


def test_register_accessor_does_not_change_host_pandas(sandbox):
    original = pd.DataFrame.__dict__.get("to_csv")
    try:
        sandbox.run("import pandas as pd\n"
                    "@pd.api.extensions.register_dataframe_accessor('to_csv')\n"
                    "class Acc:\n"
                    "    def __init__(self, obj):\n        self.obj = obj\n"
                    "    def __call__(self, *a, **k):\n        return 'HIJACKED'\n")
        assert pd.DataFrame.__dict__.get("to_csv") is original
        assert pd.DataFrame({"a": [1]}).to_csv() != "HIJACKED"
    finally:
        if pd.DataFrame.__dict__.get("to_csv") is not original:
            setattr(pd.DataFrame, "to_csv", original)


def test_host_modules_unchanged_after_many_attempts(sandbox):
    snapshot = {"math": dict(vars(math)), "json": dict(vars(json))}
    for _setup, attack, _probe in WRITES:
        sandbox.run(f"import math, json\n{attack}")
    assert dict(vars(math)) == snapshot["math"]
    assert dict(vars(json)) == snapshot["json"]
