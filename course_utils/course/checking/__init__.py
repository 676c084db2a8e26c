"""Checking the lessons: each run unattended (`lesson_runs`, in `jupyter_kernels` of its own), and what its
text claims held against what it computed (`claims`)."""
