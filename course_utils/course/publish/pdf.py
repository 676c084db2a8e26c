"""Printing an HTML page to PDF with headless Chromium (the answer key, the handout)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path


def chromium() -> str:
    """The headless browser that prints PDFs."""
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found is None:
        raise RuntimeError("Printing to PDF needs Chromium. Install it with: apt-get install -y chromium "
                           "(or build the HTML only with --no-pdf).")
    return found


def print_pdf(page: str | os.PathLike, pdf: str | os.PathLike, *, timeout: int = 120) -> Path:
    """Prints an HTML file to PDF with headless Chromium (paper size from the page's CSS @page)."""
    pdf = Path(pdf)
    pdf.unlink(missing_ok=True)
    command = [chromium(), "--headless", "--disable-gpu", "--no-pdf-header-footer",
               f"--print-to-pdf={pdf.resolve()}", Path(page).resolve().as_uri()]
    if os.geteuid() == 0:
        command.insert(1, "--no-sandbox")  # Chromium refuses to start its sandbox as root
    done = subprocess.run(command, capture_output=True, text=True, timeout=timeout)
    if not pdf.exists():
        raise RuntimeError(f"Chromium wrote no PDF (exit {done.returncode}): {done.stderr[-500:]}")
    return pdf


def pdf_pages(pdf: str | os.PathLike) -> int:
    """The number of pages of a PDF (its page objects, counted)."""
    return len(re.findall(rb"/Type\s*/Page(?![a-zA-Z])", Path(pdf).read_bytes()))
