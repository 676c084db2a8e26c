"""The environment the course runs in: is this machine ready (`doctor`, `fresh_process`), and the course's
JupyterLab settings (`lab_settings`)."""
