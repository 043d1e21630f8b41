"""Fourth independent review at level `none`: attacks by an outsider told only the threat model.

Start 2026-11-26 13:31 UTC. Each test performs the real attack in an Engine with the data-science policy
(or a child process running one, when the attack changes process-wide state) and asserts that it failed
and nothing happened. Findings are strict xfails named FINDING N4-k.

Log of what was tried (one line per attempt class) and the result:
  pandas' holiday-calendar registry (AbstractHolidayCalendar's metaclass registers every subclass by
    name, replacing pandas' own USFederalHolidayCalendar); a Holiday whose observance= is a library
    callable (partial(np.savetxt, outside...)); the host later calls get_calendar(name).holidays()  file
                                                                     written outside by the host  FINDING N4-1
"""
from __future__ import annotations

import json

import pytest

from childcell import run_cell_in_child

PAYLOAD = "echo PWNED-BY-REVIEW4"


def _savetxt_partial(path) -> str:
    """A library callable that writes PAYLOAD to `path` whatever positional argument follows (np.savetxt
    writes the rows before it looks at `footer`)."""
    return (f"functools.partial(np.savetxt, {str(path)!r}, np.array([{PAYLOAD!r}], dtype=object), "
            "'%s', ' ', '\\n', '')")


# --- N4-1: pandas' holiday-calendar registry ---------------------------------------------------------------
# pandas.tseries.holiday keeps a module-level dict, holiday_calendars, that HolidayCalendarMetaClass fills
# with every subclass of AbstractHolidayCalendar when the class is made, by class name. A cell's class named
# USFederalHolidayCalendar replaces pandas' own. Its rules are Holiday objects whose observance= (a plain
# attribute the library calls with each date) is a library callable: not cell code, so no idle tick stops it,
# and outside the cell no confinement holds. Whoever calls get_calendar('USFederalHolidayCalendar').holidays()
# after the cell (the kernel's host code, another engine's session) runs it.

HOLIDAY_CELL = """
import functools, numpy as np
from pandas.tseries.holiday import AbstractHolidayCalendar, Holiday
class USFederalHolidayCalendar(AbstractHolidayCalendar):
    rules = [Holiday('planted', month=1, day=1, observance={writer})]
"""

HOST_USES_THE_CALENDAR = """
def probe_host(report):
    import pandas as pd
    from pandas.tseries.holiday import get_calendar
    calendar = get_calendar('USFederalHolidayCalendar')
    report['calendar_module'] = type(calendar).__module__
    try:
        calendar.holidays(pd.Timestamp('2020-01-01'), pd.Timestamp('2020-12-31'))
    except Exception as exc:
        report['host_error'] = type(exc).__name__
"""


@pytest.mark.xfail(strict=True, reason="FINDING N4-1: a cell subclass of AbstractHolidayCalendar replaces "
                   "pandas' USFederalHolidayCalendar in the process-wide holiday_calendars registry; its "
                   "Holiday(observance=partial(np.savetxt, outside...)) runs unconfined when the host calls "
                   "get_calendar(...).holidays() after the cell")
def test_holiday_calendar_registry_does_not_carry_a_cells_calendar_to_the_host(outside):
    target = outside / "holiday-observance.sh"
    result = run_cell_in_child(HOLIDAY_CELL.format(writer=_savetxt_partial(target)),
                               report=("status", "ename"), probe=HOST_USES_THE_CALENDAR)
    assert not target.exists(), f"the host ran the cell's observance unconfined: {json.dumps(result)}"
    assert result.get("calendar_module") == "pandas.tseries.holiday", result
