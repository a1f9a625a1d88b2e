"""A run's self-contained HTML report (``coevolve-engine report -o report.html``)."""

from coevolve_engine.report.html import CSP, build_report, render_report

__all__ = ["CSP", "build_report", "render_report"]
