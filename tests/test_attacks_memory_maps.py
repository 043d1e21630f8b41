"""Memory maps: an array over a map of a working-directory file dies with SIGBUS, the whole process, once the cell
truncates the file. np.load(mmap_mode=...), scipy.io.wavfile.read(mmap=True) and netcdf_file read into memory
instead while a cell runs, and the mmap module is not handed out.

Sink: docs/security.md, "Inventory of sinks", row *memory maps*. The attacks come from the independent review 5 at
level none (N5-5; docs/reviews.md).
"""
from __future__ import annotations

import pytest

from childcell import run_reporting

# From review 5 (docs/reviews.md, "Review 5").
# --- N5-5: memory-mapped arrays a library hands out, over a file the cell then truncates --------------------------
# numpy.memmap is refused by name, but np.load(mmap_mode='r'), scipy.io.wavfile.read(mmap=True) and
# scipy.io.netcdf_file(mmap=True) return arrays over an mmap of a working-directory file. The cell truncates
# the file (open(name, 'w')); the next read of the array touches pages past the end of the file: SIGBUS, and
# the kernel process dies at level none.

MMAP_ROUTES = {
    "np_load_mmap_mode": ("np.save('a.npy', np.ones(10**6))\nm = np.load('a.npy', mmap_mode='r')\n"
                          "open('a.npy', 'w').close()\nv = m.sum()\n"),
    "wavfile_mmap": ("from scipy.io import wavfile\nwavfile.write('a.wav', 8000, np.ones(10**6, dtype=np.int16))\n"
                     "rate, m = wavfile.read('a.wav', mmap=True)\nopen('a.wav', 'w').close()\nv = m.sum()\n"),
    "netcdf_mmap": ("from scipy.io import netcdf_file\nf = netcdf_file('c.nc', 'w')\nf.createDimension('x', 10**6)\n"
                    "var = f.createVariable('v', 'd', ('x',))\nvar[:] = 1.0\nf.close()\n"
                    "g = netcdf_file('c.nc', 'r', mmap=True)\nd = g.variables['v'].data\n"
                    "open('c.nc', 'w').close()\nv = d.sum()\n"),
}


# FINDING N5-5, fixed: no array a cell holds lies over a map of a file: np.load, wavfile.read and netcdf_file
# read into memory instead (guards), so the values still come. (Maps inside one library call stay: pandas 3
# maps a big CSV for the length of read_csv.)
@pytest.mark.parametrize("route", sorted(MMAP_ROUTES))
def test_memory_mapped_arrays_over_a_truncated_file_do_not_crash_the_process(route):
    result = run_reporting("import numpy as np\n" + MMAP_ROUTES[route])
    assert "crashed" not in result, f"the process died: {result}"
    assert result["status"] == "ok", result   # read into memory: truncating the file later changes nothing


def test_the_mmap_module_is_not_handed_out():
    result = run_reporting("import mmap\n")
    assert "crashed" not in result, result
    assert result["status"] == "error" and result["ename"] == "ImportDenied", result
