"""Must-allow: plotly as analysts write it (express, graph_objects, subplots, annotations, templates,
JSON round trip, show), and the colour palettes every plotly tutorial uses."""
from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def _restore_plotly_template():
    """pio.templates.default is process-wide at level none: put it back for the tests that follow."""
    import plotly.io as pio

    saved = pio.templates.default
    yield
    pio.templates.default = saved

PLOTLY_BATCH = """\
import plotly.express as px, plotly.graph_objects as go, plotly.io as pio, numpy as np, pandas as pd
from plotly.subplots import make_subplots
import plotly.colors
pio.templates.default = "plotly_white"
df = pd.DataFrame({"x": [1, 2, 3, 4], "y": [3, 1, 2, 5], "g": ["a", "b", "a", "b"]})
fig = px.line(df, x="x", y="y", color="g", markers=True)
fig.update_layout(title="T", legend_title_text="grp", xaxis=dict(title="X"))
fig.add_annotation(x=2, y=1, text="min")
fig.add_vline(x=3, line_dash="dash")
fig.add_hline(y=2)
fig.for_each_trace(lambda t: t.update(name=t.name.upper()))
fig.update_yaxes(range=[0, 6])
f2 = make_subplots(rows=1, cols=2, specs=[[{"type": "xy"}, {"type": "domain"}]], subplot_titles=("a", "b"))
f2.add_trace(go.Bar(x=["a"], y=[1]), row=1, col=1)
f2.add_trace(go.Pie(labels=["p", "q"], values=[1, 2]), row=1, col=2)
f3 = px.imshow(np.eye(3))
f4 = px.histogram(df, x="y", marginal="box")
f5 = px.box(df, x="g", y="y")
f6 = px.pie(df, names="g", values="y")
f7 = px.scatter_matrix(df, dimensions=["x", "y"])
f8 = go.Figure(layout=go.Layout(title=go.layout.Title(text="L")))
f9 = px.sunburst(df, path=["g"], values="y")
f10 = px.choropleth(locations=["FRA"], color=[1])
print(len(fig.data), fig.data[0].name, len(f2.data), f3.data[0].type, len(f4.data))
print(f5.data[0].type, f6.data[0].type, f7.data[0].type, f8.layout.title.text, f9.data[0].type, f10.data[0].type)
d = fig.to_dict(); j = fig.to_json()
fig.write_json("f.json")
print(type(d).__name__, len(j) > 100, pio.from_json(open("f.json").read()).layout.title.text)
fig.show(config={"displayModeBar": False})
f2.show()
"""


def test_plotly_batch(run):
    r = run(PLOTLY_BATCH)
    assert r.ok, r
    assert r.stdout == "2 A 2 heatmap 2\nbox pie splom L sunburst choropleth\ndict True T\n", r
    assert len(r.displays) == 2
    assert all("application/vnd.plotly.v1+json" in d for d in r.displays)
    assert not [d for d in r.denials if d["kind"] != "file"], r   # (file denial noise is reported separately)


@pytest.mark.parametrize("src,expected", [
    ("import plotly.express as px\nprint(px.colors.qualitative.Set2[0])", "rgb(102,194,165)\n"),
    ("import plotly.express as px\nprint(px.colors.sequential.Viridis[0])", "#440154\n"),
    ("import plotly.colors\nprint(plotly.colors.qualitative.Plotly[0])", "#636EFA\n"),
    ("import plotly.express as px\nfig = px.bar(x=['a'], y=[1], color_discrete_sequence=px.colors.qualitative.Pastel)\n"
     "print(len(fig.data))", "1\n"),
])
def test_plotly_colour_palettes(run, src, expected):
    r = run(src)
    assert r.ok and r.stdout == expected, r


def test_animation_frames_reach_the_front_end(run):
    r = run("import plotly.express as px\n"
            "df = px.data.gapminder()\n"
            "df = df[df['continent'] == 'Oceania']\n"
            "px.scatter(df, x='gdpPercap', y='lifeExp', animation_frame='year')")
    assert r.ok, r.error
    chart = r.done["charts"][-1]
    assert len(chart["frames"]) == 12
    assert chart["layout"]["sliders"] and chart["frames"][0]["data"]
