"""Must-allow: a batch of everyday analysis idioms in one notebook-like cell, and io.StringIO/BytesIO."""
from __future__ import annotations

import pytest

EVERYDAY = '''\
import pandas as pd, numpy as np, csv, json
df = pd.DataFrame({"city": ["a", "b", "a"], "v": [1, 2, 3], "tags": [["x"], ["y", "z"], []]})
df.info()
pd.set_option("display.max_columns", None)
np.set_printoptions(precision=3)
print(df.groupby("city").size().reset_index(name="n").n.tolist())
print(pd.get_dummies(df, columns=["city"]).shape, df.explode("tags").shape, pd.crosstab(df.city, df.v).shape)
print(df.nlargest(2, "v").v.tolist(), df.sample(frac=1.0, random_state=1).shape, df.corr(numeric_only=True).shape)
print(pd.json_normalize([{"a": {"b": 1}}]).columns.tolist(), pd.DataFrame.from_dict({"a": [1]}).shape)
with open("rows.csv", "w", newline="") as fh:
    w = csv.writer(fh)
    w.writerow(["a", "b"])
    w.writerow([1, 2])
with open("rows.csv") as fh:
    print(list(csv.DictReader(fh)))
json.dump({"a": 1}, open("d.json", "w"))
print(json.load(open("d.json")))
class Config(dict):
    __getattr__ = dict.get
c = Config(a=1)
print(c.a, c.missing)
class Handler:
    def handle_x(self):
        return "x"
    def dispatch(self, name):
        return getattr(self, f"handle_{name}")()
    def __init__(self, **kw):
        for k, v in kw.items():
            setattr(self, k, v)
h = Handler(a=1, _b=2)
print(h.dispatch("x"), h.a, h._b, sorted(h.__dict__.items()))
print(list(zip(*[[1, 2], [3, 4]])), int("ff", 16), f"{1234.5:,.2f}")
from datetime import datetime, timedelta
print((datetime(2024, 1, 1) + timedelta(days=3)).strftime("%Y-%m-%d"))
from typing import List, Dict, Optional, Any, Tuple
def f(x: List[int], y: Optional[Dict[str, Any]] = None) -> Tuple[int, ...]:
    return tuple(x)
print(f([1, 2]))
df.loc[df.v > 1, "flag"] = True
df["v2"] = df["v"].astype(float) ** 2
df.columns = [c.upper() for c in df.columns]
print(df.columns.tolist(), max(df.V), round(float(df.V.mean()), 2))
'''

EXPECTED_TAIL = (
    "[2, 1]\n(3, 4) (4, 3) (2, 3)\n[3, 2] (3, 3) (1, 1)\n['a.b'] (1, 1)\n[{'a': '1', 'b': '2'}]\n{'a': 1}\n"
    "1 None\nx 1 2 [('_b', 2), ('a', 1)]\n[(1, 3), (2, 4)] 255 1,234.50\n2024-01-04\n(1, 2)\n"
    "['CITY', 'V', 'TAGS', 'FLAG', 'V2'] 3 2.0\n"
)


def test_everyday_idioms(run):
    r = run(EVERYDAY)
    assert r.ok, r
    assert r.stdout.endswith(EXPECTED_TAIL), r.stdout[-800:]
    assert "RangeIndex" in r.stdout   # df.info() printed to the cell's stdout
    assert r.denials == [], r


@pytest.mark.xfail(strict=True, reason="FALSE-POSITIVE: io.StringIO / io.BytesIO are granted by the io rule but "
                                       "refused by the value check (their __module__ is '_io', a forbidden origin); "
                                       "pd.read_csv(io.StringIO(text)) is everyday code")
@pytest.mark.parametrize("src,expected", [
    ("import io, pandas as pd\nprint(pd.read_csv(io.StringIO('a,b\\n1,2\\n')).sum().tolist())", "[1, 2]\n"),
    ("import io\nbuf = io.BytesIO()\nbuf.write(b'xy')\nprint(buf.getvalue())", "b'xy'\n"),
    ("from io import StringIO\nprint(StringIO('q').read())", "q\n"),
])
def test_io_stringio_bytesio(run, src, expected):
    r = run(src)
    assert r.ok and r.stdout == expected, r
