"""Helpers for the end-to-end test in a real JupyterLab driven by headless Chromium
(tests/test_browser_jupyterlab.py): a logging sink for every remote host, the JupyterLab server,
the browser, and the attack cells."""
